//! The read side of the pop state: a group's [`QueueReceive`] and the leader's cheap
//! "would a `Receive` hand out anything now?" check ([`has_deliverable`]), functions over
//! `Shared` behind the [`Store`](crate::Store) methods of the same names.

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::filter::TagFilter;
use crate::message::MessageView;
use crate::receive::delay;
use crate::receive::QueueReceive;
use crate::receive::RECEIVE_SCAN_UNITS;
use crate::state::Shared;
use crate::types::QueueId;
use crate::types::TimestampMs;

/// A group's pop state on a queue (None: it never received from it, or it was reset).
pub(crate) fn receive_state(
    shared: &Shared,
    group: &str,
    topic: &str,
    queue_id: QueueId,
) -> Option<QueueReceive> {
    shared
        .state
        .read()
        .receive
        .get(group, topic, queue_id)
        .cloned()
}

/// True if a `Receive` of `group` on `topic/queue_id` with `filter` at `now_ms` would hand
/// out a message or move past skipped ones: an in-flight message whose deadline passed (a
/// parked delayed one whose delivery time came included), or (while the group's in-flight
/// count is below `max-inflight-per-queue`) a dispatched message at or after its `next` that
/// matches the filter and is due. A delayed message not due yet does not count: the answer
/// turns true at its delivery time (once parked, its deadline is an in-flight one the long
/// poll waits for). A scan that reaches [`RECEIVE_SCAN_UNITS`] units without a deliverable
/// one also answers true (the `Receive` moves `next` past them, parking the delayed ones).
/// Unknown topic or queue: false. With `fifo` (the group is FIFO) and a delivered message
/// (attempt >= 1) in flight, the queue is locked: true only if a delivered one's deadline
/// passed, the same rule as the apply.
pub(crate) fn has_deliverable(
    shared: &Shared,
    group: &str,
    topic: &str,
    queue_id: QueueId,
    filter: &str,
    now_ms: TimestampMs,
    fifo: bool,
) -> Result<bool> {
    let filter = TagFilter::parse(filter)?;
    let (units, candidates) = {
        let st = shared.state.read();
        if !st.topics.get(topic).is_some_and(|t| t.readable(queue_id)) {
            return Ok(false);
        }
        let Some(cq) = st.cqs.get(topic, queue_id) else {
            return Ok(false);
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let s = st.receive.get(group, topic, queue_id);
        if let Some(s) = s.filter(|s| fifo && s.has_delivered_inflight()) {
            return Ok(s
                .inflight
                .values()
                .any(|f| f.attempt >= 1 && f.invisible_until_ms <= now_ms));
        }
        if s.is_some_and(|s| s.inflight.values().any(|f| f.invisible_until_ms <= now_ms)) {
            return Ok(true);
        }
        let full =
            s.is_some_and(|s| s.inflight.len() >= shared.config.max_inflight_per_queue as usize);
        let committed = st.offsets.get(group, topic, queue_id);
        let start = s
            .map_or_else(|| committed.unwrap_or(min), |s| s.next)
            .clamp(min, max);
        if full || start == max {
            return Ok(false);
        }
        let units = cq.read(start, RECEIVE_SCAN_UNITS)?;
        let candidates: Vec<CqUnit> = units
            .iter()
            .copied()
            .filter(|u| filter.matches_hash(u.tag_hash))
            .collect();
        (units.len(), candidates)
    };
    for u in &candidates {
        // Outside the lock: committed records never change; a record retention took is
        // simply not a candidate any more. Usually the first candidate answers.
        let Ok(rec) = shared.log.read_at(u.phys_offset, u.size) else {
            continue;
        };
        if MessageView::parse(&rec)
            .is_ok_and(|v| filter.matches_tag(v.tags) && delay::not_due_until(&v, now_ms).is_none())
        {
            return Ok(true);
        }
    }
    Ok(units == RECEIVE_SCAN_UNITS)
}
