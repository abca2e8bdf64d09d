//! Helpers of the CLI tests: run the real `raftmq` binary, find (or build) `raftmq-node`, and a
//! local cluster in a temp dir that is torn down on drop.
//!
//! Locating `raftmq-node`: `CARGO_BIN_EXE_<name>` exists only for binaries of the package under
//! test, and `raftmq-node` belongs to another package. `raftmq_cli::locate::node_binary` finds it
//! as `raftmq` itself does: `$RAFTMQ_NODE_BIN` if set, else `<target>/<profile>/raftmq-node`
//! (the parent of the test executable's `deps/`, also the directory of `CARGO_BIN_EXE_raftmq`);
//! if that is missing, it runs `cargo build -p raftmq-node` (same profile, same target dir) once
//! and looks again; if it is still missing the tests fail saying how to build it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

/// The `raftmq` binary under test.
pub fn raftmq() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_raftmq"))
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(raftmq());
    cmd.args(args)
        .env_remove("RAFTMQ_SERVERS")
        .env_remove("RAFTMQ_CLUSTER");
    cmd
}

/// Runs `raftmq args...` (no node binary needed).
pub fn run(args: &[&str]) -> Output {
    command(args)
        .output()
        .expect("the raftmq binary built by cargo for this test can be executed")
}

/// Runs `raftmq args...` with `RAFTMQ_NODE_BIN` set (commands that start nodes).
pub fn run_nodes(args: &[&str]) -> Output {
    command(args)
        .env("RAFTMQ_NODE_BIN", node_bin())
        .output()
        .expect("the raftmq binary built by cargo for this test can be executed")
}

/// Runs `raftmq args...` (with the node binary) and asserts success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = run_nodes(args);
    assert!(
        out.status.success(),
        "raftmq {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parses one JSON document from stdout.
pub fn json(args: &[&str]) -> serde_json::Value {
    let text = ok(args);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"))
}

/// The `raftmq-node` binary, found (or built once) by `raftmq_cli::locate::node_binary`.
pub fn node_bin() -> PathBuf {
    raftmq_cli::locate::node_binary().unwrap_or_else(|e| panic!("{e:#}"))
}

/// A local cluster in a temp dir, stopped (and its processes killed) on drop.
pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub manifest: String,
}

impl TestCluster {
    /// `raftmq cluster up` with free ports and 1 MiB segments; returns the status JSON too.
    pub fn up(nodes: u32) -> (Self, serde_json::Value) {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let manifest = dir.path().join("cluster.toml").display().to_string();
        let c = Self { dir, manifest };
        let d = c.dir.path().display().to_string();
        let n = nodes.to_string();
        let status = json(&[
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
            "--json",
        ]);
        (c, status)
    }

    /// `raftmq <args> --cluster <manifest>`.
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

impl Drop for TestCluster {
    fn drop(&mut self) {
        let pids = self.pids();
        let _ = run(&self.args(&["cluster", "down"]));
        for pid in pids {
            // Last resort if `cluster down` failed: nothing may outlive the test.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}
