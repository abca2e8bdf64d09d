//! The openraft type config of raftmq, its stored membership, and what `apply` answers.
//!
//! The `Raft` alias lives with the state machine ([`crate::sm::Raft`]).

use serde::Deserialize;
use serde::Serialize;

use crate::topic::TopicConfig;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;

openraft::declare_raft_types!(
    /// raftmq's Raft types: the CommitLog's payload and node types, [`ApplyResponse`].
    pub TypeConfig:
        D = raftmq_raft_log::types::AppPayload,
        R = ApplyResponse,
        Node = raftmq_raft_log::types::PeerNode,
        LeaderId = raftmq_raft_log::types::LeaderId,
);

/// The CommitLog / Raft log with raftmq's type config.
pub type LogStore = raftmq_raft_log::store::LogStore<TypeConfig>;

/// openraft's stored membership with our types.
pub type StoredMembership = openraft::StoredMembership<
    raftmq_raft_log::types::CommittedLeaderId,
    raftmq_raft_log::types::NodeId,
    raftmq_raft_log::types::PeerNode,
>;

/// Why apply refused a command (deterministically, on every replica).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RejectCode {
    /// The topic does not exist (and the batch does not allow auto-creation).
    NoSuchTopic,
    /// The queue id is not a write queue of the topic.
    NoSuchQueue,
    /// The topic is not writable.
    NoPermission,
    /// `CreateTopic` of an existing topic.
    TopicExists,
    /// Anything else the command carries that apply cannot accept.
    Invalid,
    /// Ack / ChangeInvisible with a receipt handle that is not the message's current one
    /// (stale after a redelivery or a deadline change, or never handed out).
    InvalidReceiptHandle,
    /// Ack / ChangeInvisible of a message no longer in flight because it was acked already
    /// (a retried ack: harmless).
    AlreadyAcked,
    /// `DeleteUser` of a user that does not exist.
    NoSuchUser,
}

/// One message a `Receive` handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    /// Its queue offset.
    pub queue_offset: QueueOffset,
    /// Physical offset of its record (= message id).
    pub phys_offset: PhysOffset,
    /// Record size in the CommitLog.
    pub size: u32,
    /// Delivery attempt (1 for the first).
    pub attempt: u32,
    /// Receipt handle: the log index of the `Receive` entry (same on every replica).
    pub handle: LogIndex,
    /// Invisible until (leader clock, ms).
    pub invisible_until_ms: TimestampMs,
}

/// The new state of a message whose invisibility deadline a `ChangeInvisible` moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvisibleChanged {
    /// The new receipt handle: the log index of the `ChangeInvisible` entry.
    pub handle: LogIndex,
    /// The new deadline (leader clock, ms).
    pub invisible_until_ms: TimestampMs,
    /// Delivery attempt (unchanged).
    pub attempt: u32,
}

/// The ack of one dispatched message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageAck {
    /// The message id (= `phys_offset`).
    pub msg_id: PhysOffset,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Position in the queue.
    pub queue_offset: QueueOffset,
    /// Physical offset of the record.
    pub phys_offset: PhysOffset,
    /// Leader's store timestamp of the message.
    pub store_timestamp_ms: TimestampMs,
    /// Set when this message was a retry of an identified send already stored (a dedup
    /// hit, see [`crate::dedup`]): nothing was stored now, every other field is the original
    /// result, and this is the log id of the entry that stored it.
    #[serde(default)]
    pub duplicate_of: Option<raftmq_raft_log::types::LogId>,
}

/// What `apply` answers for one entry (the leader's `client_write` response data).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyResponse {
    /// Blank and membership entries.
    None,
    /// One ack per message of a `SendBatch`, in order.
    Sent(Vec<MessageAck>),
    /// Result of a create / update.
    Topic(TopicConfig),
    /// A topic was deleted.
    TopicDeleted(String),
    /// A consumer offset was committed.
    OffsetCommitted,
    /// A user was added or replaced (its name).
    UserPut(String),
    /// A user was deleted (its name).
    UserDeleted(String),
    /// The messages a `Receive` handed out, in queue offset order (maybe none).
    Received(Vec<Delivered>),
    /// One result per `Ack` entry, in order: `Err` with [`RejectCode::InvalidReceiptHandle`]
    /// or [`RejectCode::AlreadyAcked`].
    Acked(Vec<Result<(), RejectCode>>),
    /// A `ChangeInvisible` moved the deadline.
    InvisibleChanged(InvisibleChanged),
    /// Deterministic refusal at apply time; nothing was dispatched.
    Rejected {
        /// Machine-readable reason.
        code: RejectCode,
        /// What a user can act on.
        message: String,
    },
}
