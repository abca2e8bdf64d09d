//! The real binary's failure modes that need no cluster: usage errors exit 2, runtime errors
//! exit 1 with one line on stderr.

use std::process::Command;
use std::process::Output;

/// Runs the `raftmq` binary under test with `args` (no cluster taken from the environment).
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(args)
        .env_remove("RAFTMQ_SERVERS")
        .env_remove("RAFTMQ_CLUSTER")
        .output()
        .expect("the raftmq binary built by cargo for this test can be executed")
}

#[test]
fn usage_errors_exit_2() {
    let out = run(&["send", "--body", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--topic"));
    let out = run(&["cluster", "kill", "leader"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_cluster_is_one_line_exit_1() {
    let out = run(&[
        "cluster",
        "status",
        "--cluster",
        "/nonexistent/cluster.toml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("raftmq: "), "{err}");
    assert!(err.contains("raftmq cluster up"), "{err}");
}

#[test]
fn unreachable_servers_fail_cleanly() {
    let out = run(&["--servers", "127.0.0.1:1", "topic", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn help_shows_examples() {
    let out = run(&["send", "--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("raftmq send --topic orders"));
}
