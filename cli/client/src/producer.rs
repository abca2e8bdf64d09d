//! The identity of a producer's sends (exactly-once sends): one random producer id per
//! [`Client`](crate::Client) (its clones share it) and a sequence number per message, as the
//! reserved message properties the broker's dedup window reads. A message keeps the identity
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
    id: String,
    next_seq: AtomicU64,
}

impl Producer {
    /// A producer with a fresh random id (128 bits, hex).
    pub(crate) fn random() -> Self {
        Producer {
            id: random_id(),
            next_seq: AtomicU64::new(0),
        }
    }

    /// The producer id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// `m` with this producer's identity and the next sequence number, unless it already
    /// carries an identity (a producer id, or a client message id `UNIQ_KEY`), which it keeps.
    pub(crate) fn identify(&self, mut m: Message) -> Message {
        let has = |k: &str| m.properties.contains_key(k);
        if has(PRODUCER_ID_PROPERTY) || has(SEQUENCE_PROPERTY) || has("UNIQ_KEY") {
            return m;
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        m.properties
            .insert(PRODUCER_ID_PROPERTY.to_string(), self.id.clone());
        m.properties
            .insert(SEQUENCE_PROPERTY.to_string(), seq.to_string());
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
        assert_eq!(m1.properties[PRODUCER_ID_PROPERTY], a.id());
        assert_eq!(
            (
                &m1.properties[SEQUENCE_PROPERTY][..],
                &m2.properties[SEQUENCE_PROPERTY][..]
            ),
            ("0", "1")
        );
        // A resend keeps its identity; so does a message with its own client id.
        assert_eq!(a.identify(m1.clone()), m1);
        assert_eq!(b.identify(m1.clone()), m1);
        let mut own = Message::default();
        own.properties.insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(a.identify(own.clone()), own);
    }
}
