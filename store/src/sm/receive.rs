//! Applying the pop commands (`Receive`, `Ack`, `ChangeInvisible`) to the
//! [`ReceiveTable`](crate::receive::ReceiveTable), keeping each group's progress in the
//! consumer offset table.
//!
//! Deterministic: the result depends only on the command (which carries the leader's clock,
//! in-flight bound and queue minimum), the entry's log index (the receipt handle) and the
//! replicated state: ConsumeQueue units and the committed records they point at are the same
//! on every replica. Only units of earlier entries count (physical offset below the
//! `Receive` entry's own): after a crash, replay finds units of later entries already in
//! the queues, and must pick what the first apply picked. Whether a message is due (its
//! [`DELIVER_MS_PROPERTY`](crate::receive::delay::DELIVER_MS_PROPERTY) against the command's
//! `now_ms`) is read from the committed record, the same on every replica. The one
//! node-local input is retention: offsets below the queue's minimum
//! are forgotten, and the floor is `max(command.queue_min, local min)`, so replicas that
//! retain at least what the leader retained compute the same picks; a replica that deleted
//! more skips what it no longer has.
//!
//! FIFO ([`Receive::fifo`], stamped by the leader): per queue, while the group has a
//! delivered message (attempt >= 1) in flight, the queue is locked: no new message and no
//! parked delayed one goes out, only delivered ones whose deadline passed come back, in
//! offset order. Unlocked, a FIFO receive is a normal one. One message group maps to one
//! queue, so queue order is (stricter than) message group order.

use raftmq_raft_log::types::LogId;

use crate::command::Ack;
use crate::command::ChangeInvisible;
use crate::command::Receive;
use crate::consume_queue::ConsumeQueue;
use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::filter::TagFilter;
use crate::message::MessageView;
use crate::raft_types::ApplyResponse;
use crate::raft_types::Delivered;
use crate::raft_types::InvisibleChanged;
use crate::raft_types::LogStore;
use crate::raft_types::RejectCode;
use crate::receive::delay;
use crate::receive::AckCheck;
use crate::receive::Inflight;
use crate::receive::QueueReceive;
use crate::receive::RECEIVE_SCAN_UNITS;
use crate::state::DispatchState;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

fn reject(code: RejectCode, message: String) -> ApplyResponse {
    ApplyResponse::Rejected { code, message }
}

/// Refuses a command on a topic or queue that cannot be read.
fn check_queue(st: &DispatchState, topic: &str, queue_id: QueueId) -> Option<ApplyResponse> {
    let Some(cfg) = st.topics.get(topic) else {
        return Some(reject(
            RejectCode::NoSuchTopic,
            format!("topic '{topic}' does not exist"),
        ));
    };
    (!cfg.readable(queue_id)).then(|| {
        reject(
            RejectCode::NoSuchQueue,
            format!("queue {queue_id} of topic '{topic}' is not readable"),
        )
    })
}

/// Writes the progress of `group` on `topic/queue_id` into the consumer offset table.
fn sync_progress(st: &mut DispatchState, group: &str, topic: &str, queue_id: QueueId) {
    if let Some(p) = st
        .receive
        .get(group, topic, queue_id)
        .map(QueueReceive::progress)
    {
        st.offsets.commit(&crate::command::CommitOffset {
            group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            offset: p,
        });
    }
}

/// Applies a `Receive` (entry `log_id` at `entry_phys`; its index becomes the receipt
/// handle).
pub fn apply_receive(
    st: &mut DispatchState,
    log: &LogStore,
    log_id: LogId,
    entry_phys: PhysOffset,
    r: &Receive,
) -> Result<ApplyResponse> {
    if let Some(refused) = check_queue(st, &r.topic, r.queue_id) {
        return Ok(refused);
    }
    let filter = match TagFilter::parse(&r.filter) {
        Ok(f) => f,
        Err(e) => return Ok(reject(RejectCode::Invalid, e.to_string())),
    };
    let handle = LogIndex::of(&log_id);
    let until = r.now_ms.saturating_add(r.invisible_ms);
    let DispatchState {
        cqs,
        receive,
        offsets,
        ..
    } = st;
    let cq = cqs.get(&r.topic, r.queue_id);
    // `max`: one past the last unit of an entry before this one.
    let (min, max) = cq.map_or((QueueOffset::ZERO, QueueOffset::ZERO), |q| {
        (q.min_offset(), q.first_offset_at_or_after_phys(entry_phys))
    });
    let committed = offsets.get(&r.group, &r.topic, r.queue_id);
    let s = receive.get_or_start(&r.group, &r.topic, r.queue_id, || {
        committed.unwrap_or(min).clamp(min, max)
    });
    s.forget_below(min.max(r.queue_min));
    let want = r.max_messages as usize;
    let mut out = Vec::new();
    if let Some(cq) = cq {
        let locked = r.fifo && s.has_delivered_inflight();
        let due = Due {
            now_ms: r.now_ms,
            until,
            handle,
            want,
            delivered_only: locked,
        };
        redeliver_expired(s, cq, &due, &mut out)?;
        if !locked {
            let scan = NewScan { max, until, handle };
            deliver_new(s, cq, log, &filter, r, &scan, &mut out)?;
        }
    }
    sync_progress(st, &r.group, &r.topic, r.queue_id);
    tracing::debug!(group = %r.group, topic = %r.topic, queue_id = r.queue_id.get(),
        log_index = handle.get(), delivered = out.len(), "receive applied");
    Ok(ApplyResponse::Received(out))
}

