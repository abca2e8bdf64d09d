//! The read path: pull (with tag filter and long polling), get by message id, query by key;
//! functions over `Shared` behind the [`Store`](crate::Store) methods of the same names.
//!
//! Only dispatched data is served: units exist only for applied (committed) entries, and
//! [`Store::get_by_id`](crate::Store::get_by_id) refuses ids at or past the dispatched end.
//! Every record read from the CommitLog is CRC-checked; the exact tag (pull) and key (query)
//! are checked on the record.

use std::time::Duration;

use bytes::Bytes;

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::error::StoreError;
use crate::filter::TagFilter;
use crate::message::format::peek_record_len;
use crate::message::format::MESSAGE_MIN_LEN;
use crate::message::Message;
use crate::message::MessageView;
use crate::state::Shared;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// A pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// First queue offset wanted.
    pub offset: QueueOffset,
    /// Most messages (capped by `max-pull-messages`).
    pub max_count: u32,
    /// Most body+record bytes; at least one message is returned if any matches.
    pub max_bytes: u64,
    /// Tag expression (`*`, empty, or `TagA || TagB`).
    pub tag_expr: String,
}

/// How a pull ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages returned.
    Found,
    /// `offset == max_offset`: nothing new yet (long-poll and retry).
    NoNewMessage,
    /// Units were scanned but none matched the tag filter; continue from `next_offset`.
    NoMatchedMessage,
    /// `offset < min_offset` (retention removed it): restart from `min_offset`.
    OffsetTooSmall,
    /// `offset > max_offset`.
    OffsetTooBig,
    /// The topic does not exist.
    NoSuchTopic,
    /// The queue id is not a readable queue of the topic.
    NoSuchQueue,
}

/// A pull answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullResult {
    /// Outcome.
    pub status: PullStatus,
    /// Messages, in queue offset order.
    pub messages: Vec<StoredMessage>,
    /// Offset to pull from next.
    pub next_offset: QueueOffset,
    /// Smallest readable offset of the queue.
    pub min_offset: QueueOffset,
    /// One past the last message of the queue.
    pub max_offset: QueueOffset,
}

/// A message as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// The message.
    pub message: Message,
    /// Its id (= physical offset of its record).
    pub msg_id: PhysOffset,
    /// Its queue offset (`u64::MAX` when unknown, e.g. from a key query).
    pub queue_offset: QueueOffset,
    /// Size of the record in the CommitLog.
    pub store_size: u32,
}

impl PullResult {
    fn empty(status: PullStatus, next: QueueOffset, min: QueueOffset, max: QueueOffset) -> Self {
        PullResult {
            status,
            messages: Vec::new(),
            next_offset: next,
            min_offset: min,
            max_offset: max,
        }
    }
}

/// The record of `u`, read once; `None` if retention deleted its segment meanwhile.
fn read_record(shared: &Shared, u: &CqUnit) -> Result<Option<Bytes>> {
    match shared.log.read_at(u.phys_offset, u.size) {
        Ok(rec) => Ok(Some(Bytes::from(rec))),
        Err(_) if u.phys_offset < shared.log.watermarks().min_phys_offset => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Pulls from a queue (see [`PullRequest`], [`PullStatus`]).
pub(crate) fn pull(shared: &Shared, req: &PullRequest) -> Result<PullResult> {
    let filter = TagFilter::parse(&req.tag_expr)?;
    let cfg = &shared.config;
    let max_count = req.max_count.clamp(1, cfg.max_pull_messages) as usize;
    let (units, min, max) = {
        let st = shared.state.read();
        let Some(topic) = st.topics.get(&req.topic) else {
            return Ok(PullResult::empty(
                PullStatus::NoSuchTopic,
                req.offset,
                QueueOffset::ZERO,
                QueueOffset::ZERO,
            ));
        };
        if !topic.readable(req.queue_id) {
            return Ok(PullResult::empty(
                PullStatus::NoSuchQueue,
                req.offset,
                QueueOffset::ZERO,
                QueueOffset::ZERO,
            ));
        }
        let (min, max) = st
            .cqs
            .get(&req.topic, req.queue_id)
            .map_or((QueueOffset::ZERO, QueueOffset::ZERO), |q| {
                (q.min_offset(), q.max_offset())
            });
        let status = if req.offset < min {
            Some(PullStatus::OffsetTooSmall)
        } else if req.offset > max {
            Some(PullStatus::OffsetTooBig)
        } else if req.offset == max {
            Some(PullStatus::NoNewMessage)
        } else {
            None
        };
        if let Some(s) = status {
            let next = if s == PullStatus::OffsetTooSmall {
                min
            } else {
                req.offset.min(max)
            };
            return Ok(PullResult::empty(s, next, min, max));
        }
        let q = st
            .cqs
            .get(&req.topic, req.queue_id)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("consume queue {}/{}", req.topic, req.queue_id),
            })?;
        let scan = if filter.is_all() {
            max_count
        } else {
            cfg.max_pull_scan_units as usize
        };
        (q.read(req.offset, scan)?, min, max)
    };
    collect(shared, req, &filter, max_count, units, min, max)
}

