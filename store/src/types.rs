//! Identities used across the store crate.

pub use raftmq_raft_log::types::LogIndex;
pub use raftmq_raft_log::types::PhysOffset;

/// Index of a queue inside a topic (`0..queue_count`).
pub type QueueId = u32;

/// Position of a message inside one queue: contiguous from the queue's first message, identical
/// on every replica.
pub type QueueOffset = u64;

/// Stable 64-bit hash of a message tag, stored in ConsumeQueue units (see [`crate::hash`]).
pub type TagHash = u64;

/// Milliseconds since the Unix epoch.
pub type TimestampMs = u64;

pub use raftmq_raft_log::types::AppPayload;
