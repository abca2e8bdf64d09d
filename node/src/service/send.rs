//! The leader's send path: validate, pick queues, encode one `SendBatch` entry, propose.

use std::collections::HashMap;
use std::time::SystemTime;

use raftmq_proto::v1 as pb;
use raftmq_store::command::Command;
use raftmq_store::hash::fnv1a64;
use raftmq_store::limits::validate_user_topic_name;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;
use raftmq_store::ApplyResponse;
use tokio::time::Instant;

use super::convert;
use super::propose::propose;
use crate::core::NodeCore;
use crate::error::NodeError;

/// Property whose value picks the queue when the producer leaves it unset (RocketMQ's
/// `MessageConst.PROPERTY_SHARDING_KEY`); without it the leader picks queues round robin.
pub const SHARDING_KEY_PROPERTY: &str = "__SHARDINGKEY";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Size of a message as `max-message-bytes` counts it: body, properties, topic, tags, keys.
pub fn message_bytes(m: &Message) -> usize {
    let props: usize = m.properties.iter().map(|(k, v)| k.len() + v.len()).sum();
    let keys: usize = m.keys.iter().map(String::len).sum();
    m.body.len() + props + keys + m.topic.len() + m.tags.len()
}

/// Checks one message against the node's and the store's limits.
fn check_message(core: &NodeCore, i: usize, m: &Message) -> Result<(), NodeError> {
    validate_user_topic_name(&m.topic)
        .map_err(|e| NodeError::InvalidArgument(format!("message #{i}: {e}")))?;
    let size = message_bytes(m);
    if size as u64 > core.config.max_message_bytes {
        return Err(NodeError::InvalidArgument(format!(
            "message #{i} is {size} bytes; max-message-bytes is {}",
            core.config.max_message_bytes
        )));
    }
    core.store
        .limits()
        .check_message(m)
        .map_err(|e| NodeError::InvalidArgument(format!("message #{i}: {e}")))
}

/// Converts and validates a request's messages; returns them with the queue each asked for.
pub fn prepare(
    core: &NodeCore,
    msgs: Vec<pb::Message>,
) -> Result<Vec<(Message, Option<QueueId>)>, NodeError> {
    if msgs.is_empty() {
        return Err(NodeError::InvalidArgument(
            "the batch holds no message".into(),
        ));
    }
    let max = core.config.max_batch_messages as usize;
    if msgs.len() > max {
        return Err(NodeError::InvalidArgument(format!(
            "the batch holds {} messages; max-batch-messages is {max}",
            msgs.len()
        )));
    }
    let mut out = Vec::with_capacity(msgs.len());
    for (i, pm) in msgs.into_iter().enumerate() {
        let wanted = convert::wanted_queue(pm.queue_id)?;
        let m = convert::message_in(pm);
        check_message(core, i, &m)?;
        out.push((m, wanted));
    }
    Ok(out)
}

/// Write queue count and writability of a topic; `None` if it does not exist.
fn topic_queues(core: &NodeCore, topic: &str) -> Result<Option<u32>, NodeError> {
    match core.store.topic(topic) {
        Some(t) if !t.perm.write => Err(NodeError::PermissionDenied(format!(
            "topic '{topic}' is not writable"
        ))),
        Some(t) => Ok(Some(t.write_queue_count)),
        None => Ok(None),
    }
}

fn pick_queue(core: &NodeCore, m: &Message, queues: u32) -> QueueId {
    let n = u64::from(queues.max(1));
    let pick = match m.properties.get(SHARDING_KEY_PROPERTY) {
        Some(key) => fnv1a64(key.as_bytes()),
        None => core.next_round_robin(&m.topic),
    };
    QueueId::try_from(pick % n).unwrap_or(0)
}

/// Fills in queue ids and the store timestamp; decides topic auto-creation.
fn assign(
    core: &NodeCore,
    batch: Vec<(Message, Option<QueueId>)>,
) -> Result<(Vec<Message>, Option<u32>), NodeError> {
    let mut known: HashMap<String, Option<u32>> = HashMap::new();
    let mut auto_create = None;
    let now = now_ms();
    let mut out = Vec::with_capacity(batch.len());
    for (mut m, wanted) in batch {
        let queues = match known.get(&m.topic) {
            Some(q) => *q,
            None => {
                let q = topic_queues(core, &m.topic)?;
                known.insert(m.topic.clone(), q);
                q
            }
        };
        let queues = match queues {
            Some(q) => q,
            None if core.config.topic_auto_create => {
                auto_create = Some(core.config.default_queue_count);
                core.config.default_queue_count
            }
            None => return Err(NodeError::TopicNotFound(m.topic)),
        };
        m.queue_id = match wanted {
            Some(q) if q >= queues => {
                return Err(NodeError::InvalidArgument(format!(
                    "queue {q} is not a write queue of topic '{}' (0..{queues})",
                    m.topic
                )))
            }
            Some(q) => q,
            None => pick_queue(core, &m, queues),
        };
        m.store_timestamp_ms = now;
        out.push(m);
    }
    Ok((out, auto_create))
}

/// Sends a validated batch as one Raft entry (leader only); one result per message.
pub async fn send_batch(
    core: &NodeCore,
    batch: Vec<(Message, Option<QueueId>)>,
    deadline: Instant,
) -> Result<Vec<pb::SendResult>, NodeError> {
    if core.is_shutting_down() {
        return Err(NodeError::ShuttingDown);
    }
    core.store.check_disk()?;
    let count = batch.len();
    let (messages, auto_create_queues) = assign(core, batch)?;
    let payload = Command::SendBatch {
        messages,
        auto_create_queues,
    }
    .encode()
    .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    core.store
        .limits()
        .check_batch(count, payload.0.len())
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let resp = propose(core, payload, deadline).await?;
    tracing::debug!(
        term = resp.log_id.leader_id.term,
        log_index = resp.log_id.index,
        messages = count,
        "batch committed and applied"
    );
    match resp.data {
        ApplyResponse::Sent(acks) if acks.len() == count => Ok(acks
            .iter()
            .map(|a| convert::ack_out(a, &resp.log_id))
            .collect()),
        ApplyResponse::Rejected { code, message } => Err(NodeError::from_reject(code, message)),
        other => Err(NodeError::Internal(format!(
            "apply answered {other:?} to a batch of {count} messages"
        ))),
    }
}
