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
//! - Sends are idempotent by default ([`ClientOptions::idempotent`]): each `Client` (clones
//!   share it) has a random producer id and gives each message a sequence number (the
//!   message's `producer_id` and `sequence` fields, stored as the properties
//!   `RAFTMQ_PRODUCER_ID`, `RAFTMQ_SEQUENCE`); the broker's dedup window answers a
//!   resend of the same identity with the original result instead of storing it again. So
//!   an unknown outcome is resent with the same identity, and an `UnknownOutcome` that is
//!   still returned (attempts used up) can be resent by the caller: give the message its
//!   identity once with [`Client::identify`] and pass that same message to every resend.
//!
//! Invariant: a message without an identity is never transmitted twice unless the caller
//! opted in; one with an identity is stored at most once while the broker's dedup window
//! (`dedup-window-ms`, default 2 min) remembers it.

mod api;
mod client;
#[cfg(test)]
mod client_tests;
mod credentials;
mod error;
mod producer;
mod retry;
mod send_stream;
mod tls;
mod users;

pub use client::Client;
pub use client::ClientOptions;
pub use credentials::Credentials;
pub use credentials::Signer;
pub use error::ClientError;
pub use producer::PRODUCER_ID_PROPERTY;
pub use producer::SEQUENCE_PROPERTY;
/// The wire types (`Message`, `PullRequest`, `SendResult`, ...).
pub use raftmq_proto::v1 as proto;
pub use tls::ClientTls;