fn delivered(offset: QueueOffset, u: CqUnit, f: &Inflight) -> Delivered {
    Delivered {
        queue_offset: offset,
        phys_offset: u.phys_offset,
        size: u.size,
        attempt: f.attempt,
        handle: f.handle,
        invisible_until_ms: f.invisible_until_ms,
    }
}

/// What redeliveries of one `Receive` get.
struct Due {
    /// The command's clock: deadlines at or before it passed.
    now_ms: u64,
    /// New deadline of the redelivered messages.
    until: u64,
    /// Their new receipt handle.
    handle: LogIndex,
    /// Most messages the `Receive` hands out.
    want: usize,
    /// A locked FIFO queue: parked delayed messages stay parked.
    delivered_only: bool,
}

/// In offset order, the in-flight messages whose deadline passed, up to `want`; a parked
/// delayed message whose delivery time came goes out with attempt 1, unless
/// `delivered_only` (a locked FIFO queue: only delivered ones come back).
fn redeliver_expired(
    s: &mut QueueReceive,
    cq: &ConsumeQueue,
    due: &Due,
    out: &mut Vec<Delivered>,
) -> Result<()> {
    let (now_ms, until, handle, want) = (due.now_ms, due.until, due.handle, due.want);
    for (offset, f) in s.inflight.iter_mut() {
        if out.len() >= want {
            break;
        }
        if f.invisible_until_ms > now_ms || (due.delivered_only && f.attempt == 0) {
            continue;
        }
        // In flight means in `[min, next)` of the queue (forgotten below min just before).
        let Ok(u) = cq.get(*offset) else {
            continue;
        };
        f.attempt = f.attempt.saturating_add(1);
        f.invisible_until_ms = until;
        f.handle = handle;
        out.push(delivered(*offset, u, f));
    }
    Ok(())
}

/// What new deliveries of one `Receive` get, and where its scan ends.
struct NewScan {
    /// One past the last unit of an earlier entry.
    max: QueueOffset,
    /// Deadline of the delivered messages.
    until: u64,
    /// Their receipt handle.
    handle: LogIndex,
}

/// New messages from `next` that match the filter, while `out` and the in-flight bound have
/// room; `next` moves past every unit scanned (non-matching ones are skipped for good). A
/// matching message not due yet (delivery time after `now_ms`) is parked: in flight with
/// attempt 0 until its delivery time, counted in the bound, not handed out.
fn deliver_new(
    s: &mut QueueReceive,
    cq: &ConsumeQueue,
    log: &LogStore,
    filter: &TagFilter,
    r: &Receive,
    scan: &NewScan,
    out: &mut Vec<Delivered>,
) -> Result<()> {
    let (until, handle) = (scan.until, scan.handle);
    let want = r.max_messages as usize;
    let bound = r.max_inflight as usize;
    if out.len() >= want
        || s.inflight.len() >= bound
        || s.next < cq.min_offset()
        || s.next >= scan.max
    {
        return Ok(());
    }
    let n = s.next.count_to(scan.max).min(RECEIVE_SCAN_UNITS as u64) as usize;
    let units = cq.read(s.next, n)?;
    for u in units {
        if out.len() >= want || s.inflight.len() >= bound {
            break;
        }
        let offset = s.next;
        s.next = offset.next();
        let f = match look(log, filter, &u, r.now_ms)? {
            Look::Skip => continue,
            Look::Park(at) => {
                let parked = Inflight {
                    invisible_until_ms: at,
                    attempt: 0,
                    handle,
                };
                s.inflight.insert(offset, parked);
                tracing::trace!(
                    queue_offset = offset.get(),
                    deliver_ms = at,
                    "delayed message parked"
                );
                continue;
            }
            Look::Deliver => Inflight {
                invisible_until_ms: until,
                attempt: 1,
                handle,
            },
        };
        s.inflight.insert(offset, f);
        out.push(delivered(offset, u, &f));
    }
    Ok(())
}

