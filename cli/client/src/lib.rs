//! `raftmq_client`: the Rust client of raftmq, used by the `raftmq` command line, the
//! failover test and the cluster tests.
//!
//! A [`Client`] is given seed addresses (client gRPC ports of any members). It learns the
//! other members and the leader from `ClusterStatus`, sends writes to the leader, and follows
//! the leader hint a node attaches to a refused write (the `x-raftmq-error-bin` trailer, see
//! `raftmq_proto`). Retry rules:
//! - Reads (pull, queries, fetch offset, topic list, status) are retried on other nodes with
//!   capped exponential backoff.
//! - Writes are retried only when the failure proves they were not applied: the connection
//!   could not be made, or the server said `not_applied` (e.g. "not leader, here is the
//!   leader"). Any other failure (timeout, lost connection, no quorum) is returned as
//!   [`ClientError::UnknownOutcome`], distinct from a definite failure, unless the caller
//!   opted into resending with [`ClientOptions::retry_unknown_writes`] (which may duplicate).
//! - Idempotent writes (commit offset, update topic) are retried like reads.
//!
//! Invariant: a send is never transmitted twice unless the caller opted in.

mod api;
mod client;
#[cfg(test)]
mod client_tests;
mod error;
mod send_stream;

pub use client::Client;
pub use client::ClientOptions;
pub use error::ClientError;
/// The wire types (`Message`, `PullRequest`, `SendResult`, ...).
pub use raftmq_proto::v1 as proto;
