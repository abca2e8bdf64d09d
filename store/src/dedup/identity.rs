//! The identity of a send: which reserved properties name it, the dedup key apply derives
//! from them, and the leader's check that a message's identity is well formed.

use crate::error::Result;
use crate::error::StoreError;

/// Property holding the producer id of an idempotent send (set by `raftmq_client`; any
/// client may set it): 1..=[`MAX_PRODUCER_ID_BYTES`] bytes of `[A-Za-z0-9._:-]`, unique per
/// producer (e.g. 128 random bits in hex).
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
    let get = |name: &str| {
        properties
            .binary_search_by(|(k, _)| (*k).cmp(name))
            .ok()
            .map(|i| properties[i].1)
    };
    let (kind, producer, id) = parts(get)?;
    Some(format!(
        "{kind}{}:{topic}{}:{producer}{id}",
        topic.len(),
        producer.len()
    ))
}

/// True if a message with these properties carries an identity.
pub fn has_identity(properties: &std::collections::BTreeMap<String, String>) -> bool {
    parts(|name| properties.get(name).map(String::as_str)).is_some()
}

/// The leader's check of a message's identity properties (before proposing): a producer id
/// comes with a sequence and vice versa, the id is 1..=128 bytes of `[A-Za-z0-9._:-]`, the
/// sequence a decimal `u64`.
pub fn check_identity(properties: &std::collections::BTreeMap<String, String>) -> Result<()> {
    let producer = properties.get(PRODUCER_ID_PROPERTY);
    let seq = properties.get(SEQUENCE_PROPERTY);
    match (producer, seq) {
        (None, None) => Ok(()),
        (Some(_), None) | (None, Some(_)) => Err(StoreError::invalid(format!(
            "properties {PRODUCER_ID_PROPERTY} and {SEQUENCE_PROPERTY} go together; only one \
             is set"
        ))),
        (Some(p), Some(s)) => {
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "._:-".contains(c);
            if p.is_empty() || p.len() > MAX_PRODUCER_ID_BYTES || !p.chars().all(ok_char) {
                return Err(StoreError::invalid(format!(
                    "{PRODUCER_ID_PROPERTY} {p:?} must be 1..={MAX_PRODUCER_ID_BYTES} bytes of \
                     [A-Za-z0-9._:-]"
                )));
            }
            if s.parse::<u64>().map(|n| n.to_string()).as_ref() != Ok(s) {
                return Err(StoreError::invalid(format!(
                    "{SEQUENCE_PROPERTY} {s:?} is not a decimal u64 (digits only, no leading \
                     zero)"
                )));
            }
            Ok(())
        }
    }
}