/// What a `Receive` does with a new unit.
enum Look {
    /// Filtered out (or gone with retention): skipped for good.
    Skip,
    /// Matches, but its delivery time (ms) is still ahead.
    Park(u64),
    /// Matches and is due.
    Deliver,
}

/// Both filter stages (tag hash of the unit, then the exact tag of the committed record)
/// and the delivery time. The record is read only for a unit that passes the hash stage, and
/// parsed once for both the exact tag and the delivery time.
fn look(log: &LogStore, filter: &TagFilter, u: &CqUnit, now_ms: u64) -> Result<Look> {
    if !filter.matches_hash(u.tag_hash) {
        return Ok(Look::Skip);
    }
    let rec = match log.read_at(u.phys_offset, u.size) {
        Ok(rec) => rec,
        // Retention took the segment: the message is gone on this replica, skip it.
        Err(_) if u.phys_offset < log.watermarks().min_phys_offset => return Ok(Look::Skip),
        Err(e) => return Err(e.into()),
    };
    let view = MessageView::parse(&rec).map_err(|e| e.locate("commitlog", u.phys_offset.get()))?;
    if !filter.matches_tag(view.tags) {
        return Ok(Look::Skip);
    }
    Ok(delay::not_due_until(&view, now_ms).map_or(Look::Deliver, Look::Park))
}

fn ack_refusal(check: AckCheck, what: &str, offset: QueueOffset) -> RejectCode {
    tracing::debug!(
        ?check,
        what,
        queue_offset = offset.get(),
        "pop handle refused"
    );
    match check {
        AckCheck::AlreadyAcked => RejectCode::AlreadyAcked,
        _ => RejectCode::InvalidReceiptHandle,
    }
}

/// Applies an `Ack`: one result per entry, in order.
pub fn apply_ack(st: &mut DispatchState, a: &Ack) -> ApplyResponse {
    if st.topics.get(&a.topic).is_none() {
        return reject(
            RejectCode::NoSuchTopic,
            format!("topic '{}' does not exist", a.topic),
        );
    }
    let mut results = Vec::with_capacity(a.entries.len());
    let mut touched: Vec<QueueId> = Vec::new();
    for e in &a.entries {
        let check = st
            .receive
            .get(&a.group, &a.topic, e.queue_id)
            .map_or(AckCheck::NeverDelivered, |s| {
                s.check(e.queue_offset, e.handle)
            });
        if check != AckCheck::Matches {
            results.push(Err(ack_refusal(check, "ack", e.queue_offset)));
            continue;
        }
        if let Some(s) = st.receive.get_mut(&a.group, &a.topic, e.queue_id) {
            s.inflight.remove(&e.queue_offset);
        }
        if !touched.contains(&e.queue_id) {
            touched.push(e.queue_id);
        }
        results.push(Ok(()));
    }
    for q in touched {
        sync_progress(st, &a.group, &a.topic, q);
    }
    ApplyResponse::Acked(results)
}

/// Applies a `ChangeInvisible` (entry `log_id`, whose index becomes the new handle).
pub fn apply_change_invisible(
    st: &mut DispatchState,
    log_id: LogId,
    c: &ChangeInvisible,
) -> ApplyResponse {
    if let Some(refused) = check_queue(st, &c.topic, c.queue_id) {
        return refused;
    }
    let Some(s) = st.receive.get_mut(&c.group, &c.topic, c.queue_id) else {
        let code = ack_refusal(AckCheck::NeverDelivered, "change invisible", c.queue_offset);
        return reject(
            code,
            format!("message {} was never received", c.queue_offset),
        );
    };
    let check = s.check(c.queue_offset, c.handle);
    let f = match (check, s.inflight.get_mut(&c.queue_offset)) {
        (AckCheck::Matches, Some(f)) => f,
        _ => {
            let code = ack_refusal(check, "change invisible", c.queue_offset);
            return reject(
                code,
                format!(
                    "receipt handle {} of message {} in {}/{} is not current ({check:?})",
                    c.handle, c.queue_offset, c.topic, c.queue_id
                ),
            );
        }
    };
    f.invisible_until_ms = c.now_ms.saturating_add(c.invisible_ms);
    f.handle = LogIndex::of(&log_id);
    ApplyResponse::InvisibleChanged(InvisibleChanged {
        handle: f.handle,
        invisible_until_ms: f.invisible_until_ms,
        attempt: f.attempt,
    })
}
