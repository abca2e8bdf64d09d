//! [`ReceiveTable`]: `group -> topic -> queue -> QueueReceive` (next offset never delivered,
//! in-flight messages), changed only by applying committed commands in log order.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;
use crate::types::LogIndex;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;

/// Most new ConsumeQueue units one `Receive` scans past `next` (a tag filter may skip many);
/// a constant of the format, not a setting, so every replica scans the same.
pub const RECEIVE_SCAN_UNITS: usize = 4096;

/// A message handed out to a group and not acked yet, or a delayed one parked until its
/// delivery time (attempt 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Inflight {
    /// Invisible to the group until this time (leader clock, ms since the epoch); at or
    /// after it a `Receive` delivers the message (again). For a parked message: its
    /// delivery time.
    pub invisible_until_ms: TimestampMs,
    /// Deliveries so far (1 for the first); 0 for a parked delayed message, never
    /// delivered yet.
    pub attempt: u32,
    /// The receipt handle: log index of the entry that last delivered the message or moved
    /// its deadline (for a parked one: the entry that parked it). Only this handle acks it,
    /// and only once delivered (attempt >= 1).
    pub handle: LogIndex,
}

/// A group's pop state on one queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueReceive {
    /// First queue offset never delivered to the group (nor skipped by its filter).
    pub next: QueueOffset,
    /// Invariant: every key is below `next`. Messages in flight (parked ones included), by
    /// queue offset.
    pub inflight: BTreeMap<QueueOffset, Inflight>,
}

/// How an ack (or deadline change) of `(queue_offset, handle)` stands against the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckCheck {
    /// In flight with exactly this handle (and delivered: a parked message never matches).
    Matches,
    /// In flight, but under another handle (redelivered, or the deadline was moved since).
    StaleHandle,
    /// Below `next` and not in flight: acked already (or skipped by the filter, or gone with
    /// retention); acking again changes nothing.
    AlreadyAcked,
    /// Never delivered to the group (at or past `next`, or parked until its delivery time).
    NeverDelivered,
}

impl QueueReceive {
    /// State of a group that starts consuming at `start`.
    pub fn starting_at(start: QueueOffset) -> Self {
        QueueReceive {
            next: start,
            inflight: BTreeMap::new(),
        }
    }

    /// The group's progress: the first offset not yet acked (`min(inflight keys ∪ {next})`).
    pub fn progress(&self) -> QueueOffset {
        self.inflight
            .keys()
            .next()
            .copied()
            .map_or(self.next, |o| o.min(self.next))
    }

    /// True if a delivered message (attempt >= 1, not a parked delayed one) is in flight:
    /// for a FIFO group the queue is locked ([`crate::sm::receive`]).
    pub fn has_delivered_inflight(&self) -> bool {
        self.inflight.values().any(|f| f.attempt >= 1)
    }

    /// Forgets offsets below `floor` (retention removed them): in-flight entries go and
    /// `next` moves up to `floor`. Returns how many in-flight entries were dropped.
    pub fn forget_below(&mut self, floor: QueueOffset) -> usize {
        let keep = self.inflight.split_off(&floor);
        let dropped = self.inflight.len();
        self.inflight = keep;
        self.next = self.next.max(floor);
        dropped
    }

    /// Where `(offset, handle)` stands.
    pub fn check(&self, offset: QueueOffset, handle: LogIndex) -> AckCheck {
        match self.inflight.get(&offset) {
            Some(f) if f.attempt == 0 => AckCheck::NeverDelivered,
            Some(f) if f.handle == handle => AckCheck::Matches,
            Some(_) => AckCheck::StaleHandle,
            None if offset < self.next => AckCheck::AlreadyAcked,
            None => AckCheck::NeverDelivered,
        }
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if let Some((o, _)) = self.inflight.range(self.next..).next() {
            return Err(format!(
                "in-flight offset {o} is not below next {}",
                self.next
            ));
        }
        Ok(())
    }
}

/// `group -> topic -> queue_id -> QueueReceive`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReceiveTable {
    /// Invariant: no inner map is empty.
    groups: BTreeMap<String, BTreeMap<String, BTreeMap<QueueId, QueueReceive>>>,
}

impl ReceiveTable {
    /// An empty table.
    pub fn new() -> Self {
        ReceiveTable::default()
    }

