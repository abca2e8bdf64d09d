//! Node processes: finding the `raftmq-node` binary, starting a node detached from the CLI,
//! signalling it and waiting for it to exit.
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

/// Environment variable naming the `raftmq-node` binary to run (overrides the lookup).
pub const NODE_BIN_ENV: &str = "RAFTMQ_NODE_BIN";

const NODE_BIN: &str = "raftmq-node";

/// The `raftmq-node` binary: `$RAFTMQ_NODE_BIN`, else next to the running executable (and its
/// parent directory, for test executables in `target/*/deps`), else built by cargo when run by
/// `cargo run`, else on `PATH`.
pub fn find_node_binary() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(NODE_BIN_ENV) {
        let p = PathBuf::from(p);
        anyhow::ensure!(p.is_file(), "{NODE_BIN_ENV}={} is not a file", p.display());
        return Ok(p);
    }
    let mut beside = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            beside.push(dir.join(NODE_BIN));
            if let Some(up) = dir.parent() {
                beside.push(up.join(NODE_BIN));
            }
        }
    }
    if let Some(found) = beside.into_iter().find(|p| p.is_file()) {
        return Ok(found);
    }
    if let Some(built) = build_under_cargo_run()? {
        return Ok(built);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(NODE_BIN))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "cannot find the {NODE_BIN} binary next to this executable or on PATH; build it \
                 with `cargo build --release -p raftmq-node` (same profile as raftmq), or set \
                 {NODE_BIN_ENV}"
            )
        })
}

/// Under `cargo run` of this package (cargo sets `CARGO` and `CARGO_PKG_NAME`), builds the
/// missing `raftmq-node` with the same cargo, profile and target dir, so that
/// `cargo run --release --bin raftmq -- cluster up` works on a fresh checkout. Returns the
/// binary, or `None` when not run by cargo.
fn build_under_cargo_run() -> anyhow::Result<Option<PathBuf>> {
    let (Some(cargo), Ok(pkg)) = (std::env::var_os("CARGO"), std::env::var("CARGO_PKG_NAME"))
    else {
        return Ok(None);
    };
    let exe = std::env::current_exe()?;
    let (Some(profile_dir), true) = (exe.parent(), pkg == env!("CARGO_PKG_NAME")) else {
        return Ok(None);
    };
    let Some(target_dir) = profile_dir.parent() else {
        return Ok(None);
    };
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => return Ok(None),
    };
    eprintln!("raftmq-node is not built yet; building it (cargo build --profile {profile} -p raftmq-node) ...");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--profile",
        &profile,
        "-p",
        "raftmq-node",
        "--bin",
        NODE_BIN,
    ])
    .env("CARGO_TARGET_DIR", target_dir)
    .stdout(Stdio::null());
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        cmd.current_dir(dir);
    }
    let status = cmd
        .status()
        .context("cannot run cargo to build raftmq-node")?;
    anyhow::ensure!(
        status.success(),
        "cargo build -p raftmq-node failed ({status})"
    );
    let bin = profile_dir.join(NODE_BIN);
    Ok(bin.is_file().then_some(bin))
}

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
        .map(|c| String::from_utf8_lossy(&c).contains(NODE_BIN))
        .unwrap_or(true);
    !zombie && is_node
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
    fn missing_binary_error_says_how_to_build() {
        std::env::set_var(NODE_BIN_ENV, "/definitely/not/here");
        let err = find_node_binary().unwrap_err().to_string();
        std::env::remove_var(NODE_BIN_ENV);
        assert!(err.contains("not a file"), "{err}");
    }
}
