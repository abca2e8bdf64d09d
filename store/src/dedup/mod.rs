//! The replicated dedup window of idempotent sends (exactly-once producers).
//!
//! A message may carry an *identity*: a producer id and a per-producer sequence number (the
//! reserved properties [`PRODUCER_ID_PROPERTY`] and [`SEQUENCE_PROPERTY`], or the same two as
//! the message's [`crate::message::SendIdentity`] fields, which `raftmq_client` sets and the
//! record stores as those properties), or else a client message id ([`CLIENT_MESSAGE_ID_PROPERTY`], RocketMQ's
//! `UNIQ_KEY`, which the official RocketMQ clients send with every message). The leader
//! stamps the window's settings ([`DedupParams`]) into every `SendBatch` entry that holds an
//! identified message; apply ([`crate::sm::dispatch`]) then looks each identified message up
//! in the [`DedupWindow`]: a hit stores nothing and answers with the original result, a miss
//! is dispatched and remembered.
//!
//! The window is replicated state: it changes only in apply, in log order, and only from
//! the entries' own bytes (the leader's timestamp and the stamped settings), so every replica
//! and every replay arrives at the same window. It is saved in the dispatch checkpoint and in
//! snapshots.

mod identity;
mod positions;
mod window;

pub use identity::check_identity;
#[cfg(test)]
use identity::decimal;
pub use identity::dedup_key;
pub use identity::has_identity;
pub use identity::Identity;
pub use identity::CLIENT_MESSAGE_ID_PROPERTY;
pub use identity::MAX_PRODUCER_ID_BYTES;
pub use identity::PRODUCER_ID_PROPERTY;
pub use identity::SEQUENCE_PROPERTY;
pub use window::DedupParams;
pub use window::DedupWindow;
pub use window::StoredSend;
pub use window::Unseen;

#[cfg(test)]
#[path = "window_tests.rs"]
mod window_tests;
