//! Reads served by any node from its own committed (dispatched) data: pull with long polling,
//! queries, consumer offsets, topic list.

use std::time::Duration;

use raftmq_proto::v1 as pb;
use raftmq_store::limits::validate_group_name;
use raftmq_store::limits::validate_topic_name;
use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::PullRequest;
use raftmq_store::PullStatus;

use super::convert;
use crate::core::NodeCore;
use crate::error::NodeError;
use crate::pipeline::now_ms;

/// Longest long-poll wait a client may ask for.
pub const MAX_LONG_POLL: Duration = Duration::from_secs(60);

/// Largest `max_count` of a key query.
pub const MAX_QUERY_MESSAGES: u32 = 1024;

/// What an answer keeps free of its byte budget below `grpc-max-message-bytes` (headers,
/// the reply's own fields) besides [`PER_MESSAGE_MARGIN`] per message.
pub const REPLY_MARGIN: u64 = 1 << 20;

/// Encoding bytes a message may take in an answer beyond its record size (field tags and
/// lengths; the record's fixed header is larger than what the reply adds).
pub const PER_MESSAGE_MARGIN: u64 = 64;

/// Record bytes one answer of at most `max_count` messages may carry so that it stays below
/// `grpc-max-message-bytes`: a derived bound, not a setting (one message of
/// `max-message-bytes` always fits, as grpc-max-message-bytes >= max-batch-bytes + 1 MiB).
pub fn reply_budget(core: &NodeCore, max_count: u32) -> u64 {
    let margin = REPLY_MARGIN + u64::from(max_count) * PER_MESSAGE_MARGIN;
    core.config
        .grpc_max_message_bytes
        .saturating_sub(margin)
        .max(1)
}

fn topic_arg(topic: &str) -> Result<(), NodeError> {
    validate_topic_name(topic).map_err(|e| NodeError::InvalidArgument(e.to_string()))
}

/// Pull: reads at once; at the queue's end waits up to the long-poll timeout for new data.
pub async fn pull(core: &NodeCore, req: pb::PullRequest) -> Result<pb::PullReply, NodeError> {
    topic_arg(&req.topic)?;
    let queue_id = convert::queue_id("queue_id", req.queue_id)?;
    let wait = Duration::from_millis(u64::from(req.long_poll_timeout_ms));
    if wait > MAX_LONG_POLL {
        return Err(NodeError::InvalidArgument(format!(
            "long_poll_timeout_ms {} is above the maximum {}",
            req.long_poll_timeout_ms,
            MAX_LONG_POLL.as_millis()
        )));
    }
    let max_count = if req.max_count == 0 {
        32
    } else {
        req.max_count.min(core.store.config().max_pull_messages)
    };
    let asked = if req.max_bytes == 0 {
        4 << 20
    } else {
        u64::from(req.max_bytes)
    };
    let sreq = PullRequest {
        topic: req.topic,
        queue_id,
        offset: QueueOffset::new(req.offset),
        max_count,
        // A larger answer would pass the gRPC limit at every try: that offset would fail
        // forever. Clamped, the client gets what fits and pulls on from next_offset.
        max_bytes: asked.min(reply_budget(core, max_count)),
        tag_expr: req.tag_expression,
    };
    let mut res = core.store.pull(&sreq)?;
    if res.status == PullStatus::NoNewMessage && !wait.is_zero() {
        // Over max-long-poll-waiters: RESOURCE_EXHAUSTED at once, naming the setting.
        let _slot = core.long_polls.try_wait()?;
        let arrived = core
            .store
            .wait_for_messages(&sreq.topic, queue_id, sreq.offset, wait)
            .await;
        if arrived {
            res = core.store.pull(&sreq)?;
        }
    }
    let bytes: usize = res.messages.iter().map(|m| m.message.body.len()).sum();
    core.metrics.record_out(res.messages.len(), bytes);
    Ok(pb::PullReply {
        status: convert::pull_status(res.status) as i32,
        messages: res.messages.into_iter().map(convert::stored_out).collect(),
        next_offset: res.next_offset.get(),
        min_offset: res.min_offset.get(),
        max_offset: res.max_offset.get(),
    })
}

/// One message by id; NOT_FOUND if none is dispatched there.
pub fn query_by_id(core: &NodeCore, msg_id: u64) -> Result<pb::QueryByIdReply, NodeError> {
    let m = core.store.get_by_id(PhysOffset::new(msg_id))?;
    Ok(pb::QueryByIdReply {
        message: Some(convert::stored_out(m)),
    })
}

/// Messages of a topic by key within a store-time range.
pub fn query_by_key(
    core: &NodeCore,
    req: pb::QueryByKeyRequest,
) -> Result<pb::QueryByKeyReply, NodeError> {
    topic_arg(&req.topic)?;
    if req.key.is_empty() {
        return Err(NodeError::InvalidArgument("key is empty".into()));
    }
    let max_key = core.store.limits().max_key_bytes as usize;
    if req.key.len() > max_key {
        return Err(NodeError::InvalidArgument(format!(
            "key {} is {} bytes; max-key-bytes is {max_key}",
            raftmq_store::limits::quote(&req.key),
            req.key.len()
        )));
    }
    if req.max_count > MAX_QUERY_MESSAGES {
        return Err(NodeError::InvalidArgument(format!(
            "max_count {} is above {MAX_QUERY_MESSAGES}",
            req.max_count
        )));
    }
    let end = if req.end_ms == 0 {
        now_ms()
    } else {
        req.end_ms
    };
    if req.begin_ms > end {
        return Err(NodeError::InvalidArgument(format!(
            "begin_ms {} is after end_ms {end}",
            req.begin_ms
        )));
    }
    let max = if req.max_count == 0 {
        32
    } else {
        req.max_count
    };
    let found = core.store.query_by_key_within(
        &req.topic,
        &req.key,
        (req.begin_ms, end),
        max as usize,
        reply_budget(core, max),
    )?;
    Ok(pb::QueryByKeyReply {
        messages: found
            .messages
            .into_iter()
            .map(convert::stored_out)
            .collect(),
        truncated: found.truncated,
    })
}

/// Checks a (group, topic, queue) triple of the offset calls.
pub fn offset_args(group: &str, topic: &str, queue_id: i32) -> Result<QueueId, NodeError> {
    validate_group_name(group).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    topic_arg(topic)?;
    convert::queue_id("queue_id", queue_id)
}

/// A consumer group's stored offset.
pub fn fetch_offset(
    core: &NodeCore,
    req: pb::FetchOffsetRequest,
) -> Result<pb::FetchOffsetReply, NodeError> {
    let q = offset_args(&req.group, &req.topic, req.queue_id)?;
    Ok(pb::FetchOffsetReply {
        offset: core
            .store
            .fetch_offset(&req.group, &req.topic, q)
            .map(QueueOffset::get),
    })
}

/// Every topic with its queues' offset ranges.
pub fn list_topics(core: &NodeCore) -> pb::ListTopicsReply {
    let topics = core
        .store
        .topics()
        .iter()
        .map(|t| pb::TopicInfo {
            config: Some(convert::topic_out(t)),
            queues: QueueId::all(t.queue_count())
                .map(|q| {
                    let (min, max) = core.store.queue_offsets(&t.name, q);
                    pb::QueueInfo {
                        queue_id: i32::try_from(q.get()).unwrap_or(i32::MAX),
                        min_offset: min.get(),
                        max_offset: max.get(),
                    }
                })
                .collect(),
        })
        .collect();
    pb::ListTopicsReply { topics }
}
