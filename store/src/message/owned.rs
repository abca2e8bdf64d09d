//! [`Message`]: one message in its owned form (the record bytes are in [`super::format`]).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::types::QueueId;
use crate::types::TimestampMs;

/// One message as a producer sends it and a consumer receives it.
///
/// The store timestamp is assigned by the leader *before* the entry is proposed, so every replica
/// stores identical bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// Topic name.
    pub topic: String,
    /// Queue inside the topic.
    pub queue_id: QueueId,
    /// Opaque producer flags (RocketMQ `flag`).
    pub flags: u32,
    /// When the producer created the message.
    pub born_timestamp_ms: TimestampMs,
    /// When the leader accepted it.
    pub store_timestamp_ms: TimestampMs,
    /// `host:port` of the producer.
    pub born_host: String,
    /// Tag string (empty: no tag). Filtered by tag expressions.
    pub tags: String,
    /// Business keys, indexed in the IndexFile (order preserved).
    pub keys: Vec<String>,
    /// User properties; a `BTreeMap` so encoding is deterministic.
    pub properties: BTreeMap<String, String>,
    /// Payload (a `Bytes`: the leader takes it out of the request frame without a copy).
    pub body: Bytes,
}

impl Message {
    /// A message with only topic, queue and body set.
    pub fn new(topic: impl Into<String>, queue_id: QueueId, body: impl Into<Bytes>) -> Self {
        Message {
            topic: topic.into(),
            queue_id,
            body: body.into(),
            ..Message::default()
        }
    }
}
