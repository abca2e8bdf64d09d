//! Node processes: starting a node detached from the CLI, signalling it and waiting for it to
//! exit (finding the binary is `crate::locate`).
//!
//! Signals go through `libc` (`kill`, `waitpid`, `setsid`): the standard library can only
//! SIGKILL its own children, and the CLI must SIGTERM/SIGKILL nodes started by earlier runs.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;

use crate::locate::NODE;

/// Starts `bin --config <config>` in its own session (so it outlives the CLI and ignores the
/// terminal's Ctrl-C and hang-up), stdout and stderr appended to `log`. Returns the pid.
pub fn spawn_node(bin: &Path, config: &Path, log: &Path) -> anyhow::Result<u32> {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open log file {}", log.display()))?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(bin);
    // Plain text logs: the file is not a terminal.
    cmd.arg("--config")
        .arg(config)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: the closure runs in the forked child before exec and calls only setsid(2), which
    // is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    Ok(child.id())
}

/// True when `pid` is a live (not zombie) `raftmq-node` process. Where `/proc` exists it also
/// checks the command line, so a recycled pid is not mistaken for a node.
pub fn is_running(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks whether the process exists; no signal is sent.
    let exists = unsafe { libc::kill(p, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if !proc_dir.exists() {
        return true;
    }
    let zombie = std::fs::read_to_string(proc_dir.join("stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    let is_node = std::fs::read(proc_dir.join("cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains(NODE.name))
        .unwrap_or(true);
    !zombie && is_node
}

/// Pids of the live `raftmq-node` processes whose command line names `config` (as
/// [`spawn_node`] passes it: `--config <config>`), found by reading `/proc/*/cmdline`. Empty
/// where `/proc` does not exist.
pub fn node_pids_with_config(config: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = config.as_os_str().as_encoded_bytes();
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let mut args = cmdline.split(|&b| b == 0);
            let is_node = args
                .next()
                .is_some_and(|a0| String::from_utf8_lossy(a0).contains(NODE.name));
            is_node && args.any(|a| a == want) && is_running(pid)
        })
        .collect()
}

/// Sends `signal` (e.g. `libc::SIGTERM`) to `pid`.
pub fn signal(pid: u32, signal: libc::c_int) -> anyhow::Result<()> {
    let p = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(p, signal) } == -1 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e).with_context(|| format!("cannot signal pid {pid}"));
        }
    }
    Ok(())
}

/// Reaps `pid` if it is our child (no zombie is left behind); no-op otherwise.
fn reap(pid: u32) {
    if let Ok(p) = libc::pid_t::try_from(pid) {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG writes only into `status`; ECHILD (not our child) is fine.
        unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
    }
}

/// Waits until `pid` is gone, up to `timeout`. Returns whether it exited.
pub fn wait_exit(pid: u32, timeout: Duration) -> bool {
    let start = Instant::now();
    loop {
        reap(pid);
        if !is_running(pid) {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL. Returns true if SIGKILL was needed.
pub fn terminate(pid: u32, grace: Duration) -> anyhow::Result<bool> {
    signal(pid, libc::SIGTERM)?;
    if wait_exit(pid, grace) {
        return Ok(false);
    }
    signal(pid, libc::SIGKILL)?;
    wait_exit(pid, Duration::from_secs(5));
    Ok(true)
}

/// The last `lines` lines of a log file (for error messages).
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_pid_is_not_a_node_and_dead_pids_are_not_running() {
        assert!(!is_running(std::process::id()));
        assert!(!is_running(u32::MAX));
        signal(i32::MAX as u32, 0).unwrap();
    }

    #[test]
    fn no_node_runs_with_a_config_nobody_uses() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(node_pids_with_config(&tmp.path().join("node.toml")).is_empty());
    }
}
