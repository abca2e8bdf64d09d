//! raftmq-node: one broker node of a Raft group whose log is the CommitLog.
//!
//! This crate assembles a node and owns its wire side:
//! - [`server`]: [`Node::start`] / [`NodeHandle`] (in-process, used by `main.rs` and the
//!   tests): open the CommitLog and the store, start Raft, serve, bootstrap, shut down.
//! - [`config`]: [`config::NodeConfig`], read from a TOML file and overridden by flags,
//!   validated at start.
//! - [`pipeline`]: the one write pipeline every message entry point calls on the leader
//!   (validate, choose queues, encode, propose with its quorum semantics
//!   ([`pipeline::propose`]), durable wait, acks, send metrics), on store-level messages.
//! - [`service`]: the client gRPC service (`RaftMq`): translates its wire types to and from
//!   the pipeline, forwards writes to the leader, serves reads and admin.
//! - [`rocketmq`]: the RocketMQ 5 protocol (`apache.rocketmq.v2.MessagingService`) the
//!   official RocketMQ clients speak, on its own listener, through the same pipeline.
//! - [`error`]: [`error::NodeError`] and the one mapping to gRPC statuses.
//! - [`network`]: the Raft transport between peers (openraft's `RaftNetworkFactory` over tonic,
//!   and the `RaftPeer` gRPC service that feeds incoming requests into `openraft::Raft`).
//! - [`bootstrap`] (initialise once / join as learner), [`retention`] (drives Raft purge and
//!   segment deletion), [`metrics`] (Prometheus text at `/metrics`), [`check_quorum`] (a
//!   leader cut off from its quorum stops claiming leadership), `handover` (a stopping leader
//!   hands leadership over first).
//!
//! Data flow: a client's write arrives on the client service of any node; a follower forwards
//! it once to the leader; the leader's [`pipeline`] validates it, checks it heard from a
//! quorum, encodes one `SendBatch` entry and calls `Raft::client_write`. The entry reaches the followers through
//! [`network::PeerNetworkFactory`]; on each follower [`network::PeerService`] hands it to Raft,
//! which appends it to the CommitLog (`raftmq-raft-log`) and, once committed, applies it
//! (`raftmq-store`). The leader answers after its own apply. Reads are served by any node from
//! its dispatched (committed) data.
//!
//! Invariants: peers of different clusters never exchange Raft messages (every peer request
//! carries and is checked against the cluster id); a write refused with `not_applied = true`
//! was never appended to any log; a node initialises a cluster only when its Raft state is
//! empty.

pub mod auth;
pub mod bootstrap;
pub mod check_quorum;
pub mod config;
pub mod core;
pub mod disk_guard;
pub mod error;
/// Fuzz target bodies and the table of every target (for `fuzz/` and the corpus replay
/// test; not an API).
#[doc(hidden)]
pub mod fuzzing;
mod handover;
pub mod long_poll;
pub mod metrics;
pub mod network;
pub mod pipeline;
pub mod retention;
pub mod rocketmq;
mod serve;
pub mod server;
pub mod service;
mod snapshot_io;
pub mod tls;
mod watchers;

pub use server::Node;
pub use server::NodeAddrs;
pub use server::NodeHandle;
pub use server::NodeListeners;
