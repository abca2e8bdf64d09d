//! Committed consumer-group offsets: the replicated table `CommitOffset` commands update.
//!
//! Part of the state machine and its snapshot: it changes only by applying committed
//! commands in log order, and uses `BTreeMap`s so iteration and serialization are
//! deterministic on every replica.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::command::CommitOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// `group -> topic -> queue_id -> next offset to consume`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConsumerOffsetTable {
    /// Invariant: no inner map is empty.
    groups: BTreeMap<String, BTreeMap<String, BTreeMap<QueueId, QueueOffset>>>,
}

impl ConsumerOffsetTable {
    /// An empty table.
    pub fn new() -> Self {
        ConsumerOffsetTable::default()
    }

    /// Records a commit. The offset may go backwards (an explicit reset by the group); whether
    /// to allow that is the leader's check before proposing. Returns the previous offset.
    pub fn commit(&mut self, c: &CommitOffset) -> Option<QueueOffset> {
        self.groups
            .entry(c.group.clone())
            .or_default()
            .entry(c.topic.clone())
            .or_default()
            .insert(c.queue_id, c.offset)
    }

    /// The committed offset of a group on a queue.
    pub fn get(&self, group: &str, topic: &str, queue_id: QueueId) -> Option<QueueOffset> {
        self.groups.get(group)?.get(topic)?.get(&queue_id).copied()
    }

    /// All `(topic, queue_id, offset)` of a group, in order.
    pub fn group(&self, group: &str) -> impl Iterator<Item = (&str, QueueId, QueueOffset)> {
        self.groups.get(group).into_iter().flat_map(|topics| {
            topics
                .iter()
                .flat_map(|(t, qs)| qs.iter().map(move |(q, o)| (t.as_str(), *q, *o)))
        })
    }

    /// True if `group` has a committed offset.
    pub fn has_group(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// Group names, in order.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Forgets every offset on `topic` (topic deleted).
    pub fn remove_topic(&mut self, topic: &str) {
        for topics in self.groups.values_mut() {
            topics.remove(topic);
        }
        self.groups.retain(|_, topics| !topics.is_empty());
    }

    /// Forgets a group. Returns true if it existed.
    pub fn remove_group(&mut self, group: &str) -> bool {
        self.groups.remove(group).is_some()
    }

    /// Number of `(group, topic, queue)` entries.
    pub fn len(&self) -> usize {
        self.groups
            .values()
            .flat_map(BTreeMap::values)
            .map(BTreeMap::len)
            .sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(group: &str, topic: &str, queue_id: u32, offset: u64) -> CommitOffset {
        CommitOffset {
            group: group.into(),
            topic: topic.into(),
            queue_id: QueueId::new(queue_id),
            offset: QueueOffset::new(offset),
        }
    }

    #[test]
    fn commit_get_remove() {
        let mut t = ConsumerOffsetTable::new();
        assert_eq!(t.commit(&c("g1", "a", 0, 5)), None);
        assert_eq!(t.commit(&c("g1", "a", 0, 7)), Some(QueueOffset::new(5)));
        t.commit(&c("g1", "b", 2, 1));
        t.commit(&c("g2", "a", 1, 3));
        assert_eq!(t.get("g1", "a", QueueId::new(0)), Some(QueueOffset::new(7)));
        assert_eq!(t.get("g1", "a", QueueId::new(1)), None);
        assert_eq!(t.len(), 3);
        assert_eq!(
            t.group("g1")
                .map(|(t, q, o)| (t, q.get(), o.get()))
                .collect::<Vec<_>>(),
            [("a", 0, 7), ("b", 2, 1)]
        );
        assert_eq!(t.groups().collect::<Vec<_>>(), ["g1", "g2"]);
        t.remove_topic("a");
        assert_eq!(
            t.groups().collect::<Vec<_>>(),
            ["g1"],
            "g2 had only topic a"
        );
        assert!(t.remove_group("g1"));
        assert!(t.is_empty());
    }

    #[test]
    fn serde_round_trip_is_deterministic() {
        let mut t = ConsumerOffsetTable::new();
        t.commit(&c("g", "t", 10, 1));
        t.commit(&c("g", "t", 2, 1));
        let s = serde_json::to_string(&t).expect("ser");
        assert_eq!(s, r#"{"g":{"t":{"2":1,"10":1}}}"#);
        let back: ConsumerOffsetTable = serde_json::from_str(&s).expect("de");
        assert_eq!(back, t);
    }
}
