//! The real binary's failure modes that need no cluster (usage errors exit 2, runtime errors
//! exit 1 with one line on stderr), and its hidden `bench echo` peer.

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

/// The suite's hop probe against the real binary's hidden `bench echo`: a child process
/// answers every round trip and ends when the probe closes its connection.
#[test]
fn hop_probe_round_trips_with_the_echo_process() {
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_raftmq"));
    let f = raftmq_cli::bench::hop::measure(program, std::time::Duration::from_millis(200))
        .expect("the echo child answers");
    assert!(f.round_trips >= 1, "{f:?}");
    assert!(
        f.round_trip_p50_us >= 1 && f.round_trip_p50_us <= f.round_trip_p99_us,
        "{f:?}"
    );
    // `bench echo` is hidden from the help.
    let out = run(&["bench", "--help"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("echo"));
}
