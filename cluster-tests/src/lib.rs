//! Multi-node tests of raftmq: the harness that proves an acknowledged send survives anything
//! that leaves a majority with its data.
//!
//! - [`cluster`]: in-process clusters of 3 or 5 [`raftmq_node::Node`]s on 127.0.0.1 port 0
//!   (short election timeouts, small segments), with crash ([`cluster::TestCluster::kill`]),
//!   restart on the same data dir, and peer-link faults (partitions, one-way cuts, delays, lost
//!   responses) through [`raftmq_node::network::fault`].
//! - [`power`]: simulated power loss: cut a stopped node's CommitLog back to its last flushed
//!   position and leave a torn partial record.
//! - [`process`]: clusters of real `raftmq-node` processes for SIGKILL, SIGSTOP/SIGCONT,
//!   SIGTERM.
//! - [`workload`]: tagging producers recording every attempt into a [`check::History`], and a
//!   status sampler recording [`check::Observation`]s.
//! - [`reader`]: reads every queue back from every node into [`check::ReplicaRead`]s.
//!
//! The invariants themselves are the checkers of `raftmq_cli::check` ([`check::check_all`]),
//! shared with `raftmq failover-test`. Each scenario is one file under `tests/`.

pub mod cluster;
pub mod power;
pub mod process;
pub mod reader;
pub mod retention;
pub mod scenario;
pub mod workload;

pub use raftmq_cli::check;
pub use raftmq_node::config::FlushPolicy;

/// Installs a test tracing subscriber once (`RUST_LOG`, default `warn`).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}
