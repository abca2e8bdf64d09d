//! `raftmq_cli`: the `raftmq` command line and the test tooling around a raftmq cluster; the
//! client itself is the `raftmq_client` package.
//!
//! Layers, each using only the ones below it (no module imports one above):
//! - [`cmd`]: clap definitions and one module per command; the `raftmq` binary is
//!   `cmd::run` on a runtime.
//! - `failover`: `raftmq failover-test` (producers, fault injector, read-back, verdict).
//! - [`suite`]: `raftmq bench suite` (issue 14's cases on fresh local clusters, one table).
//! - `status`: the merged cluster view (`cluster status`) and waiting for a leader or a node.
//! - `deploy`: local clusters (manifest, per-node config, node processes).
//! - [`check`]: one checker per invariant over a send history and the queues read back from
//!   every node, shared by the failover test and `cluster-tests`; [`check::read`] reads a
//!   replica.
//! - [`bench`](mod@bench): the load generator, latency percentiles and throughput of `raftmq
//!   bench`, the disk's and a process's own figures.
//! - [`locate`]: finds (or builds) the `raftmq-node` and `raftmq` binaries.
//! - [`ports`]: free 127.0.0.1 ports for local clusters and tests.
//! - `output`, `clock`: tables and JSON printed, durations parsed, the wall clock.

pub mod bench;
pub mod check;
mod client_tls;
mod clock;
pub mod cmd;
mod credentials;
mod deploy;
/// Certificates of secure local clusters (the CA and node certificates of `cluster up --secure`).
pub use deploy::certs;
mod failover;
pub mod locate;
mod output;
pub mod ports;
pub mod status;
pub mod suite;
