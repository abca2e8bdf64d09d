//! The identity of a send: which reserved properties name it, the dedup key apply derives
//! from them, and the leader's check that a message's identity is well formed.

use crate::error::Result;
use crate::error::StoreError;
use crate::message::Message;
use crate::message::Properties;
use crate::message::SendIdentity;

/// Property holding the producer id of an idempotent send: 1..=[`MAX_PRODUCER_ID_BYTES`] bytes
/// of `[A-Za-z0-9._:-]`, unique per producer (e.g. 128 random bits in hex). Any client may set
/// it; a [`SendIdentity`] (the fields `raftmq_client` sends) is recorded as it too.
pub const PRODUCER_ID_PROPERTY: &str = "RAFTMQ_PRODUCER_ID";
/// Property holding the sequence number of an idempotent send within its producer: a decimal
/// `u64`. A resend of the same message carries the same producer id and sequence.
pub const SEQUENCE_PROPERTY: &str = "RAFTMQ_SEQUENCE";
/// The client message id RocketMQ clients send with every message (`UNIQ_KEY`); used as the
/// identity of a message without a producer id.
pub const CLIENT_MESSAGE_ID_PROPERTY: &str = "UNIQ_KEY";
/// Longest producer id.
pub const MAX_PRODUCER_ID_BYTES: usize = 128;

/// The properties a message's identity is read from.
fn parts<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<(char, &'a str, &'a str)> {
    match (get(PRODUCER_ID_PROPERTY), get(SEQUENCE_PROPERTY)) {
        (Some(p), Some(s)) => Some(('p', p, s)),
        _ => get(CLIENT_MESSAGE_ID_PROPERTY)
            .filter(|id| !id.is_empty())
            .map(|id| ('u', "", id)),
    }
}

/// The dedup key of a message of `topic` with `properties` (sorted by name, as records hold
/// them), if it carries an identity: producer id and sequence, else the client message id.
/// The key names the topic too (a message id reused on another topic is another message) and
/// is unambiguous (lengths prefix the variable parts).
pub fn dedup_key(topic: &str, properties: &[(&str, &str)]) -> Option<String> {
    let mut key = String::new();
    Identity::of(properties)?.write_key(&mut key, topic);
    Some(key)
}

/// A record's identity, read once from its properties: apply checks for one before it
/// expires the window, then builds the key in place in the window's keys.
#[derive(Clone, Copy, Debug)]
pub struct Identity<'a> {
    kind: char,
    producer: &'a str,
    id: &'a str,
}

impl<'a> Identity<'a> {
    /// The identity in `properties` (sorted by name, as records hold them), if any.
    pub fn of(properties: &'a [(&'a str, &'a str)]) -> Option<Self> {
        let (kind, producer, id) = parts(sorted_get(properties))?;
        Some(Identity { kind, producer, id })
    }

    /// The identity in a record's properties, if any.
    pub fn of_record(properties: &Properties<'a>) -> Option<Self> {
        let (kind, producer, id) = parts(|name| properties.get(name))?;
        Some(Identity { kind, producer, id })
    }

    /// True for a producer id and sequence (the dedup window indexes those by producer),
    /// false for a client message id.
    pub fn is_sequence(&self) -> bool {
        self.kind == 'p'
    }

    /// The length of [`write_key`](Self::write_key)'s key up to the sequence and the
    /// sequence, for a producer's send whose sequence is a canonical decimal `u64` (what
    /// the window's `sequence_of` reads back from the key, without the parse of its lengths).
    pub(crate) fn sequence(&self, topic: &str) -> Option<(usize, u64)> {
        if self.kind != 'p' {
            return None;
        }
        let seq = canonical_u64(self.id)?;
        let counted = |len: usize| decimal_len(len as u64) + 1 + len;
        Some((1 + counted(topic.len()) + counted(self.producer.len()), seq))
    }

    /// Appends [`dedup_key`]'s key for a message of `topic`:
    /// `{kind}{topic.len()}:{topic}{producer.len()}:{producer}{id}`, built without the
    /// formatting machinery (apply derives one per identified message on every node).
    pub fn write_key(&self, out: &mut String, topic: &str) {
        out.reserve(1 + 2 * 20 + 2 + topic.len() + self.producer.len() + self.id.len());
        out.push(self.kind);
        push_decimal(out, topic.len());
        out.push(':');
        out.push_str(topic);
        push_decimal(out, self.producer.len());
        out.push(':');
        out.push_str(self.producer);
        out.push_str(self.id);
    }
}

/// A lookup by name in properties sorted by name.
fn sorted_get<'a>(properties: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
    |name| {
        properties
            .binary_search_by(|(k, _)| (*k).cmp(name))
            .ok()
            .map(|i| properties[i].1)
    }
}

