//! Replicated commands: what the bytes of an [`AppPayload`] (a normal Raft entry) mean.
//!
//! The leader builds a [`Command`], encodes it into an `AppPayload` and proposes it; every
//! replica decodes the committed payload with [`CommandView::parse`] and applies it. A message
//! batch is parsed without copying bodies; each message's record sits at a known offset inside
//! the payload, so its id (physical offset) is
//! `payload_start_phys + offset_in_payload` (see [`message_phys_offset`]), where
//! `payload_start_phys` is the entry's physical offset plus the raft-log entry header length.

pub mod format;

pub use format::record_offsets;
pub use format::BatchMessage;
pub use format::CommandKind;
pub use format::CommandView;

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::hash::tag_hash;
use crate::message::Message;
use crate::topic::TopicConfig;
use crate::types::AppPayload;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// A consumer group's committed progress on one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitOffset {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Next queue offset the group will consume.
    pub offset: QueueOffset,
}

/// A command as the leader builds it (owned form of [`CommandView`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// One or more messages, one Raft entry. Queue ids are chosen by the leader (in each
    /// record). `auto_create_queues: Some(n)` makes apply create a missing topic with `n`
    /// read/write queues (deterministically, on every replica); `None` rejects the batch at
    /// apply time if the topic does not exist.
    SendBatch {
        /// The messages, in order.
        messages: Vec<Message>,
        /// Queue count of a topic created on the fly, if allowed.
        auto_create_queues: Option<u32>,
    },
    /// Create a topic.
    CreateTopic(TopicConfig),
    /// Replace a topic's config.
    UpdateTopic(TopicConfig),
    /// Delete a topic.
    DeleteTopic {
        /// Topic name.
        topic: String,
    },
    /// Commit a consumer group offset.
    CommitOffset(CommitOffset),
}

impl Command {
    /// Encodes into a Raft entry payload (deterministic).
    pub fn encode(&self) -> Result<AppPayload> {
        format::encode(self).map(AppPayload)
    }

    /// A batch that requires its topics to exist.
    pub fn batch(messages: Vec<Message>) -> Command {
        Command::SendBatch {
            messages,
            auto_create_queues: None,
        }
    }

    /// Decodes and copies a payload (tests and tools; the apply path uses [`CommandView`]).
    pub fn decode(payload: &[u8]) -> Result<Command> {
        Ok(CommandView::parse(payload)?.to_command())
    }
}

/// Physical offset (message id) of a record at `offset_in_payload` inside a payload whose first
/// byte sits at `payload_start_phys` in the CommitLog.
pub fn message_phys_offset(payload_start_phys: PhysOffset, offset_in_payload: u32) -> PhysOffset {
    payload_start_phys + u64::from(offset_in_payload)
}

impl format::BatchMessage<'_> {
    /// This message's id: the physical offset of its record.
    pub fn phys_offset(&self, payload_start_phys: PhysOffset) -> PhysOffset {
        message_phys_offset(payload_start_phys, self.offset_in_payload)
    }

    /// The ConsumeQueue unit dispatch writes for this message.
    pub fn cq_unit(&self, payload_start_phys: PhysOffset) -> CqUnit {
        CqUnit {
            phys_offset: self.phys_offset(payload_start_phys),
            size: self.view.record_len,
            tag_hash: tag_hash(self.view.tags),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cq_unit_of_batch_message() {
        let mut m = Message::new("t", 1, b"xy".to_vec());
        m.tags = "TagA".into();
        let p = Command::batch(vec![m.clone(), m]).encode().expect("encode");
        let CommandView::SendBatch { messages: ms, .. } = CommandView::parse(&p.0).expect("parse")
        else {
            panic!("batch expected")
        };
        let u = ms[1].cq_unit(1000);
        assert_eq!(u.phys_offset, 1000 + u64::from(ms[1].offset_in_payload));
        assert_eq!(u.size, ms[1].view.record_len);
        assert_eq!(u.tag_hash, tag_hash("TagA"));
        assert_eq!(
            ms[0].phys_offset(1000) + u64::from(ms[0].view.record_len),
            u.phys_offset
        );
    }
}
