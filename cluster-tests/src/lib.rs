//! Multi-node tests of raftmq: the harness that proves an acknowledged send survives anything
//! that leaves a majority with its data, and the one harness of every multi-node test.
//!
//! - [`cluster`]: in-process clusters of [`raftmq_node::Node`]s on 127.0.0.1 ports picked
//!   below the kernel's ephemeral range ([`raftmq_cli::ports`], so a restart rebinds its
//!   port), short election timeouts, small segments; crash ([`cluster::TestCluster::kill`]),
//!   restart on the same data dir, join, and peer-link faults (partitions, one-way cuts,
//!   delays, lost responses) through [`raftmq_node::network::fault`].
//! - [`node_config`]: the one test node config ([`node_config::test_config`]) and listeners.
//! - [`raw`]: raw gRPC calls to one node's client API, below `raftmq_client`.
//! - [`power`]: simulated power loss: cut a stopped node's CommitLog back to its last flushed
//!   position and leave a torn partial record.
//! - [`process`]: clusters of real `raftmq-node` processes for SIGKILL, SIGSTOP/SIGCONT,
//!   SIGTERM.
//! - [`cli`]: the real `raftmq` binary and the local clusters it deploys.
//! - [`workload`]: tagging producers recording every attempt into a [`check::History`], and a
//!   status sampler recording [`check::Observation`]s.
//! - [`reader`]: reads every queue back from every node into [`check::ReplicaRead`]s.
//!
//! The invariants themselves are the checkers of `raftmq_cli::check` ([`check::check_all`]),
//! shared with `raftmq failover-test`. Each scenario is one file under `tests/`: `s*_*.rs`
//! (fault scenarios), `node_*.rs` (one node's API and lifecycle on small clusters), `cli_*.rs`
//! (the command line end to end), `peer_transport.rs` (the Raft transport with in-memory
//! stores).

pub mod auth;
pub mod cli;
pub mod cluster;
pub mod node_config;
pub mod power;
pub mod process;
pub mod raw;
pub mod reader;
pub mod retention;
pub mod rocketmq;
pub mod scenario;
pub mod tls;
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
