//! RocketMQ messages to and from store messages.
//!
//! The client's message id, the message group and the trace context live in the stored
//! message's properties under RocketMQ's own system property names, so a message sent through
//! either protocol reads back the same through both. User properties may not use those names.
//!
//! A delivery timestamp (message type DELAY, or a normal one that carries it, as RocketMQ's
//! proxy accepts) is stored as [`DELIVER_MS_PROPERTY`] in ms since the epoch; RocketMQ
//! consumers get the message at that time (the pop apply parks it until then), while
//! raftmq's own pull API (`raftmq consume`) sees it at once.

use std::collections::BTreeMap;
use std::time::Duration;

use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_store::limits::quote;
use raftmq_store::message::Message;
pub use raftmq_store::receive::delay::DELIVER_MS_PROPERTY;
use raftmq_store::types::QueueId;
use rmq::Code;

use super::status;
use crate::pipeline::queues::now_ms;
use crate::pipeline::queues::SHARDING_KEY_PROPERTY;

/// The client's message id (RocketMQ `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`).
pub const MESSAGE_ID_PROPERTY: &str = "UNIQ_KEY";
/// The producer's trace context.
pub const TRACE_CONTEXT_PROPERTY: &str = "TRACE_CONTEXT";
/// Longest client message id accepted.
pub const MAX_MESSAGE_ID_LEN: usize = 128;
/// Latest delivery time accepted, from now (RocketMQ's proxy default `maxDelayTimeMills`);
/// later is ILLEGAL_DELIVERY_TIME.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

/// Property names user properties may not use (RocketMQ system properties we store or may
/// store later).
const RESERVED: [&str; 8] = [
    MESSAGE_ID_PROPERTY,
    SHARDING_KEY_PROPERTY,
    TRACE_CONTEXT_PROPERTY,
    DELIVER_MS_PROPERTY,
    "TRAN_MSG",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
];

/// A message to store, the queue its producer chose, and its client message id.
#[derive(Debug)]
pub struct Incoming {
    /// The store message (queue and store time are filled in by the pipeline).
    pub message: Message,
    /// The queue the producer picked from its route.
    pub queue: Option<QueueId>,
    /// The client's message id (answered back in the send result).
    pub message_id: String,
}

fn bad(code: Code, message: String) -> rmq::Status {
    status::status(code, message)
}

/// Milliseconds since the epoch of a protobuf timestamp (0 for none or a negative one;
/// saturating, as the client's fields are any `i64`/`i32`).
pub fn timestamp_ms(t: Option<&prost_types::Timestamp>) -> u64 {
    t.map_or(0, |t| {
        let ms = t
            .seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(t.nanos / 1_000_000));
        u64::try_from(ms).unwrap_or(0)
    })
}

/// A protobuf timestamp of milliseconds since the epoch.
pub fn timestamp(ms: u64) -> prost_types::Timestamp {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    prost_types::Timestamp {
        seconds: ms / 1000,
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

/// Checks the message type against the delivery timestamp and returns the delivery time
/// (ms since the epoch) to store, if any. DELAY needs a timestamp; NORMAL or unspecified may
/// carry one; FIFO may not; transactional messages are not supported. A time at or before
/// `now_ms` is kept (delivered at once); one past `now_ms + MAX_DELAY` is refused.
fn delivery_ms(
    sys: &rmq::SystemProperties,
    id: &str,
    now_ms: u64,
) -> Result<Option<u64>, rmq::Status> {
    let deliver = sys
        .delivery_timestamp
        .as_ref()
        .map(|t| timestamp_ms(Some(t)));
    let kind = rmq::MessageType::try_from(sys.message_type).unwrap_or_default();
    let refuse = |code, why: &str| Err(bad(code, format!("message {id}: {why}")));
    match (kind, deliver) {
        (rmq::MessageType::Transaction, _) => {
            return refuse(
                Code::Unsupported,
                "transactional messages are not supported by raftmq yet",
            )
        }
        (rmq::MessageType::Delay, None) => {
            return refuse(
                Code::IllegalDeliveryTime,
                "a DELAY message needs a delivery_timestamp",
            )
        }
        (rmq::MessageType::Fifo, Some(_)) => {
            return refuse(
                Code::IllegalDeliveryTime,
                "a FIFO message cannot have a delivery_timestamp",
            )
        }
        (rmq::MessageType::Fifo, None)
            if sys.message_group.as_deref().is_none_or(str::is_empty) =>
        {
            return refuse(
                Code::IllegalMessageGroup,
                "a FIFO message needs a message group",
            )
        }
        _ => {}
    }
    let max_ms = u64::try_from(MAX_DELAY.as_millis()).unwrap_or(u64::MAX);
    match deliver {
        Some(at) if at > now_ms.saturating_add(max_ms) => refuse(
            Code::IllegalDeliveryTime,
            &format!(
                "delivery time {at} (ms since the epoch) is {} ms from now, over the maximum \
                 delay of {} h",
                at - now_ms,
                MAX_DELAY.as_secs() / 3600
            ),
        ),
        d => Ok(d),
    }
}

/// Converts one message of a SendMessage request, checking what the store's limits do not:
/// message id, message type, delivery time, reserved property names and the body size
/// (`max_body`). The delivery time is checked against this node's clock.
pub fn incoming(m: rmq::Message, max_body: usize) -> Result<Incoming, rmq::Status> {
    incoming_at(m, max_body, now_ms())
}

/// Checks one message as [`incoming`] does, without converting it (a follower answers a bad
/// message before forwarding the request); returns the delivery time to store, if any.
pub fn check(m: &rmq::Message, max_body: usize, now_ms: u64) -> Result<Option<u64>, rmq::Status> {
    super::route::topic_name(m.topic.as_ref())?;
    let sys = m
        .system_properties
        .as_ref()
        .ok_or_else(|| status::bad_request("message has no system_properties"))?;
    let id = &sys.message_id;
    if id.is_empty() || id.len() > MAX_MESSAGE_ID_LEN || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(
            Code::IllegalMessageId,
            format!(
                "message id {} must be 1..={MAX_MESSAGE_ID_LEN} printable ASCII characters",
                quote(id)
            ),
        ));
    }
    if m.body.len() > max_body {
        return Err(bad(
            Code::MessageBodyTooLarge,
            format!(
                "message {id}: body of {} bytes is over max-message-bytes {max_body}",
                m.body.len()
            ),
        ));
    }
    if let Some(k) = m
        .user_properties
        .keys()
        .find(|k| RESERVED.contains(&k.as_str()))
    {
        return Err(bad(
            Code::IllegalMessagePropertyKey,
            format!("message {id}: property name {} is reserved", quote(k)),
        ));
    }
    delivery_ms(sys, id, now_ms)
}

