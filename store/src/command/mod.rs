//! Replicated commands: what the bytes of an [`AppPayload`] (a normal Raft entry) mean.
//!
//! The leader builds a [`Command`], encodes it into an `AppPayload` and proposes it; every
//! replica decodes the committed payload with [`CommandView::parse_logged`] (the log's record
//! CRC covers it; [`CommandView::parse`] checks the command's own CRC too) and applies it. A
//! message batch is parsed without copying bodies; each message's record sits at a known
//! offset inside the payload, so its id (physical offset) follows from the entry's physical
//! offset ([`crate::message::message_id`]). The pop commands ([`Receive`], [`Ack`],
//! [`ChangeInvisible`]) carry the leader's clock and limits, so apply reads neither.

mod batch_format;
mod encode;
pub mod format;
mod owned;
pub mod pop;
mod pop_format;
mod user_format;

pub use format::record_offsets;
pub use format::BatchMessage;
pub use format::CommandKind;
pub use format::CommandView;
pub use owned::Command;
pub use owned::CommitOffset;
pub use pop::Ack;
pub use pop::AckEntry;
pub use pop::ChangeInvisible;
pub use pop::Receive;

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::hash::tag_hash;
use crate::message::message_id;
use crate::types::AppPayload;
use crate::types::PhysOffset;

impl Command {
    /// Encodes into a Raft entry payload (deterministic).
    pub fn encode(&self) -> Result<AppPayload> {
        encode::encode(self).map(AppPayload::from)
    }

    /// Decodes and copies a payload (tests and tools; the apply path uses [`CommandView`]).
    pub fn decode(payload: &[u8]) -> Result<Command> {
        Ok(CommandView::parse(payload)?.to_command())
    }
}

impl format::BatchMessage<'_> {
    /// This message's id (the physical offset of its record) when its entry starts at
    /// `entry_phys`.
    pub fn id(&self, entry_phys: PhysOffset) -> PhysOffset {
        message_id(entry_phys, self.offset_in_payload)
    }

    /// The ConsumeQueue unit dispatch writes for this message when its entry starts at
    /// `entry_phys`.
    pub fn cq_unit(&self, entry_phys: PhysOffset) -> CqUnit {
        CqUnit {
            phys_offset: self.id(entry_phys),
            size: self.view.record_len,
            tag_hash: tag_hash(self.view.tags),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::types::QueueId;

    #[test]
    fn cq_unit_of_batch_message() {
        let mut m = Message::new("t", QueueId::new(1), b"xy".to_vec());
        m.tags = "TagA".into();
        let p = Command::batch(vec![m.clone(), m]).encode().expect("encode");
        let CommandView::SendBatch { messages: ms, .. } = CommandView::parse(&p.0).expect("parse")
        else {
            panic!("batch expected")
        };
        let entry = PhysOffset::new(1000);
        let u = ms[1].cq_unit(entry);
        assert_eq!(u.phys_offset, message_id(entry, ms[1].offset_in_payload));
        assert_eq!(u.size, ms[1].view.record_len);
        assert_eq!(u.tag_hash, tag_hash("TagA"));
        assert_eq!(
            ms[0].id(entry).advance(u64::from(ms[0].view.record_len)),
            u.phys_offset
        );
    }
}
