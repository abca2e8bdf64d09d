//! Identities used across the store crate: queue ids and queue offsets as their own types (so
//! the compiler tells them from physical offsets and counts), plus the raft-log ones it uses.

use std::fmt;

use serde::Deserialize;
use serde::Serialize;

pub use raftmq_raft_log::types::AppPayload;
pub use raftmq_raft_log::types::LogIndex;
pub use raftmq_raft_log::types::PhysOffset;

/// Index of a queue inside a topic (`0..queue_count`). Transparent for serde: encodes as the
/// bare `u32`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct QueueId(u32);

impl QueueId {
    /// The queue with this number.
    pub const fn new(raw: u32) -> Self {
        QueueId(raw)
    }

    /// The bare number (wire, on-disk codecs, tracing).
    pub const fn get(self) -> u32 {
        self.0
    }

    /// True if this queue exists among `queue_count` queues (`0..queue_count`).
    pub const fn is_below(self, queue_count: u32) -> bool {
        self.0 < queue_count
    }

    /// The queues `0..queue_count`.
    pub fn all(queue_count: u32) -> impl Iterator<Item = QueueId> {
        (0..queue_count).map(QueueId)
    }
}

/// Position of a message inside one queue: contiguous from the queue's first message, identical
/// on every replica. Transparent for serde: encodes as the bare `u64`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct QueueOffset(u64);

impl QueueOffset {
    /// The first offset of a queue that never lost a message.
    pub const ZERO: QueueOffset = QueueOffset(0);

    /// The offset with this number.
    pub const fn new(raw: u64) -> Self {
        QueueOffset(raw)
    }

    /// The bare number (wire, on-disk codecs, tracing).
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The offset of the message after this one.
    pub const fn next(self) -> Self {
        QueueOffset(self.0 + 1)
    }

    /// The offset of the message before this one. Panics at zero (callers hold a non-empty
    /// range that ends here).
    pub fn prev(self) -> Self {
        QueueOffset(self.0.checked_sub(1).expect("no queue offset below zero"))
    }

    /// The offset `count` messages after this one.
    pub const fn advance(self, count: u64) -> Self {
        QueueOffset(self.0 + count)
    }

    /// Number of messages in `[self, end)`. Panics if `end` is before `self` (a broken range
    /// invariant, never client data: use [`QueueOffset::checked_count_to`] there).
    pub fn count_to(self, end: QueueOffset) -> u64 {
        end.0
            .checked_sub(self.0)
            .expect("queue offset range ends before it starts")
    }

    /// The offsets `[self, end)`, in order.
    pub fn up_to(self, end: QueueOffset) -> impl Iterator<Item = QueueOffset> {
        (self.0..end.0).map(QueueOffset)
    }

    /// Number of messages in `[self, end)`, or `None` if `end` is before `self`.
    pub const fn checked_count_to(self, end: QueueOffset) -> Option<u64> {
        end.0.checked_sub(self.0)
    }
}

macro_rules! bare_number_fmt {
    ($($t:ty),*) => {$(
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    )*};
}

bare_number_fmt!(QueueId, QueueOffset);

/// Stable 64-bit hash of a message tag, stored in ConsumeQueue units (see [`crate::hash`]).
pub type TagHash = u64;

/// Milliseconds since the Unix epoch.
pub type TimestampMs = u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_identities_are_bare_numbers_in_json_and_debug() {
        assert_eq!(
            serde_json::to_string(&QueueOffset::new(7)).expect("json"),
            "7"
        );
        assert_eq!(serde_json::to_string(&QueueId::new(3)).expect("json"), "3");
        let map: std::collections::BTreeMap<QueueId, QueueOffset> =
            [(QueueId::new(1), QueueOffset::new(5))].into();
        let json = serde_json::to_string(&map).expect("json");
        assert_eq!(json, r#"{"1":5}"#);
        let back: std::collections::BTreeMap<QueueId, QueueOffset> =
            serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, map);
        assert_eq!(format!("{:?}", QueueOffset::new(9)), "9");
        assert_eq!(QueueOffset::new(2).count_to(QueueOffset::new(5)), 3);
        assert_eq!(
            QueueOffset::new(5).checked_count_to(QueueOffset::new(2)),
            None
        );
    }
}