/// [`incoming`] with the clock given: `now_ms` (ms since the epoch) bounds the delivery
/// time to `now_ms + MAX_DELAY`.
pub fn incoming_at(m: rmq::Message, max_body: usize, now_ms: u64) -> Result<Incoming, rmq::Status> {
    let deliver_ms = check(&m, max_body, now_ms)?;
    let topic = super::route::topic_name(m.topic.as_ref())?.to_string();
    let sys = m
        .system_properties
        .ok_or_else(|| status::bad_request("message has no system_properties"))?;
    let id = sys.message_id.clone();
    let mut properties: BTreeMap<String, String> = m.user_properties.into_iter().collect();
    properties.insert(MESSAGE_ID_PROPERTY.to_string(), id.clone());
    if let Some(g) = sys.message_group.filter(|g| !g.is_empty()) {
        properties.insert(SHARDING_KEY_PROPERTY.to_string(), g);
    }
    if let Some(t) = sys.trace_context.filter(|t| !t.is_empty()) {
        properties.insert(TRACE_CONTEXT_PROPERTY.to_string(), t);
    }
    if let Some(at) = deliver_ms {
        properties.insert(DELIVER_MS_PROPERTY.to_string(), at.to_string());
    }
    let queue = u32::try_from(sys.queue_id).ok().map(QueueId::new);
    let message = Message {
        topic,
        queue_id: QueueId::new(0),
        flags: 0,
        born_timestamp_ms: timestamp_ms(sys.born_timestamp.as_ref()),
        store_timestamp_ms: 0,
        born_host: sys.born_host,
        tags: sys.tag.unwrap_or_default(),
        keys: sys.keys,
        properties,
        body: m.body,
        identity: None,
    };
    Ok(Incoming {
        message,
        queue,
        message_id: id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str) -> rmq::Message {
        rmq::Message {
            topic: Some(rmq::Resource {
                resource_namespace: String::new(),
                name: "orders".into(),
            }),
            user_properties: [("color".to_string(), "red".to_string())].into(),
            system_properties: Some(rmq::SystemProperties {
                tag: Some("tagA".into()),
                keys: vec!["k1".into()],
                message_id: id.into(),
                born_host: "host-1".into(),
                born_timestamp: Some(timestamp(1_700_000_000_123)),
                queue_id: 2,
                message_type: rmq::MessageType::Normal as i32,
                ..Default::default()
            }),
            body: b"hello".to_vec().into(),
        }
    }

    #[test]
    fn a_normal_message_keeps_everything() {
        let i = incoming(msg("01ABCDEF"), 1024).unwrap();
        assert_eq!(i.message_id, "01ABCDEF");
        assert_eq!(i.queue, Some(QueueId::new(2)));
        let m = i.message;
        assert_eq!(m.topic, "orders");
        assert_eq!(m.tags, "tagA");
        assert_eq!(m.keys, vec!["k1"]);
        assert_eq!(m.born_timestamp_ms, 1_700_000_000_123);
        assert_eq!(m.properties["color"], "red");
        assert_eq!(m.properties[MESSAGE_ID_PROPERTY], "01ABCDEF");
        assert_eq!(m.body, &b"hello"[..]);
    }

    #[test]
    fn bad_messages_get_precise_codes() {
        let code = |m: rmq::Message, max: usize| incoming(m, max).unwrap_err().code;
        assert_eq!(code(msg(""), 1024), Code::IllegalMessageId as i32);
        assert_eq!(code(msg("a b"), 1024), Code::IllegalMessageId as i32);
        assert_eq!(code(msg("id"), 4), Code::MessageBodyTooLarge as i32);
        let mut m = msg("id");
        m.user_properties.insert("UNIQ_KEY".into(), "x".into());
        assert_eq!(code(m, 1024), Code::IllegalMessagePropertyKey as i32);
        let mut m = msg("id");
        m.system_properties.as_mut().unwrap().message_type = rmq::MessageType::Fifo as i32;
        assert_eq!(code(m, 1024), Code::IllegalMessageGroup as i32);
        let mut m = msg("id");
        m.system_properties.as_mut().unwrap().message_type = rmq::MessageType::Transaction as i32;
        assert_eq!(code(m, 1024), Code::Unsupported as i32);
        let mut m = msg("id");
        m.system_properties = None;
        assert_eq!(code(m, 1024), Code::BadRequest as i32);
        let mut m = msg("id");
        m.topic = None;
        assert_eq!(code(m, 1024), Code::IllegalTopic as i32);
    }

    #[test]
    fn fifo_group_becomes_the_sharding_key() {
        let mut m = msg("id");
        let sys = m.system_properties.as_mut().unwrap();
        sys.message_type = rmq::MessageType::Fifo as i32;
        sys.message_group = Some("g1".into());
        let i = incoming(m, 1024).unwrap();
        assert_eq!(i.message.properties[SHARDING_KEY_PROPERTY], "g1");
    }

    const NOW: u64 = 1_700_000_000_000;

    fn with_delivery(kind: rmq::MessageType, at_ms: Option<u64>) -> rmq::Message {
        let mut m = msg("id");
        let sys = m.system_properties.as_mut().unwrap();
        sys.message_type = kind as i32;
        sys.delivery_timestamp = at_ms.map(timestamp);
        m
    }

    #[test]
    fn delayed_messages_store_their_delivery_time() {
        let at = NOW + 3_000;
        for kind in [
            rmq::MessageType::Delay,
            rmq::MessageType::Normal,
            rmq::MessageType::Unspecified,
        ] {
            let i = incoming_at(with_delivery(kind, Some(at)), 1024, NOW).unwrap();
            assert_eq!(
                i.message.properties[DELIVER_MS_PROPERTY],
                at.to_string(),
                "{kind:?}"
            );
        }
        // In the past, or exactly the maximum: accepted (the past one is delivered at once).
        let max = u64::try_from(MAX_DELAY.as_millis()).unwrap();
        for at in [NOW - 60_000, NOW, NOW + max] {
            let i = incoming_at(with_delivery(rmq::MessageType::Delay, Some(at)), 1024, NOW);
            assert_eq!(
                i.unwrap().message.properties[DELIVER_MS_PROPERTY],
                at.to_string()
            );
        }
        let plain = incoming_at(msg("id"), 1024, NOW).unwrap();
        assert!(!plain.message.properties.contains_key(DELIVER_MS_PROPERTY));
    }

    #[test]
    fn bad_delivery_times_get_precise_codes() {
        let code = |m: rmq::Message| incoming_at(m, 1024, NOW).unwrap_err();
        let max = u64::try_from(MAX_DELAY.as_millis()).unwrap();
        let far = code(with_delivery(rmq::MessageType::Delay, Some(NOW + max + 1)));
        assert_eq!(far.code, Code::IllegalDeliveryTime as i32);
        assert!(far.message.contains("maximum delay"), "{}", far.message);
        let none = code(with_delivery(rmq::MessageType::Delay, None));
        assert_eq!(none.code, Code::IllegalDeliveryTime as i32);
        let mut fifo = with_delivery(rmq::MessageType::Fifo, Some(NOW + 1000));
        fifo.system_properties.as_mut().unwrap().message_group = Some("g".into());
        assert_eq!(code(fifo).code, Code::IllegalDeliveryTime as i32);
        let tx = with_delivery(rmq::MessageType::Transaction, Some(NOW + 1000));
        assert_eq!(code(tx).code, Code::Unsupported as i32);
        let mut m = msg("id");
        m.user_properties
            .insert(DELIVER_MS_PROPERTY.into(), NOW.to_string());
        assert_eq!(code(m).code, Code::IllegalMessagePropertyKey as i32);
    }

    #[test]
    fn extreme_timestamps_saturate_instead_of_overflowing() {
        let at = |seconds, nanos| timestamp_ms(Some(&prost_types::Timestamp { seconds, nanos }));
        assert_eq!(at(i64::MAX, 999_999_999), i64::MAX as u64);
        assert_eq!(at(i64::MIN, -999_999_999), 0);
        let mut m = msg("01ABCDEF");
        let sys = m.system_properties.as_mut().expect("set");
        sys.message_type = rmq::MessageType::Delay as i32;
        sys.delivery_timestamp = Some(prost_types::Timestamp {
            seconds: i64::MAX,
            nanos: 999_999_999,
        });
        let e = incoming_at(m, 1024, 1_700_000_000_000).expect_err("too far away");
        assert_eq!(e.code, Code::IllegalDeliveryTime as i32);
    }
}
