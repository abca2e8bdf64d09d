//! Sends whose messages are shared, not copied, between a client's attempts.
//!
//! A client keeps every message it sends until the answer comes, to resend it after a
//! failover. With the generated types each attempt took a deep copy (topic, tags, keys, born
//! host and the properties map: about eight allocations per message, a quarter of `raftmq
//! bench`'s CPU at batches of 32). [`Shared`] puts a message behind an `Arc` and encodes
//! exactly as the message itself does, so the bytes on the wire are unchanged;
//! [`CallClient`](crate::call_client::CallClient) sends `SendBatch` and `SendStream` requests
//! of that kind. It writes each message's byte strings (body, producer id) with one
//! `put_slice` rather than prost's `put` of a clone: that clone and its drop were two atomic
//! operations per message, the drop waiting for the body's copy to leave the store buffer
//! (`release_shared`, 7% of `raftmq bench`'s samples at batches of 32).

use std::sync::Arc;

use prost::bytes::Buf;
use prost::bytes::BufMut;
use prost::encoding;
use prost::encoding::DecodeContext;
use prost::encoding::WireType;
use prost::DecodeError;

use crate::v1::Message;
use crate::v1::SendBatchRequest;

/// A prost message behind an `Arc`: cloning shares it, encoding writes `T`'s bytes
/// ([`SliceEncode`]).
///
/// Decoding into it copies `T` first if it is shared (`Arc::make_mut`); clients only encode.
#[derive(Debug, Default, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Shares `value`.
    pub fn new(value: T) -> Self {
        Shared(Arc::new(value))
    }

    /// The message.
    pub fn get(&self) -> &T {
        &self.0
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> prost::Message for Shared<T>
where
    T: prost::Message + Clone + Default + SliceEncode,
{
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.0.encode_slices(buf)
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        Arc::make_mut(&mut self.0).merge_field(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }

    fn clear(&mut self) {
        Arc::make_mut(&mut self.0).clear()
    }
}

/// prost's encoding of a message, the same bytes, with its byte strings written from slices.
pub trait SliceEncode {
    /// Writes what `prost::Message::encode_raw` writes.
    fn encode_slices(&self, buf: &mut impl BufMut);
}

/// A `bytes` field as prost writes it (absent when empty), from a slice.
fn bytes_field(tag: u32, value: &[u8], buf: &mut impl BufMut) {
    if !value.is_empty() {
        encoding::encode_key(tag, WireType::LengthDelimited, buf);
        encoding::encode_varint(value.len() as u64, buf);
        buf.put_slice(value);
    }
}

impl SliceEncode for Message {
    fn encode_slices(&self, buf: &mut impl BufMut) {
        // Field by field in tag order, as prost's derive writes them (the tests compare).
        let Message {
            topic,
            queue_id,
            tags,
            keys,
            properties,
            body,
            born_timestamp_ms,
            born_host,
            producer_id,
            sequence,
        } = self;
        if !topic.is_empty() {
            encoding::string::encode(1, topic, buf);
        }
        if let Some(queue_id) = queue_id {
            encoding::int32::encode(2, queue_id, buf);
        }
        if !tags.is_empty() {
            encoding::string::encode(3, tags, buf);
        }
        encoding::string::encode_repeated(4, keys, buf);
        encoding::btree_map::encode(
            encoding::string::encode,
            encoding::string::encoded_len,
            encoding::string::encode,
            encoding::string::encoded_len,
            5,
            properties,
            buf,
        );
        bytes_field(6, body, buf);
        if *born_timestamp_ms != 0 {
            encoding::uint64::encode(7, born_timestamp_ms, buf);
        }
        if !born_host.is_empty() {
            encoding::string::encode(8, born_host, buf);
        }
        bytes_field(9, producer_id, buf);
        if let Some(sequence) = sequence {
            encoding::uint64::encode(10, sequence, buf);
        }
    }
}

impl SliceEncode for SendBatchRequest {
    fn encode_slices(&self, buf: &mut impl BufMut) {
        for m in &self.messages {
            encoding::encode_key(1, WireType::LengthDelimited, buf);
            encoding::encode_varint(prost::Message::encoded_len(m) as u64, buf);
            m.encode_slices(buf);
        }
    }
}

/// `raftmq.v1.SendStreamRequest` with a shared message (same fields, same tags).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SharedSendStreamRequest {
    /// Chosen by the client to match the answer; unique among its unanswered requests.
    #[prost(uint64, tag = "1")]
    pub seq: u64,
    /// One message.
    #[prost(message, optional, tag = "2")]
    pub message: Option<Shared<Message>>,
    /// Or several, as one entry.
    #[prost(message, optional, tag = "3")]
    pub batch: Option<Shared<SendBatchRequest>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::SendStreamRequest;
    use prost::Message as _;

    fn message(i: u8) -> Message {
        let mut m = Message {
            topic: "t".into(),
            tags: "a".into(),
            keys: vec!["k1".into(), "k2".into()],
            body: vec![i; 100].into(),
            ..Message::default()
        };
        m.properties.insert("RAFTMQ_SEQUENCE".into(), i.to_string());
        m
    }

    #[test]
    fn shared_requests_encode_as_the_generated_ones() {
        let batch = SendBatchRequest {
            messages: vec![message(1), message(2)],
        };
        let shared = Shared::new(batch.clone());
        assert_eq!(shared.encode_to_vec(), batch.encode_to_vec());
        assert_eq!(shared.encoded_len(), batch.encoded_len());
        assert_eq!(
            SendBatchRequest::decode(&shared.encode_to_vec()[..]).unwrap(),
            batch
        );

        let plain = SendStreamRequest {
            seq: 7,
            message: Some(message(3)),
            batch: None,
        };
        let item = SharedSendStreamRequest {
            seq: 7,
            message: Some(Shared::new(message(3))),
            batch: None,
        };
        assert_eq!(item.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(
            SendStreamRequest::decode(&item.encode_to_vec()[..]).unwrap(),
            plain
        );

        let plain = SendStreamRequest {
            seq: 8,
            message: None,
            batch: Some(batch),
        };
        let item = SharedSendStreamRequest {
            seq: 8,
            message: None,
            batch: Some(shared),
        };
        assert_eq!(item.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(
            SendStreamRequest::decode(&item.encode_to_vec()[..]).unwrap(),
            plain
        );
    }

    /// Every field, set and unset (an optional zero is still written), encodes as prost's
    /// derive does.
    #[test]
    fn slice_encoding_is_prost_s() {
        let full = |i: u8| Message {
            topic: "topic".into(),
            queue_id: Some(i32::from(i) - 1),
            tags: "t".repeat(usize::from(i)),
            keys: (0..i).map(|k| format!("k{k}")).collect(),
            properties: (0..i).map(|k| (format!("p{k}"), "v".repeat(200))).collect(),
            body: vec![i; 300 * usize::from(i)].into(),
            born_timestamp_ms: u64::from(i) << 40,
            born_host: "127.0.0.1:1".into(),
            producer_id: vec![b'p'; usize::from(i)].into(),
            sequence: Some(u64::from(i)),
        };
        let messages: Vec<Message> = (0..4).map(full).chain([Message::default()]).collect();
        for m in &messages {
            let mut ours = Vec::new();
            m.encode_slices(&mut ours);
            assert_eq!(ours, m.encode_to_vec(), "{m:?}");
        }
        let batch = SendBatchRequest { messages };
        let mut ours = Vec::new();
        batch.encode_slices(&mut ours);
        assert_eq!(ours, batch.encode_to_vec());
        assert_eq!(Shared::new(batch.clone()).encode_to_vec(), ours);
    }

    #[test]
    fn a_clone_shares_and_decoding_into_a_shared_message_copies_it_first() {
        let a = Shared::new(message(1));
        let mut b = a.clone();
        assert!(Arc::ptr_eq(&a.0, &b.0));
        b.merge(&message(2).encode_to_vec()[..]).unwrap();
        assert_eq!(a.get(), &message(1), "the other holder keeps its message");
        assert_eq!(b.get().properties["RAFTMQ_SEQUENCE"], "2");
        // Bad bytes are an error, never a panic.
        let mut c = Shared::<Message>::default();
        assert!(c.merge(&[0x0a, 0xff][..]).is_err());
    }
}