fn collect(
    shared: &Shared,
    req: &PullRequest,
    filter: &TagFilter,
    max_count: usize,
    units: Vec<CqUnit>,
    min: QueueOffset,
    max: QueueOffset,
) -> Result<PullResult> {
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let mut next = req.offset;
    for (i, u) in units.iter().enumerate() {
        let offset = req.offset.advance(i as u64);
        if out.len() >= max_count || (!out.is_empty() && bytes + u64::from(u.size) > req.max_bytes)
        {
            break;
        }
        next = offset.next();
        if !filter.matches_hash(u.tag_hash) {
            continue;
        }
        let Some(rec) = read_record(shared, u)? else {
            // Retention deleted the segment after the units were read: the caller restarts
            // from the queue's new minimum.
            let (min, max) = queue_offsets(shared, &req.topic, req.queue_id);
            return Ok(PullResult::empty(PullStatus::OffsetTooSmall, min, min, max));
        };
        // The one CRC-checked parse of the record; the body stays in its buffer.
        let view =
            MessageView::parse(&rec).map_err(|e| e.locate("commitlog", u.phys_offset.get()))?;
        if !filter.matches_tag(view.tags) {
            continue;
        }
        bytes += u64::from(u.size);
        out.push(StoredMessage {
            message: view.to_message_in(&rec),
            msg_id: u.phys_offset,
            queue_offset: offset,
            store_size: u.size,
        });
    }
    let status = if out.is_empty() {
        PullStatus::NoMatchedMessage
    } else {
        PullStatus::Found
    };
    Ok(PullResult {
        status,
        messages: out,
        next_offset: next,
        min_offset: min,
        max_offset: max,
    })
}

/// `(min, max)` offsets of a queue (`(0, 0)` for a queue without messages yet).
pub(crate) fn queue_offsets(
    shared: &Shared,
    topic: &str,
    queue_id: QueueId,
) -> (QueueOffset, QueueOffset) {
    let st = shared.state.read();
    st.cqs
        .get(topic, queue_id)
        .map_or((QueueOffset::ZERO, QueueOffset::ZERO), |q| {
            (q.min_offset(), q.max_offset())
        })
}

/// Long poll: true as soon as the queue's max offset exceeds `offset`, false on timeout.
pub(crate) async fn wait_for_messages(
    shared: &Shared,
    topic: &str,
    queue_id: QueueId,
    offset: QueueOffset,
    timeout: Duration,
) -> bool {
    let mut rx = shared.applied_tx.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        rx.borrow_and_update();
        if queue_offsets(shared, topic, queue_id).1 > offset {
            return true;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => continue,
            Ok(Err(_)) | Err(_) => return queue_offsets(shared, topic, queue_id).1 > offset,
        }
    }
}

/// The message with id `msg_id` (its physical offset), CRC-checked. Only dispatched
/// messages are found.
pub(crate) fn get_by_id(shared: &Shared, msg_id: PhysOffset) -> Result<StoredMessage> {
    let not_found = || StoreError::NotFound {
        what: format!("message {msg_id}"),
    };
    let (end, min) = {
        let st = shared.state.read();
        (
            st.dispatched_phys_end,
            shared.log.watermarks().min_phys_offset,
        )
    };
    // `msg_id` comes from a client: any u64, so the end of its record is computed checked;
    // one whose smallest record would end past 2^64 is refused as such.
    if msg_id.checked_advance(MESSAGE_MIN_LEN as u64).is_none() {
        return Err(StoreError::invalid(format!(
            "{msg_id} cannot be a message id: a record there would end past 2^64"
        )));
    }
    let fits = |len: u64| msg_id.checked_advance(len).is_some_and(|e| e <= end);
    if msg_id < min || !fits(MESSAGE_MIN_LEN as u64) {
        return Err(not_found());
    }
    let head = shared.log.read_at(msg_id, 4).map_err(|_| not_found())?;
    let len = peek_record_len(&head).ok_or_else(not_found)?;
    if len < MESSAGE_MIN_LEN as u32 || !fits(u64::from(len)) {
        return Err(not_found());
    }
    let rec = shared.log.read_at(msg_id, len).map_err(|_| not_found())?;
    let view = MessageView::parse(&rec).map_err(|_| not_found())?;
    let queue_offset = {
        let st = shared.state.read();
        st.cqs
            .get(view.topic, view.queue_id)
            .and_then(|q| q.offset_of_phys(msg_id))
    };
    // A CRC-valid record that no queue points at was never dispatched (rejected batch).
    let queue_offset = queue_offset.ok_or_else(not_found)?;
    Ok(StoredMessage {
        message: view.to_message(),
        msg_id,
        queue_offset,
        store_size: len,
    })
}

/// A key query's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyQueryResult {
    /// The messages found, newest first.
    pub messages: Vec<StoredMessage>,
    /// True when a further message matched but did not fit the byte budget.
    pub truncated: bool,
}

/// Messages of `topic` with key `key` stored in `[begin_ms, end_ms]`, newest first, at
/// most `max` and at most `max_bytes` of records (the first one always fits; one that would
/// pass the budget ends the answer with `truncated`). Index candidates are checked against
/// the record (hash collisions and other topics are filtered out).
pub(crate) fn query_by_key(
    shared: &Shared,
    topic: &str,
    key: &str,
    range: (u64, u64),
    max: usize,
    max_bytes: u64,
) -> Result<KeyQueryResult> {
    let candidates = {
        let st = shared.state.read();
        st.index
            .query(key, range.0, range.1, max.saturating_mul(4).max(64))
    };
    let mut out = Vec::new();
    let mut bytes = 0u64;
    for phys in candidates {
        if out.len() >= max {
            break;
        }
        let m = match get_by_id(shared, phys) {
            Ok(m) => m,
            Err(StoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        if m.message.topic == topic && m.message.keys.iter().any(|k| k == key) {
            let size = u64::from(m.store_size);
            if !out.is_empty() && bytes.saturating_add(size) > max_bytes {
                return Ok(KeyQueryResult {
                    messages: out,
                    truncated: true,
                });
            }
            bytes = bytes.saturating_add(size);
            out.push(m);
        }
    }
    Ok(KeyQueryResult {
        messages: out,
        truncated: false,
    })
}
