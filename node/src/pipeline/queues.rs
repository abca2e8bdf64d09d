//! Queue choice on the leader: the queue a producer asked for (checked against the topic's
//! write queues), else by sharding key, else round robin per topic; topic auto-creation; the
//! store timestamp.

use std::collections::HashMap;
use std::time::SystemTime;

use raftmq_store::hash::fnv1a64;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;

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
    u32::try_from(pick % n).map_or(QueueId::new(0), QueueId::new)
}

/// Fills in each message's queue id (`wanted[i]` is the queue message `i` asked for) and the
/// store timestamp. Returns the queue count apply creates a missing topic with, if any.
pub(super) fn assign(
    core: &NodeCore,
    messages: &mut [Message],
    wanted: &[Option<QueueId>],
) -> Result<Option<u32>, NodeError> {
    let mut known: HashMap<String, Option<u32>> = HashMap::new();
    let mut auto_create = None;
    let now = now_ms();
    for (m, wanted) in messages.iter_mut().zip(wanted) {
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
                core.store
                    .limits()
                    .check_new_topic(core.store.topic_count())?;
                auto_create = Some(core.config.default_queue_count);
                core.config.default_queue_count
            }
            None => return Err(NodeError::TopicNotFound(m.topic.clone())),
        };
        m.queue_id = match *wanted {
            Some(q) if !q.is_below(queues) => {
                return Err(NodeError::InvalidArgument(format!(
                    "queue {q} is not a write queue of topic '{}' (0..{queues})",
                    m.topic
                )))
            }
            Some(q) => q,
            None => pick_queue(core, m, queues),
        };
        m.store_timestamp_ms = now;
    }
    Ok(auto_create)
}
