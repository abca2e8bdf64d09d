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
//! Every fault scenario runs twice ([`plain_and_secure!`]): on a plaintext cluster and on a
//! [`Security::Secure`] one (TLS on every listener, mutual TLS between the nodes, access-key
//! authentication: what `raftmq cluster up --secure` deploys), one after the other.
//!
//! The invariants themselves are the checkers of `raftmq_cli::check` ([`check::check_all`]),
//! shared with `raftmq failover-test`. Each scenario is one file under `tests/`: `s*_*.rs`
//! (fault scenarios), `node_*.rs` (one node's API and lifecycle on small clusters), `cli_*.rs`
//! (the command line end to end), `peer_transport.rs` (the Raft transport with in-memory
//! stores).

pub mod auth;
pub mod cli;
pub mod cluster;
pub mod metrics;
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

/// How a test cluster guards its ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// Plaintext on loopback, no authentication.
    Plain,
    /// What `raftmq cluster up --secure` deploys: TLS on every listener with a test CA,
    /// mutual TLS with the member check between the nodes, and access-key authentication;
    /// the harness's clients trust the CA and sign as root.
    Secure,
}

/// Holds one scenario run at a time in a test binary (see [`plain_and_secure!`]): the two
/// runs of a scenario would otherwise share the two cores and each other's timing.
/// (A tokio mutex: each test has its own runtime, and a failed run does not poison it.)
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A scenario run on a plaintext and on a secure cluster: `plain_and_secure! { async fn
/// name(security) -> anyhow::Result<()> { .. } }` makes the tests `name::plain` and
/// `name::secure`, each calling the body with its [`Security`], one at a time in the binary
/// ([`one_at_a_time`]). The body starts its cluster with `TestCluster::start_as` or
/// `ProcCluster::start_as`.
#[macro_export]
macro_rules! plain_and_secure {
    ($(#[doc = $doc:expr])* async fn $name:ident($security:ident) -> $ret:ty $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($security: $crate::Security) -> $ret $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn plain() -> $ret {
                let _one = $crate::one_at_a_time().await;
                run($crate::Security::Plain).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn secure() -> $ret {
                let _one = $crate::one_at_a_time().await;
                run($crate::Security::Secure).await
            }
        }
    };
}

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
