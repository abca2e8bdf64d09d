//! The real `raftmq` command line against local clusters it deploys itself (`raftmq cluster
//! up` in a temp dir): [`raftmq_binary`], runners that assert success and parse JSON, and
//! [`LocalCluster`], torn down (processes killed) on drop.
//!
//! Both binaries come from the one locator, [`raftmq_cli::locate`]: a test process builds each
//! once (`cargo build`, a no-op when current), so a test never runs a stale binary. `raftmq`
//! starts nodes from `$RAFTMQ_NODE_BIN`, set to [`crate::process::node_binary`].

use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

use crate::process::node_binary;

/// Path of the `raftmq` binary ([`raftmq_cli::locate::raftmq_binary`]).
pub fn raftmq_binary() -> anyhow::Result<PathBuf> {
    raftmq_cli::locate::raftmq_binary()
}

/// `raftmq args...` with the node binary set and no cluster taken from the environment.
fn command(args: &[&str]) -> Command {
    let raftmq = raftmq_binary().expect("the raftmq binary can be built");
    let node = node_binary().expect("the raftmq-node binary can be built");
    let mut cmd = Command::new(raftmq);
    cmd.args(args)
        .env("RAFTMQ_NODE_BIN", node)
        .env_remove("RAFTMQ_SERVERS")
        .env_remove("RAFTMQ_CLUSTER")
        .env_remove("RAFTMQ_ACCESS_KEY")
        .env_remove("RAFTMQ_SECRET_KEY");
    cmd
}

/// [`run`] with extra environment variables.
pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .expect("the raftmq binary built for this test can be executed")
}

/// Runs `raftmq args...` and returns its output, whatever the exit status.
pub fn run(args: &[&str]) -> Output {
    command(args)
        .output()
        .expect("the raftmq binary built for this test can be executed")
}

/// Runs `raftmq args...`, asserts success and returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "raftmq {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`ok`], parsing stdout as one JSON document.
pub fn json(args: &[&str]) -> serde_json::Value {
    let text = ok(args);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"))
}

/// A local cluster deployed by `raftmq cluster up` in a temp dir; `raftmq cluster down` (and,
/// as a last resort, SIGKILL of every pid in its manifest) on drop.
pub struct LocalCluster {
    /// The cluster dir (`cluster.toml`, one dir per node).
    pub dir: tempfile::TempDir,
    /// Path of `<dir>/cluster.toml`, for `--cluster`.
    pub manifest: String,
}

impl LocalCluster {
    /// `raftmq cluster up` of `nodes` nodes with free ports, 1 MiB segments and the disk
    /// ratios off (the host's disk fill must not decide a test); returns the status JSON too.
    pub fn up(nodes: u32) -> (Self, serde_json::Value) {
        Self::up_with(nodes, &[])
    }

    /// [`Self::up`] with more `cluster up` arguments (e.g. `--secure`).
    pub fn up_with(nodes: u32, extra: &[&str]) -> (Self, serde_json::Value) {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let manifest = dir.path().join("cluster.toml").display().to_string();
        let c = Self { dir, manifest };
        let d = c.dir.path().display().to_string();
        let n = nodes.to_string();
        let mut args = vec![
            "cluster",
            "up",
            "--dir",
            &d,
            "--nodes",
            &n,
            "--base-port",
            "0",
            "--segment-bytes",
            "1048576",
            "--set",
            "disk-clean-ratio=1.0",
            "--set",
            "disk-reject-ratio=1.0",
            "--json",
        ];
        args.extend_from_slice(extra);
        let status = json(&args);
        (c, status)
    }

    /// `<args> --cluster <manifest>`.
    pub fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut v = args.to_vec();
        v.extend(["--cluster", self.manifest.as_str()]);
        v
    }

    /// JSON output of `raftmq <args> --json --cluster <manifest>`.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut v = self.args(args);
        v.push("--json");
        json(&v)
    }

    /// Pids in the manifest.
    pub fn pids(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(&self.manifest).unwrap_or_default();
        let v: toml::Value = toml::from_str(&text).unwrap_or(toml::Value::Integer(0));
        v.get("nodes")
            .and_then(|n| n.as_array())
            .map(|nodes| {
                nodes
                    .iter()
                    .filter_map(|n| n.get("pid").and_then(|p| p.as_integer()))
                    .map(|p| p as u32)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let pids = self.pids();
        let _ = run(&self.args(&["cluster", "down"]));
        for pid in pids {
            // Last resort if `cluster down` failed: nothing may outlive the test.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}
