//! Long polling for pop consumption: wait on the leader, proposing nothing, until the store
//! says a `Receive` on one of the queues would hand something out (a new matching message, or
//! an in-flight one whose deadline passed), or until the poll ends; then propose one. A poll
//! that has to wait takes a place among `max-long-poll-waiters` first; none left, it answers
//! at once with the limit.

use std::time::Duration;

use raftmq_store::types::QueueId;
use tokio::time::Instant;

use super::check_queue;
use super::receive;
use super::ReceiveRequest;
use super::ReceivedMessage;
use crate::core::NodeCore;
use crate::error::NodeError;
use crate::pipeline::queues::now_ms;

/// Longest a long poll sleeps between two checks while it waits for nothing in particular
/// (a deadline it cannot see, e.g. one set by another consumer of the group).
const POLL_STEP: Duration = Duration::from_millis(500);

/// Pause of a long poll after a `Receive` that handed out nothing although the check said it
/// would (another consumer of the group took the messages first).
const RETRY_AFTER_EMPTY: Duration = Duration::from_millis(20);

/// [`receive`] with long polling on `req.queue_id`: returns as soon as a `Receive` handed
/// out messages, or empty at `until`. Refuses at once on a follower.
pub async fn receive_long_poll(
    core: &NodeCore,
    req: &ReceiveRequest,
    until: Instant,
) -> Result<Vec<ReceivedMessage>, NodeError> {
    check_queue(core, &req.group, &req.topic, req.queue_id)?;
    poll_queues(core, req, &[req.queue_id], until).await
}

/// [`receive_long_poll`] over every readable queue of the topic, starting at `req.queue_id`
/// and going round: the first queue that has something for the group answers (a RocketMQ
/// SimpleConsumer names a queue only to pick a broker; it pops from the whole topic).
pub async fn receive_long_poll_any(
    core: &NodeCore,
    req: &ReceiveRequest,
    until: Instant,
) -> Result<Vec<ReceivedMessage>, NodeError> {
    check_queue(core, &req.group, &req.topic, req.queue_id)?;
    let n = core
        .store
        .topic(&req.topic)
        .map_or(1, |t| t.read_queue_count.max(1));
    let start = req.queue_id.get() % n;
    let queues: Vec<QueueId> = (0..n).map(|i| QueueId::new((start + i) % n)).collect();
    poll_queues(core, req, &queues, until).await
}

/// How long until the group's earliest in-flight deadline on `queues` (at most `POLL_STEP`).
fn to_next_deadline(
    core: &NodeCore,
    req: &ReceiveRequest,
    queues: &[QueueId],
    now: u64,
) -> Duration {
    queues
        .iter()
        .filter_map(|q| core.store.receive_state(&req.group, &req.topic, *q))
        .flat_map(|s| {
            s.inflight
                .values()
                .map(|f| f.invisible_until_ms)
                .collect::<Vec<_>>()
        })
        .map(|until| Duration::from_millis(until.saturating_sub(now)))
        .min()
        .unwrap_or(POLL_STEP)
        .min(POLL_STEP)
}

/// The long poll over `queues` (see the module docs).
async fn poll_queues(
    core: &NodeCore,
    req: &ReceiveRequest,
    queues: &[QueueId],
    until: Instant,
) -> Result<Vec<ReceivedMessage>, NodeError> {
    let mut applied = core.store.subscribe_applied();
    // Taken before the first wait, held to the end: over max-long-poll-waiters the call
    // answers at once (RESOURCE_EXHAUSTED; RocketMQ TOO_MANY_REQUESTS).
    let mut slot = None;
    loop {
        if core.is_shutting_down() {
            return Err(NodeError::ShuttingDown);
        }
        if !core.is_leader() {
            let (leader_id, leader_addr) = core.leader();
            return Err(NodeError::NotLeader {
                leader_id,
                leader_addr,
            });
        }
        applied.borrow_and_update();
        let now = now_ms();
        let mut ready = None;
        for &q in queues {
            let has = core
                .store
                .has_deliverable(&req.group, &req.topic, q, &req.filter, now, req.fifo)
                .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
            if has {
                ready = Some(q);
                break;
            }
        }
        if let Some(q) = ready {
            let one = ReceiveRequest {
                queue_id: q,
                ..req.clone()
            };
            let got = receive(core, &one).await?;
            if !got.is_empty() || Instant::now() >= until {
                return Ok(got);
            }
            // Another consumer of the group was faster: back off before checking again.
            tokio::time::sleep(
                RETRY_AFTER_EMPTY.min(until.saturating_duration_since(Instant::now())),
            )
            .await;
            continue;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Vec::new());
        }
        if slot.is_none() {
            slot = Some(core.long_polls.try_wait()?);
        }
        let wait = left.min(to_next_deadline(core, req, queues, now));
        // A change wakes at once; a deadline or the poll step by timeout.
        let _ = tokio::time::timeout(wait, applied.changed()).await;
    }
}
