//! [`ReceiptHandle`]: where a popped message is and which delivery of it a client holds, and
//! its one wire form (what RocketMQ clients send back to ack or change invisibility).

use raftmq_store::hash::fnv1a64;
use raftmq_store::limits::quote;
use raftmq_store::limits::validate_topic_name;
use raftmq_store::types::LogIndex;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::types::TimestampMs;

use crate::error::NodeError;

/// Where a popped message is and which delivery of it a client holds. Its wire form
/// ([`ReceiptHandle::encode`]) is
/// `rmq1:<queue_id>:<queue_offset>:<handle>:<invisible_until_ms>:<topic>:<check>`: decimal
/// numbers, and `check` the FNV-1a 64 of everything before its `:` (16 lower-case hex
/// digits). Topic names cannot hold `:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiptHandle {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Queue offset of the message.
    pub queue_offset: QueueOffset,
    /// The store's receipt handle: log index of the entry that delivered the message or last
    /// moved its deadline.
    pub handle: LogIndex,
    /// Invisible until (leader clock, ms since the epoch).
    pub invisible_until_ms: TimestampMs,
}

impl ReceiptHandle {
    /// The wire form (see the type docs).
    pub fn encode(&self) -> String {
        let body = format!(
            "rmq1:{}:{}:{}:{}:{}",
            self.queue_id.get(),
            self.queue_offset.get(),
            self.handle.get(),
            self.invisible_until_ms,
            self.topic
        );
        let check = fnv1a64(body.as_bytes());
        format!("{body}:{check:016x}")
    }

    /// Parses a wire form; anything else is [`NodeError::InvalidReceiptHandle`] saying what
    /// is wrong (never a panic).
    pub fn decode(s: &str) -> Result<ReceiptHandle, NodeError> {
        let bad = |why: &str| NodeError::InvalidReceiptHandle(format!("{}: {why}", quote(s)));
        let (body, check) = s.rsplit_once(':').ok_or_else(|| bad("no check digits"))?;
        if check != format!("{:016x}", fnv1a64(body.as_bytes())) {
            return Err(bad("check digits do not match (changed or truncated)"));
        }
        let parts: Vec<&str> = body.split(':').collect();
        let ["rmq1", q, o, h, until, topic] = parts[..] else {
            return Err(bad("expected rmq1 and 5 ':'-separated fields"));
        };
        let num = |v: &str, what: &str| {
            v.parse::<u64>()
                .map_err(|_| bad(&format!("{what} {} is not a number", quote(v))))
        };
        let queue_id = u32::try_from(num(q, "queue id")?).map_err(|_| bad("queue id too big"))?;
        validate_topic_name(topic).map_err(|e| bad(&e.to_string()))?;
        Ok(ReceiptHandle {
            topic: topic.to_owned(),
            queue_id: QueueId::new(queue_id),
            queue_offset: QueueOffset::new(num(o, "queue offset")?),
            handle: LogIndex::new(num(h, "handle")?),
            invisible_until_ms: num(until, "deadline")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> ReceiptHandle {
        ReceiptHandle {
            topic: "orders".into(),
            queue_id: QueueId::new(3),
            queue_offset: QueueOffset::new(12),
            handle: LogIndex::new(99),
            invisible_until_ms: 1_700_000_000_000,
        }
    }

    /// `body` with its check digits.
    fn sealed(body: &str) -> String {
        format!("{body}:{:016x}", fnv1a64(body.as_bytes()))
    }

    #[test]
    fn receipt_handle_round_trip() {
        let h = handle();
        let s = h.encode();
        assert_eq!(s, sealed("rmq1:3:12:99:1700000000000:orders"));
        assert_eq!(ReceiptHandle::decode(&s).expect("decode"), h);
    }

    #[test]
    fn bad_receipt_handles_are_clear_errors() {
        let good = handle().encode();
        let flipped = good.replacen(":12:", ":13:", 1);
        let cases = [
            (String::new(), "no check digits"),
            (flipped, "check digits"),
            (good[..good.len() - 1].to_owned(), "check digits"),
            (sealed("rmq1:1:2"), "5 ':'-separated"),
            (sealed("xyz1:1:2:3:4:t"), "expected rmq1"),
            (sealed("rmq1:x:2:3:4:t"), "queue id 'x'"),
            (sealed("rmq1:99999999999:2:3:4:t"), "queue id too big"),
            (sealed("rmq1:1:2:3:-4:t"), "deadline '-4'"),
            (sealed("rmq1:1:2:3:4:a b"), "topic name"),
        ];
        for (s, why) in cases {
            let e = ReceiptHandle::decode(&s).expect_err(&s);
            assert!(
                matches!(e, NodeError::InvalidReceiptHandle(_)),
                "{s}: {e:?}"
            );
            assert!(e.to_string().contains(why), "{s}: {e}");
        }
        for cut in 0..good.len() {
            assert!(ReceiptHandle::decode(&good[..cut]).is_err(), "cut {cut}");
        }
        for s in ["rmq1::::::", ":", "::::::::", "rmq1:1:2:3:4:5:\u{0}"] {
            assert!(ReceiptHandle::decode(s).is_err(), "{s}");
        }
    }
}
