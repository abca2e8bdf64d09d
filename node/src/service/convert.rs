//! Conversions between the wire types (`raftmq_proto::v1`) and the store's types, with the
//! argument checks that belong to the conversion (signed ids, enum values).

use raftmq_proto::v1 as pb;
use raftmq_raft_log::types::LogId;
use raftmq_store::message::Message;
use raftmq_store::message::SendIdentity;
use raftmq_store::topic::Permissions;
use raftmq_store::topic::TopicConfig;
use raftmq_store::types::QueueId;
use raftmq_store::MessageAck;
use raftmq_store::PullStatus;
use raftmq_store::StoredMessage;

use crate::error::NodeError;

/// The wire form of a Raft log id.
pub fn log_id(id: &LogId) -> pb::LogId {
    pb::LogId {
        term: id.leader_id.term,
        index: id.index,
    }
}

/// A queue id from the wire: `0..=i32::MAX`.
pub fn queue_id(field: &str, id: i32) -> Result<QueueId, NodeError> {
    u32::try_from(id)
        .map(QueueId::new)
        .map_err(|_| NodeError::InvalidArgument(format!("{field} {id} is negative")))
}

/// The queue a producer asked for: `None` (unset or -1) lets the leader choose.
pub fn wanted_queue(id: Option<i32>) -> Result<Option<QueueId>, NodeError> {
    match id {
        None | Some(-1) => Ok(None),
        Some(q) => queue_id("message queue_id", q).map(Some),
    }
}

/// A producer's message as the store encodes it (queue id 0 until the leader picks one).
/// The identity fields come both or neither.
pub fn message_in(m: pb::Message) -> Result<Message, NodeError> {
    let identity = match (m.producer_id.is_empty(), m.sequence) {
        (true, None) => None,
        (false, Some(sequence)) => Some(SendIdentity {
            producer: m.producer_id,
            sequence,
        }),
        (true, Some(_)) | (false, None) => {
            return Err(NodeError::InvalidArgument(
                "message producer_id and sequence go together; only one is set".into(),
            ))
        }
    };
    Ok(Message {
        topic: m.topic,
        queue_id: QueueId::new(0),
        flags: 0,
        born_timestamp_ms: m.born_timestamp_ms,
        store_timestamp_ms: 0,
        born_host: m.born_host,
        tags: m.tags,
        keys: m.keys,
        properties: m.properties,
        body: m.body,
        identity,
    })
}

/// A message on the wire. A stored message has its identity in its properties (as its
/// record does).
fn message_out(m: Message) -> pb::Message {
    let (producer_id, sequence) = match m.identity {
        Some(id) => (id.producer, Some(id.sequence)),
        None => (Default::default(), None),
    };
    pb::Message {
        topic: m.topic,
        queue_id: i32::try_from(m.queue_id.get()).ok(),
        tags: m.tags,
        keys: m.keys,
        properties: m.properties,
        body: m.body,
        born_timestamp_ms: m.born_timestamp_ms,
        born_host: m.born_host,
        producer_id,
        sequence,
    }
}

/// A stored message on the wire (the log id is not tracked per message: unset).
pub fn stored_out(m: StoredMessage) -> pb::StoredMessage {
    let queue_id = i32::try_from(m.message.queue_id.get()).unwrap_or(i32::MAX);
    let store_timestamp_ms = m.message.store_timestamp_ms;
    pb::StoredMessage {
        msg_id: m.msg_id.get(),
        queue_id,
        queue_offset: m.queue_offset.get(),
        phys_offset: m.msg_id.get(),
        store_timestamp_ms,
        log_id: None,
        message: Some(message_out(m.message)),
    }
}

/// One send result of a message in entry `log`; a dedup hit answers the original result,
/// with the log id of the entry that stored it.
pub fn ack_out(a: &MessageAck, log: &LogId) -> pb::SendResult {
    pb::SendResult {
        msg_id: a.msg_id.get(),
        queue_id: i32::try_from(a.queue_id.get()).unwrap_or(i32::MAX),
        queue_offset: a.queue_offset.get(),
        phys_offset: a.phys_offset.get(),
        log_id: Some(log_id(a.duplicate_of.as_ref().unwrap_or(log))),
        duplicate: a.duplicate_of.is_some(),
    }
}

/// The wire pull status.
pub fn pull_status(s: PullStatus) -> pb::PullStatus {
    match s {
        PullStatus::Found => pb::PullStatus::Found,
        PullStatus::NoNewMessage => pb::PullStatus::NoNewMsg,
        PullStatus::NoMatchedMessage => pb::PullStatus::NoMatchedMsg,
        PullStatus::OffsetTooSmall => pb::PullStatus::OffsetTooSmall,
        PullStatus::OffsetTooBig => pb::PullStatus::OffsetTooBig,
        PullStatus::NoSuchTopic => pb::PullStatus::NoSuchTopic,
        PullStatus::NoSuchQueue => pb::PullStatus::NoSuchQueue,
    }
}

/// Permissions from the wire; `None` for UNSPECIFIED.
pub fn perm_in(p: i32) -> Result<Option<Permissions>, NodeError> {
    let perm = pb::TopicPerm::try_from(p)
        .map_err(|_| NodeError::InvalidArgument(format!("unknown topic perm {p}")))?;
    let (read, write) = match perm {
        pb::TopicPerm::Unspecified => return Ok(None),
        pb::TopicPerm::ReadWrite => (true, true),
        pb::TopicPerm::ReadOnly => (true, false),
        pb::TopicPerm::WriteOnly => (false, true),
        pb::TopicPerm::Deny => (false, false),
    };
    Ok(Some(Permissions { read, write }))
}

/// A topic config on the wire.
pub fn topic_out(t: &TopicConfig) -> pb::TopicConfig {
    let perm = match (t.perm.read, t.perm.write) {
        (true, true) => pb::TopicPerm::ReadWrite,
        (true, false) => pb::TopicPerm::ReadOnly,
        (false, true) => pb::TopicPerm::WriteOnly,
        (false, false) => pb::TopicPerm::Deny,
    };
    pb::TopicConfig {
        name: t.name.clone(),
        queue_count: t.queue_count(),
        perm: perm as i32,
    }
}
