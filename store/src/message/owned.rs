//! [`Message`]: one message in its owned form (the record bytes are in [`super::format`]).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::dedup::PRODUCER_ID_PROPERTY;
use crate::dedup::SEQUENCE_PROPERTY;
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
    /// An idempotent send's identity given as fields rather than as the two reserved
    /// properties (`raftmq_client` does so: no map entries and no decimal string per message).
    /// The record holds it as those properties (the same bytes either way), so a message read
    /// back has it in `properties` and `None` here.
    pub identity: Option<SendIdentity>,
}

/// A producer id and sequence number: [`crate::dedup::PRODUCER_ID_PROPERTY`] and
/// [`crate::dedup::SEQUENCE_PROPERTY`] as fields. The producer id is checked before it is
/// proposed (1..=128 bytes of `[A-Za-z0-9._:-]`, so ASCII).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendIdentity {
    /// The producer id (a `Bytes`: a client shares it between its messages, the leader takes
    /// it out of the request frame).
    pub producer: Bytes,
    /// The message's sequence number within its producer.
    pub sequence: u64,
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

    /// The message as its record reads back: the identity fields moved into the two
    /// properties the record holds them as (a producer id that is not UTF-8 is replaced
    /// lossily; the leader refuses one before it is stored).
    pub fn identity_in_properties(mut self) -> Self {
        if let Some(id) = self.identity.take() {
            let producer = String::from_utf8_lossy(&id.producer).into_owned();
            let sequence = id.sequence.to_string();
            self.properties
                .insert(PRODUCER_ID_PROPERTY.to_owned(), producer);
            self.properties
                .insert(SEQUENCE_PROPERTY.to_owned(), sequence);
        }
        self
    }
}