    /// True if `group` has pop state on some queue.
    pub fn has_group(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// Group names, in order.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// A group's state on a queue.
    pub fn get(&self, group: &str, topic: &str, queue_id: QueueId) -> Option<&QueueReceive> {
        self.groups.get(group)?.get(topic)?.get(&queue_id)
    }

    /// A group's state on a queue, to change.
    pub fn get_mut(
        &mut self,
        group: &str,
        topic: &str,
        queue_id: QueueId,
    ) -> Option<&mut QueueReceive> {
        self.groups
            .get_mut(group)?
            .get_mut(topic)?
            .get_mut(&queue_id)
    }

    /// A group's state on a queue, created at `start` if it has none.
    pub fn get_or_start(
        &mut self,
        group: &str,
        topic: &str,
        queue_id: QueueId,
        start: impl FnOnce() -> QueueOffset,
    ) -> &mut QueueReceive {
        self.groups
            .entry(group.to_owned())
            .or_default()
            .entry(topic.to_owned())
            .or_default()
            .entry(queue_id)
            .or_insert_with(|| QueueReceive::starting_at(start()))
    }

    /// Forgets a group's state on one queue (an explicit offset reset). True if it had one.
    pub fn remove_queue(&mut self, group: &str, topic: &str, queue_id: QueueId) -> bool {
        let Some(topics) = self.groups.get_mut(group) else {
            return false;
        };
        let Some(queues) = topics.get_mut(topic) else {
            return false;
        };
        let removed = queues.remove(&queue_id).is_some();
        if queues.is_empty() {
            topics.remove(topic);
        }
        if topics.is_empty() {
            self.groups.remove(group);
        }
        removed
    }

    /// Forgets every group's state on `topic` (topic deleted).
    pub fn remove_topic(&mut self, topic: &str) {
        for topics in self.groups.values_mut() {
            topics.remove(topic);
        }
        self.groups.retain(|_, topics| !topics.is_empty());
    }

    /// Every `(group, topic, queue_id, state)`, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, QueueId, &QueueReceive)> {
        self.groups.iter().flat_map(|(g, topics)| {
            topics.iter().flat_map(move |(t, qs)| {
                qs.iter().map(move |(q, s)| (g.as_str(), t.as_str(), *q, s))
            })
        })
    }

    /// Messages in flight, over every group and queue.
    pub fn inflight_count(&self) -> usize {
        self.iter().map(|(_, _, _, s)| s.inflight.len()).sum()
    }

    /// True when no group has state.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Checks the invariants (no empty inner map; in flight below `next`).
    pub fn validate(&self) -> Result<()> {
        for (g, topics) in &self.groups {
            if topics.is_empty() || topics.values().any(BTreeMap::is_empty) {
                return Err(StoreError::invalid(format!(
                    "receive table: group '{g}' has an empty map"
                )));
            }
        }
        for (g, t, q, s) in self.iter() {
            s.validate()
                .map_err(|why| StoreError::invalid(format!("receive table {g}/{t}/{q}: {why}")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(until: u64, attempt: u32, handle: u64) -> Inflight {
        Inflight {
            invisible_until_ms: until,
            attempt,
            handle: LogIndex::new(handle),
        }
    }

    fn o(v: u64) -> QueueOffset {
        QueueOffset::new(v)
    }

    #[test]
    fn progress_check_and_forget() {
        let mut s = QueueReceive::starting_at(o(3));
        assert_eq!(s.progress(), o(3));
        assert_eq!(s.check(o(3), LogIndex::new(1)), AckCheck::NeverDelivered);
        assert_eq!(s.check(o(2), LogIndex::new(1)), AckCheck::AlreadyAcked);
        s.inflight.insert(o(3), f(10, 1, 7));
        s.inflight.insert(o(5), f(10, 2, 8));
        s.next = o(6);
        assert_eq!(s.progress(), o(3));
        assert_eq!(s.check(o(3), LogIndex::new(7)), AckCheck::Matches);
        assert_eq!(s.check(o(3), LogIndex::new(8)), AckCheck::StaleHandle);
        assert_eq!(s.check(o(4), LogIndex::new(8)), AckCheck::AlreadyAcked);
        assert_eq!(s.forget_below(o(4)), 1);
        assert_eq!(s.progress(), o(5));
        assert_eq!(s.forget_below(o(9)), 1);
        assert_eq!((s.next, s.inflight.len()), (o(9), 0));
        s.validate().expect("valid");
        s.inflight.insert(o(8), f(50, 0, 9));
        assert_eq!(
            s.check(o(8), LogIndex::new(9)),
            AckCheck::NeverDelivered,
            "a parked message is not acked, even with the parking entry's index"
        );
        assert_eq!(s.progress(), o(8));
        s.validate().expect("parked is valid");
        s.inflight.insert(o(9), f(1, 1, 1));
        assert!(s.validate().is_err(), "in flight at next");
    }

    #[test]
    fn table_start_remove_and_serde() {
        let mut t = ReceiveTable::new();
        let q = QueueId::new(1);
        t.get_or_start("g", "a", q, || o(4))
            .inflight
            .insert(o(2), f(5, 1, 9));
        t.get_or_start("g", "a", q, || panic!("exists")).next = o(7);
        t.get_or_start("g", "b", q, || o(0));
        t.get_or_start("h", "a", QueueId::new(0), || o(1));
        assert_eq!(t.inflight_count(), 1);
        t.validate().expect("valid");
        let json = serde_json::to_string(&t).expect("ser");
        let back: ReceiveTable = serde_json::from_str(&json).expect("de");
        assert_eq!(back, t);
        assert_eq!(
            serde_json::to_string(&back).expect("ser"),
            json,
            "deterministic"
        );
        t.remove_topic("a");
        assert_eq!(
            t.iter()
                .map(|(g, t, q, _)| (g, t, q.get()))
                .collect::<Vec<_>>(),
            [("g", "b", 1)]
        );
        assert!(t.remove_queue("g", "b", q));
        assert!(!t.remove_queue("g", "b", q));
        assert!(t.is_empty());
        t.validate().expect("empty is valid");
    }
}
