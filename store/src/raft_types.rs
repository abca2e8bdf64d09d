//! The openraft type config of raftmq, its stored membership, and what `apply` answers.
//!
//! The `Raft` alias lives with the state machine ([`crate::sm::Raft`]).

use serde::Deserialize;
use serde::Serialize;

use crate::topic::TopicConfig;
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
    /// Deterministic refusal at apply time; nothing was dispatched.
    Rejected {
        /// Machine-readable reason.
        code: RejectCode,
        /// What a user can act on.
        message: String,
    },
}