/// Appends `n` in decimal, one byte at a time. Not `push_str(decimal(..))`: that copy loads
/// the digits just stored one by one with one wider load, which the CPU cannot forward from
/// its store buffer, so it waits until every older store has reached the cache, among them
/// apply's stores to lines of the dedup window's buffers that are not cached yet (this copy
/// of one or two bytes was 5% of a follower's CPU at batch-32).
fn push_decimal(out: &mut String, n: usize) {
    let mut digits = [0; 20];
    let at = write_digits(n as u64, &mut digits);
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// The number of digits of `n` in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// `n` in decimal, written into the end of `digits`.
pub(crate) fn decimal(n: u64, digits: &mut [u8; 20]) -> &str {
    let at = write_digits(n, digits);
    // ASCII digits: always UTF-8.
    std::str::from_utf8(&digits[at..]).unwrap_or_default()
}

/// Writes `n`'s decimal digits into the end of `digits`; returns where they start.
fn write_digits(n: u64, digits: &mut [u8; 20]) -> usize {
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return at;
        }
    }
}

impl SendIdentity {
    /// The bytes of the two properties this identity is recorded as (names and values), as
    /// `max-properties-total-bytes` counts them.
    pub(crate) fn properties_len(&self) -> usize {
        // The length of the sequence's decimal text, not the text: this runs once a message
        // per `encoded_len`, before the record is written.
        let digits = decimal_len(self.sequence);
        PRODUCER_ID_PROPERTY.len() + SEQUENCE_PROPERTY.len() + self.producer.len() + digits
    }

    /// The two properties the record holds this identity as, in name order (the producer
    /// id's name sorts first); `digits` holds the sequence's text. Fails if the producer id
    /// is not UTF-8 (the leader's [`check_identity`] allows only ASCII).
    pub(crate) fn as_properties<'a>(
        &'a self,
        digits: &'a mut [u8; 20],
    ) -> Result<[(&'static str, &'a str); 2]> {
        let producer = std::str::from_utf8(&self.producer).map_err(|_| {
            StoreError::invalid(format!("producer id {:?} is not UTF-8", self.producer))
        })?;
        Ok([
            (PRODUCER_ID_PROPERTY, producer),
            (SEQUENCE_PROPERTY, decimal(self.sequence, digits)),
        ])
    }
}

/// `s` as a `u64` if it is one in canonical decimal: digits only, no sign, no leading zero.
/// One pass, no UTF-8 check (apply reads one per identified message on every node).
pub(crate) fn canonical_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    b.iter().try_fold(0u64, |n, &d| {
        let digit = d.wrapping_sub(b'0');
        (digit < 10).then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// True if `m` carries an identity (as fields, or in its properties).
pub fn has_identity(m: &Message) -> bool {
    m.identity.is_some() || parts(|name| m.properties.get(name).map(String::as_str)).is_some()
}

/// The leader's check of a message's identity (before proposing): a producer id comes with a
/// sequence and vice versa, the id is 1..=128 bytes of `[A-Za-z0-9._:-]`, the sequence a
/// decimal `u64`; given as fields, the properties do not name one too.
pub fn check_identity(m: &Message) -> Result<()> {
    let producer = m.properties.get(PRODUCER_ID_PROPERTY);
    let seq = m.properties.get(SEQUENCE_PROPERTY);
    if let Some(id) = &m.identity {
        if producer.is_some() || seq.is_some() {
            return Err(StoreError::invalid(format!(
                "the identity is given twice: as the producer id and sequence fields, and as \
                 property {}",
                if producer.is_some() {
                    PRODUCER_ID_PROPERTY
                } else {
                    SEQUENCE_PROPERTY
                }
            )));
        }
        return check_producer_id(&id.producer, "the producer id");
    }
    match (producer, seq) {
        (None, None) => Ok(()),
        (Some(_), None) | (None, Some(_)) => Err(StoreError::invalid(format!(
            "properties {PRODUCER_ID_PROPERTY} and {SEQUENCE_PROPERTY} go together; only one \
             is set"
        ))),
        (Some(p), Some(s)) => {
            check_producer_id(p.as_bytes(), PRODUCER_ID_PROPERTY)?;
            if canonical_u64(s).is_none() {
                return Err(StoreError::invalid(format!(
                    "{SEQUENCE_PROPERTY} {s:?} is not a decimal u64 (digits only, no leading \
                     zero)"
                )));
            }
            Ok(())
        }
    }
}

/// The bytes a producer id may hold, `[A-Za-z0-9._:-]`, as a table: the leader checks every
/// identified message's id, one lookup a byte.
const PRODUCER_ID_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-');
        b += 1;
    }
    t
};

/// A producer id is 1..=[`MAX_PRODUCER_ID_BYTES`] bytes of `[A-Za-z0-9._:-]`; `what` names it
/// in the error.
fn check_producer_id(p: &[u8], what: &str) -> Result<()> {
    let ok_byte = |b: &u8| PRODUCER_ID_BYTES[usize::from(*b)];
    if p.is_empty() || p.len() > MAX_PRODUCER_ID_BYTES || !p.iter().all(ok_byte) {
        let shown = String::from_utf8_lossy(&p[..p.len().min(MAX_PRODUCER_ID_BYTES + 8)]);
        return Err(StoreError::invalid(format!(
            "{what} {shown:?} must be 1..={MAX_PRODUCER_ID_BYTES} bytes of [A-Za-z0-9._:-] \
             ({} bytes)",
            p.len()
        )));
    }
    Ok(())
}
