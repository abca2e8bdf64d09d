//! Sends whose messages are shared, not copied, between a client's attempts.
//!
//! A client keeps every message it sends until the answer comes, to resend it after a
//! failover. With the generated types each attempt took a deep copy (topic, tags, keys, born
//! host and the properties map: about eight allocations per message, a quarter of `raftmq
//! bench`'s CPU at batches of 32). [`Shared`] puts a message behind an `Arc` and encodes
//! exactly as the message itself does, so the bytes on the wire are unchanged;
//! [`CallClient`](crate::call_client::CallClient) sends `SendBatch` and `SendStream` requests
//! of that kind.

use std::sync::Arc;

use prost::bytes::Buf;
use prost::bytes::BufMut;
use prost::encoding::DecodeContext;
use prost::encoding::WireType;
use prost::DecodeError;

/// A prost message behind an `Arc`: cloning shares it, encoding writes `T`'s bytes.
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
    T: prost::Message + Clone + Default,
{
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.0.encode_raw(buf)
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

/// `raftmq.v1.SendStreamRequest` with a shared message (same fields, same tags).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SharedSendStreamRequest {
    /// Chosen by the client to match the answer; unique among its unanswered requests.
    #[prost(uint64, tag = "1")]
    pub seq: u64,
    /// One message.
    #[prost(message, optional, tag = "2")]
    pub message: Option<Shared<crate::v1::Message>>,
    /// Or several, as one entry.
    #[prost(message, optional, tag = "3")]
    pub batch: Option<Shared<crate::v1::SendBatchRequest>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::Message;
    use crate::v1::SendBatchRequest;
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
