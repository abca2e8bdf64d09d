//! raftmq-node: one broker node of a Raft group whose log is the CommitLog.
//!
//! This crate owns the wire side of a node:
//! - [`config`]: [`config::NodeConfig`], read from a TOML file and overridden by flags,
//!   validated at start.
//! - [`network`]: the Raft transport between peers (openraft's `RaftNetworkFactory` over tonic,
//!   and the `RaftPeer` gRPC service that feeds incoming requests into `openraft::Raft`).
//!
//! Data flow: a client's write arrives on the client service (next step), becomes one entry
//! in `Raft::client_write`, and reaches the followers through [`network::PeerNetworkFactory`];
//! on each follower [`network::PeerService`] hands it to Raft, which appends it to the
//! CommitLog (`raftmq-raft-log`) and, once committed, applies it (`raftmq-store`).
//!
//! Invariant: peers of different clusters never exchange Raft messages (every peer request
//! carries and is checked against the cluster id).

pub mod bootstrap;
pub mod config;
pub mod core;
pub mod error;
pub mod metrics;
pub mod network;
pub mod retention;
pub mod server;
pub mod service;
mod snapshot_io;

pub use server::Node;
pub use server::NodeAddrs;
pub use server::NodeHandle;
pub use server::NodeListeners;
