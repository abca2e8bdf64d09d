//! Delayed delivery: the message property that holds a message's delivery time, and how the
//! pop apply reads it (RocketMQ 5 `delivery_timestamp`, stored under RocketMQ's own name).
//!
//! Only pop consumption honours it: a `Receive` that meets a message whose delivery time is
//! later than the command's `now_ms` parks it in flight with attempt 0 until that time
//! (see [`crate::sm::receive`]). raftmq's own pull API (`raftmq consume`, `Store::pull`) is
//! unchanged and sees a delayed message at once, like any other.

use crate::message::MessageView;
use crate::types::TimestampMs;

/// Property holding the delivery time in ms since the epoch, decimal (RocketMQ
/// `MessageConst.PROPERTY_TIMER_DELIVER_MS`). A value that does not parse as a `u64` means
/// no delay: the message is delivered at once.
pub const DELIVER_MS_PROPERTY: &str = "TIMER_DELIVER_MS";

/// The delivery time of a parsed record, if it carries a valid one.
pub fn deliver_ms(view: &MessageView<'_>) -> Option<TimestampMs> {
    view.properties.get(DELIVER_MS_PROPERTY)?.parse().ok()
}

/// The delivery time of `view` if it is later than `now_ms` (the message is not due yet).
pub fn not_due_until(view: &MessageView<'_>, now_ms: TimestampMs) -> Option<TimestampMs> {
    deliver_ms(view).filter(|at| *at > now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::format::encode;
    use crate::message::Message;
    use crate::types::QueueId;

    fn record(props: &[(&str, &str)]) -> Vec<u8> {
        let mut m = Message::new("t", QueueId::new(0), b"b".to_vec());
        for (k, v) in props {
            m.properties.insert((*k).to_owned(), (*v).to_owned());
        }
        encode(&m).expect("encode")
    }

    #[test]
    fn reads_the_delivery_time_among_other_properties() {
        let rec = record(&[("A", "1"), (DELIVER_MS_PROPERTY, "5000"), ("ZZ", "2")]);
        let v = MessageView::parse(&rec).expect("parse");
        assert_eq!(deliver_ms(&v), Some(5000));
        assert_eq!(not_due_until(&v, 4999), Some(5000));
        assert_eq!(not_due_until(&v, 5000), None, "due at its time");
        let rec = record(&[("A", "1")]);
        assert_eq!(deliver_ms(&MessageView::parse(&rec).expect("parse")), None);
        let rec = record(&[(DELIVER_MS_PROPERTY, "soon")]);
        let v = MessageView::parse(&rec).expect("parse");
        assert_eq!(not_due_until(&v, 0), None, "unparsable means at once");
    }
}
