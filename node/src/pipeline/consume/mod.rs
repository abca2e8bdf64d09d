//! Pop consumption on the leader (RocketMQ 5 `ReceiveMessage`, `AckMessage`,
//! `ChangeInvisibleDuration`): validate, stamp the leader's clock and limits into a store
//! `Receive` / `Ack` / `ChangeInvisible` command, propose it ([`propose`]) and turn the
//! apply answer into typed results; plus the one wire form of a receipt handle
//! ([`ReceiptHandle`]).
//!
//! The pop state lives in the store's replicated `ReceiveTable`, so acks and deadlines
//! survive a failover and a handle issued by one leader acks on the next. Long polling
//! ([`receive_long_poll`]) waits locally on the store's apply notifications and proposes
//! one `Receive` only once [`Store::has_deliverable`](raftmq_store::Store::has_deliverable)
//! says it would hand something out.

use std::time::Duration;

use raftmq_store::command::Ack;
use raftmq_store::command::AckEntry;
use raftmq_store::command::ChangeInvisible;
use raftmq_store::command::Command;
use raftmq_store::command::Receive;
use raftmq_store::filter::TagFilter;
use raftmq_store::limits::validate_group_name;
use raftmq_store::limits::validate_topic_name;
use raftmq_store::message::Message;
use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::ApplyResponse;
use raftmq_store::Delivered;
use raftmq_store::RejectCode;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;
use crate::pipeline::propose::propose;
use crate::pipeline::propose::WriteResponse;
use crate::pipeline::queues::now_ms;

mod handle;
mod poll;

pub use self::handle::ReceiptHandle;
pub use self::poll::receive_long_poll;
pub use self::poll::receive_long_poll_any;

/// Longest invisibility a receive or change may ask for (RocketMQ's proxy maximum, 12 h).
pub const MAX_INVISIBLE_MS: u64 = 12 * 3_600_000;

/// A `ReceiveMessage` for one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiveRequest {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Most messages wanted (clamped to `1..=max-pull-messages`).
    pub max_messages: u32,
    /// How long the messages stay invisible to the group (at most [`MAX_INVISIBLE_MS`]).
    pub invisible: Duration,
    /// Tag expression (`*`, `TagA || TagB`).
    pub filter: String,
    /// FIFO delivery for the group (its name is in `rocketmq-fifo-groups`): stamped into
    /// the `Receive`, so a queue with a delivered message in flight hands out nothing new.
    pub fifo: bool,
}

/// One message handed out by [`receive`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The message as stored.
    pub message: Message,
    /// Its id (physical offset of its record).
    pub msg_id: PhysOffset,
    /// Record size in the CommitLog.
    pub store_size: u32,
    /// Delivery attempt (1 for the first).
    pub attempt: u32,
    /// What acks it (queue offset and deadline inside).
    pub receipt: ReceiptHandle,
}

/// How one ack ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckOutcome {
    /// Acked now.
    Acked,
    /// Acked before (a retried ack): nothing changed.
    AlreadyAcked,
}

/// An apply answer of the wrong kind (a bug, never a client's fault).
fn unexpected(call: &str, data: &ApplyResponse) -> NodeError {
    NodeError::Internal(format!("{call} answered {data:?}"))
}

pub(crate) fn invisible_ms(d: Duration) -> Result<u64, NodeError> {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms > MAX_INVISIBLE_MS {
        return Err(NodeError::InvalidArgument(format!(
            "invisible duration {ms} ms is above the maximum {MAX_INVISIBLE_MS} ms"
        )));
    }
    Ok(ms)
}

/// Group and topic names, and that the topic exists with `queue_id` readable.
fn check_queue(core: &NodeCore, group: &str, topic: &str, q: QueueId) -> Result<(), NodeError> {
    let invalid = |e: raftmq_store::StoreError| NodeError::InvalidArgument(e.to_string());
    validate_group_name(group).map_err(invalid)?;
    validate_topic_name(topic).map_err(invalid)?;
    let cfg = core
        .store
        .topic(topic)
        .ok_or_else(|| NodeError::TopicNotFound(topic.to_owned()))?;
    if !cfg.readable(q) {
        return Err(NodeError::InvalidArgument(format!(
            "queue {q} of topic '{topic}' is not readable (read queues: {})",
            cfg.read_queue_count
        )));
    }
    Ok(())
}

async fn run(core: &NodeCore, cmd: Command) -> Result<WriteResponse, NodeError> {
    let payload = cmd
        .encode()
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let resp = propose(core, payload, Instant::now() + core.config.send_timeout()).await?;
    if let ApplyResponse::Rejected { code, message } = resp.data {
        return Err(NodeError::from_reject(code, message));
    }
    Ok(resp)
}

