//! The identity of a producer's sends (exactly-once sends): one random producer id per
//! [`Client`](crate::Client) (its clones share it) and a sequence number per message, sent as
//! the message's `producer_id` and `sequence` fields (the broker stores them as the reserved
//! properties its dedup window reads; the fields spare both sides a map entry and a decimal
//! string per message). A message keeps the identity
//! it was given, so every resend of it (the client's own retries, or the caller's after
//! [`ClientError::UnknownOutcome`](crate::ClientError::UnknownOutcome)) is answered with the
//! original result instead of being stored again.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::hash::Hasher;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use bytes::Bytes;
use raftmq_proto::v1::Message;

/// Property naming the producer of an idempotent send (the broker's
/// `raftmq_store::dedup::PRODUCER_ID_PROPERTY`).
pub const PRODUCER_ID_PROPERTY: &str = "RAFTMQ_PRODUCER_ID";
/// Property holding the message's sequence number within its producer (a decimal u64; the
/// broker's `raftmq_store::dedup::SEQUENCE_PROPERTY`).
pub const SEQUENCE_PROPERTY: &str = "RAFTMQ_SEQUENCE";

/// A producer id and the next sequence number.
#[derive(Debug)]
pub(crate) struct Producer {
    /// Hex, so ASCII; a `Bytes` that every message shares rather than copies.
    id: Bytes,
    next_seq: AtomicU64,
}

impl Producer {
    /// A producer with a fresh random id (128 bits, hex).
    pub(crate) fn random() -> Self {
        Producer {
            id: Bytes::from(random_id()),
            next_seq: AtomicU64::new(0),
        }
    }

    /// The producer id.
    pub(crate) fn id(&self) -> &str {
        std::str::from_utf8(&self.id).unwrap_or_default()
    }

    /// `m` with this producer's identity and the next sequence number, unless it already
    /// carries an identity (the fields, the identity properties, or a client message id
    /// `UNIQ_KEY`), which it keeps.
    pub(crate) fn identify(&self, mut m: Message) -> Message {
        let has = |k: &str| m.properties.contains_key(k);
        if !m.producer_id.is_empty()
            || m.sequence.is_some()
            || has(PRODUCER_ID_PROPERTY)
            || has(SEQUENCE_PROPERTY)
            || has("UNIQ_KEY")
        {
            return m;
        }
        m.sequence = Some(self.next_seq.fetch_add(1, Ordering::Relaxed));
        m.producer_id = self.id.clone();
        m
    }
}

/// 128 random bits in hex: std's randomly keyed SipHash over the clock, the process id and a
/// process-wide counter (unique per producer; not a secret).
fn random_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let word = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.finish()
    };
    format!("{:016x}{:016x}", word(1), word(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_unique_and_kept_by_resends() {
        let (a, b) = (Producer::random(), Producer::random());
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id().len(), 32);
        let m1 = a.identify(Message::default());
        let m2 = a.identify(Message::default());
        assert_eq!(&m1.producer_id[..], a.id().as_bytes());
        assert_eq!((m1.sequence, m2.sequence), (Some(0), Some(1)));
        assert!(m1.properties.is_empty());
        // A resend keeps its identity; so does a message with its own client id.
        assert_eq!(a.identify(m1.clone()), m1);
        assert_eq!(b.identify(m1.clone()), m1);
        let mut own = Message::default();
        own.properties.insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(a.identify(own.clone()), own);
        let mut own = Message::default();
        own.properties
            .insert(PRODUCER_ID_PROPERTY.into(), "mine".into());
        own.properties.insert(SEQUENCE_PROPERTY.into(), "7".into());
        assert_eq!(a.identify(own.clone()), own);
    }
}
