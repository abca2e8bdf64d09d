//! The owned forms of the pop consumption commands ([`Receive`], [`Ack`],
//! [`ChangeInvisible`]): what the leader stamps and proposes, what apply reads. Body bytes in
//! [`super::format`]'s byte table; applied by [`crate::sm::receive`].

use crate::types::LogIndex;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;

/// Hand out up to `max_messages` messages of a queue to a group, invisible for
/// `invisible_ms` (see [`crate::receive`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receive {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Most messages to hand out (>= 1).
    pub max_messages: u32,
    /// How long the handed-out messages stay invisible, in ms.
    pub invisible_ms: u64,
    /// The leader's clock when it proposed (apply never reads a clock).
    pub now_ms: TimestampMs,
    /// Most messages in flight for the group on this queue (the leader's
    /// `max-inflight-per-queue`, stamped so apply does not read node-local config).
    pub max_inflight: u32,
    /// The leader's minimum offset of the queue when it proposed: offsets below it are
    /// forgotten on every replica alike (see [`crate::sm::receive`]).
    pub queue_min: QueueOffset,
    /// Tag expression ([`crate::filter::TagFilter`] syntax); non-matching messages are
    /// skipped for the group, never delivered.
    pub filter: String,
    /// FIFO delivery for the group (the leader's `rocketmq-fifo-groups`, stamped so apply
    /// does not read node-local config): while a delivered message of the queue is in
    /// flight, nothing new is handed out from it (see [`crate::sm::receive`]). Entries
    /// written before this field existed decode as `false`.
    pub fifo: bool,
}

/// One message to ack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckEntry {
    /// Queue.
    pub queue_id: QueueId,
    /// Queue offset of the message.
    pub queue_offset: QueueOffset,
    /// Receipt handle it was delivered (or last changed) with.
    pub handle: LogIndex,
}

/// Ack messages of one topic for a group (one result per entry, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// The messages (>= 1).
    pub entries: Vec<AckEntry>,
}

/// Move an in-flight message's invisibility deadline to `now_ms + invisible_ms`; it gets a
/// new receipt handle (this entry's log index) and the old one goes stale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeInvisible {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Queue offset of the message.
    pub queue_offset: QueueOffset,
    /// Its current receipt handle.
    pub handle: LogIndex,
    /// New invisibility from `now_ms`, in ms.
    pub invisible_ms: u64,
    /// The leader's clock when it proposed.
    pub now_ms: TimestampMs,
}
