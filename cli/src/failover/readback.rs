//! The failover test's side of the checkers' input: the tag each test message carries in its
//! properties (written by [`tagged_message`], found by [`tag_of`], which the replica reader of
//! [`crate::check::read`] is given) and cluster status samples as [`Observation`]s.

use raftmq_client::proto::ClusterStatusReply;
use raftmq_client::proto::Message;

use crate::check::MessageTag;
use crate::check::Observation;

/// Message property holding the producer id.
pub const PRODUCER_PROP: &str = "raftmq-test-producer";
/// Message property holding the sequence number.
pub const SEQ_PROP: &str = "raftmq-test-seq";

/// The message a test producer sends for `tag` (identical on every retry).
pub fn tagged_message(topic: &str, tag: MessageTag, size: usize) -> Message {
    let head = format!("{tag} ");
    let body: Vec<u8> = head
        .bytes()
        .chain(std::iter::repeat(b'.'))
        .take(size.max(head.len()))
        .collect();
    Message {
        topic: topic.to_string(),
        properties: [
            (PRODUCER_PROP.to_string(), tag.producer.to_string()),
            (SEQ_PROP.to_string(), tag.seq.to_string()),
        ]
        .into_iter()
        .collect(),
        body: body.into(),
        ..Message::default()
    }
}

/// The tag a message carries, if both properties parse.
pub fn tag_of(m: &Message) -> Option<MessageTag> {
    let producer = m.properties.get(PRODUCER_PROP)?.parse().ok()?;
    let seq = m.properties.get(SEQ_PROP)?.parse().ok()?;
    Some(MessageTag { producer, seq })
}

/// One node's status as an [`Observation`].
pub fn observation(r: &ClusterStatusReply, at_us: u64, restarted: bool) -> Observation {
    let committed = r
        .members
        .iter()
        .find(|m| m.node_id == r.responder_id)
        .and_then(|m| m.watermarks)
        .and_then(|w| w.committed_index);
    Observation {
        at_us,
        node: r.responder_id,
        term: r.term,
        is_leader: r.leader_id == Some(r.responder_id),
        committed,
        restarted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::read::digest;

    #[test]
    fn tags_round_trip_and_digests_differ() {
        let tag = MessageTag {
            producer: 3,
            seq: 41,
        };
        let m = tagged_message("t", tag, 32);
        assert_eq!(m.body.len(), 32);
        assert_eq!(tag_of(&m), Some(tag));
        let other = tagged_message(
            "t",
            MessageTag {
                producer: 3,
                seq: 42,
            },
            32,
        );
        assert_ne!(digest(&m), digest(&other));
        assert_eq!(digest(&m), digest(&m.clone()));
        assert_eq!(tag_of(&Message::default()), None);
    }
}