/// Proposes one `Receive` and returns the messages it handed out (maybe none), in queue
/// offset order.
pub async fn receive(
    core: &NodeCore,
    req: &ReceiveRequest,
) -> Result<Vec<ReceivedMessage>, NodeError> {
    check_queue(core, &req.group, &req.topic, req.queue_id)?;
    TagFilter::parse(&req.filter).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    core.store.check_new_group(&req.group)?;
    let cfg = core.store.config();
    let cmd = Command::Receive(Receive {
        group: req.group.clone(),
        topic: req.topic.clone(),
        queue_id: req.queue_id,
        max_messages: req.max_messages.clamp(1, cfg.max_pull_messages),
        invisible_ms: invisible_ms(req.invisible)?,
        now_ms: now_ms(),
        max_inflight: cfg.max_inflight_per_queue,
        queue_min: core.store.queue_offsets(&req.topic, req.queue_id).0,
        filter: req.filter.clone(),
        fifo: req.fifo,
    });
    let resp = run(core, cmd).await?;
    let ApplyResponse::Received(delivered) = resp.data else {
        return Err(unexpected("receive", &resp.data));
    };
    Ok(delivered
        .iter()
        .filter_map(|d| read_delivered(core, &req.topic, req.queue_id, d))
        .collect())
}

/// The record of a delivered message; None (logged) if retention took it meanwhile: it
/// stays in flight and is forgotten once below the queue's minimum.
fn read_delivered(
    core: &NodeCore,
    topic: &str,
    queue_id: QueueId,
    d: &Delivered,
) -> Option<ReceivedMessage> {
    let stored = (core.store.get_by_id(d.phys_offset))
        .inspect_err(|e| {
            tracing::warn!(topic, queue_id = queue_id.get(), queue_offset = d.queue_offset.get(),
                error = %e, "received message no longer readable");
        })
        .ok()?;
    Some(ReceivedMessage {
        message: stored.message,
        msg_id: d.phys_offset,
        store_size: d.size,
        attempt: d.attempt,
        receipt: ReceiptHandle {
            topic: topic.to_owned(),
            queue_id,
            queue_offset: d.queue_offset,
            handle: d.handle,
            invisible_until_ms: d.invisible_until_ms,
        },
    })
}

/// Acks popped messages of `topic` for `group` (one entry, one result per handle, in
/// order; 1..=`max-batch-messages` handles): [`AckOutcome`], or
/// [`NodeError::InvalidReceiptHandle`] for a handle that is not the message's current one or
/// names another topic. The outer error is the whole call's.
pub async fn ack(
    core: &NodeCore,
    group: &str,
    topic: &str,
    handles: &[ReceiptHandle],
) -> Result<Vec<Result<AckOutcome, NodeError>>, NodeError> {
    validate_group_name(group).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    if core.store.topic(topic).is_none() {
        return Err(NodeError::TopicNotFound(topic.to_owned()));
    }
    let max = core.store.limits().max_batch_messages as usize;
    if handles.is_empty() || handles.len() > max {
        return Err(NodeError::InvalidArgument(format!(
            "ack of {} messages; 1..={max} per call",
            handles.len()
        )));
    }
    let entries: Vec<AckEntry> = handles
        .iter()
        .filter(|h| h.topic == topic)
        .map(|h| AckEntry {
            queue_id: h.queue_id,
            queue_offset: h.queue_offset,
            handle: h.handle,
        })
        .collect();
    let mut answers = Vec::new().into_iter();
    if !entries.is_empty() {
        let cmd = Command::Ack(Ack {
            group: group.to_owned(),
            topic: topic.to_owned(),
            entries,
        });
        let resp = run(core, cmd).await?;
        let ApplyResponse::Acked(results) = resp.data else {
            return Err(unexpected("ack", &resp.data));
        };
        answers = results.into_iter();
    }
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        if h.topic != topic {
            out.push(Err(NodeError::InvalidReceiptHandle(format!(
                "handle of topic '{}' in an ack of topic '{topic}'",
                h.topic
            ))));
            continue;
        }
        out.push(match answers.next() {
            Some(Ok(())) => Ok(AckOutcome::Acked),
            Some(Err(RejectCode::AlreadyAcked)) => Ok(AckOutcome::AlreadyAcked),
            Some(Err(code)) => Err(NodeError::from_reject(
                code,
                format!(
                    "message {} of {}/{} is not in flight under handle {}",
                    h.queue_offset, h.topic, h.queue_id, h.handle
                ),
            )),
            None => Err(NodeError::Internal("ack answered too few results".into())),
        });
    }
    Ok(out)
}

/// Moves a popped message's deadline to now + `invisible`; returns its new handle (the old
/// one is stale from now on).
pub async fn change_invisible(
    core: &NodeCore,
    group: &str,
    handle: &ReceiptHandle,
    invisible: Duration,
) -> Result<ReceiptHandle, NodeError> {
    check_queue(core, group, &handle.topic, handle.queue_id)?;
    let cmd = Command::ChangeInvisible(ChangeInvisible {
        group: group.to_owned(),
        topic: handle.topic.clone(),
        queue_id: handle.queue_id,
        queue_offset: handle.queue_offset,
        handle: handle.handle,
        invisible_ms: invisible_ms(invisible)?,
        now_ms: now_ms(),
    });
    let resp = run(core, cmd).await?;
    let ApplyResponse::InvisibleChanged(c) = resp.data else {
        return Err(unexpected("change invisible", &resp.data));
    };
    Ok(ReceiptHandle {
        handle: c.handle,
        invisible_until_ms: c.invisible_until_ms,
        ..handle.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_duration_bound() {
        assert_eq!(invisible_ms(Duration::from_secs(30)).expect("ok"), 30_000);
        let e = invisible_ms(Duration::from_millis(MAX_INVISIBLE_MS + 1)).expect_err("too long");
        assert!(e.to_string().contains("above the maximum"), "{e}");
    }
}
