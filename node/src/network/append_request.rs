//! [`AppendRequest`]: one request of a StreamAppend call as the leader sends it, encoding as
//! `raftmq.v1.RaftRequest` does, with its payload written straight into the gRPC frame.
//!
//! A request encoded first into a buffer of its own (postcard) was then copied into the frame
//! (prost): two copies of every entry per follower, and an allocation of the request's size.
//! A [`Body::Later`] payload is encoded once, where the stream frames the request.
//!
//! [`AppendRequest::frame`] gives the whole gRPC message (its 5-byte prefix included) as
//! [`Chunks`] that go to HTTP/2 as they are (`super::framed`): an entry's payload of at least
//! [`SHARE_MIN_BYTES`] is a chunk sharing the entry's own buffer (the recent entries' cache),
//! so the leader copies no entry into a frame; only the kernel copies it, once per follower.
//! tonic's encoder copied every request into its frame buffer first (3.7-4.6% of a leader's
//! samples at batch-32).

use std::fmt;
use std::sync::Arc;

use prost::bytes::Buf;
use prost::bytes::BufMut;
use prost::bytes::Bytes;
use prost::bytes::BytesMut;
use prost::encoding::DecodeContext;
use prost::encoding::WireType;
use prost::DecodeError;

use super::codec;

/// A payload encoded when the frame is written.
pub(super) trait EncodeLater: Send + Sync {
    /// The exact length of the encoding.
    fn len(&self) -> usize;

    /// Writes the encoding, [`len`](Self::len) bytes in all, to `sink`.
    fn encode_to(&self, sink: &mut dyn FnMut(&[u8]));

    /// Writes the encoding to `out`: copied, unless the payload knows buffers it can share
    /// ([`Chunks::share`]).
    fn encode_chunks(&self, out: &mut Chunks) {
        self.encode_to(&mut |piece| out.copy(piece));
    }
}

/// A piece of an encoding at least this long that lies in a buffer of its own is handed on as
/// a share of that buffer rather than copied. Each chunk is a DATA frame of its own to HTTP/2
/// (a frame header and a few hundred ns of its bookkeeping), which a copy of a few KiB costs
/// less than.
pub(super) const SHARE_MIN_BYTES: usize = 8 << 10;

/// A message's bytes as chunks, in order: the small pieces gathered into one buffer between
/// the shared ones.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    out: Vec<Bytes>,
    buf: BytesMut,
}

impl Chunks {
    fn with_capacity(small: usize) -> Self {
        Self {
            out: Vec::new(),
            buf: BytesMut::with_capacity(small),
        }
    }

    /// Appends `piece`, copied.
    pub(super) fn copy(&mut self, piece: &[u8]) {
        self.buf.extend_from_slice(piece);
    }

    /// Appends `piece` as a chunk of its own (copied when it is short).
    pub(super) fn share(&mut self, piece: Bytes) {
        if piece.len() < SHARE_MIN_BYTES {
            return self.copy(&piece);
        }
        if !self.buf.is_empty() {
            self.out.push(self.buf.split().freeze());
        }
        self.out.push(piece);
    }

    /// The chunks, in order.
    pub(super) fn finish(mut self) -> Vec<Bytes> {
        if !self.buf.is_empty() {
            self.out.push(self.buf.freeze());
        }
        self.out
    }
}

/// A request's encoded openraft payload (`RaftRequest.payload`).
pub(super) enum Body {
    /// Encoded already (a large request, encoded on the blocking pool).
    Encoded(Bytes),
    /// Encoded into the frame.
    Later(Box<dyn EncodeLater>),
}

impl Body {
    /// The payload's length in bytes.
    pub(super) fn len(&self) -> usize {
        match self {
            Body::Encoded(b) => b.len(),
            Body::Later(l) => l.len(),
        }
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Encoded(b) => write!(f, "Encoded({} bytes)", b.len()),
            Body::Later(l) => write!(f, "Later({} bytes)", l.len()),
        }
    }
}

/// `raftmq.v1.RaftRequest` of a StreamAppend call (fields and tags as in `peer.proto`).
///
/// Outgoing only: decoding one skips every field (nothing decodes into it).
#[derive(Debug)]
pub(super) struct AppendRequest {
    pub(super) cluster_id: Arc<str>,
    pub(super) from_node_id: u64,
    pub(super) to_node_id: u64,
    pub(super) body: Body,
}

const CLUSTER_ID: u32 = 1;
const FROM_NODE_ID: u32 = 2;
const TO_NODE_ID: u32 = 3;
const CODEC: u32 = 4;
const PAYLOAD: u32 = 5;

impl AppendRequest {
    fn codec() -> i32 {
        codec::CODEC as i32
    }

    /// The fields before the payload's bytes (the payload's key and length included).
    fn encode_envelope(&self, buf: &mut impl BufMut) {
        use prost::encoding::*;
        // As prost encodes proto3 fields: in tag order, defaults left out.
        if !self.cluster_id.is_empty() {
            encode_key(CLUSTER_ID, WireType::LengthDelimited, buf);
            encode_varint(self.cluster_id.len() as u64, buf);
            buf.put_slice(self.cluster_id.as_bytes());
        }
        if self.from_node_id != 0 {
            uint64::encode(FROM_NODE_ID, &self.from_node_id, buf);
        }
        if self.to_node_id != 0 {
            uint64::encode(TO_NODE_ID, &self.to_node_id, buf);
        }
        if Self::codec() != 0 {
            int32::encode(CODEC, &Self::codec(), buf);
        }
        let len = self.body.len();
        if len != 0 {
            encode_key(PAYLOAD, WireType::LengthDelimited, buf);
            encode_varint(len as u64, buf);
        }
    }

    /// The request as one uncompressed gRPC message (the flag byte and the big-endian length,
    /// then the encoding), in chunks; `None` when its encoding is longer than `max_bytes` (what
    /// tonic's encoder refuses as well).
    pub(super) fn frame(&self, max_bytes: usize) -> Option<Vec<Bytes>> {
        use prost::Message;
        let len = self.encoded_len();
        if len > max_bytes {
            return None;
        }
        let len32 = u32::try_from(len).ok()?;
        let mut out = Chunks::with_capacity(len.min(SHARE_MIN_BYTES) + 64);
        out.buf.put_u8(0);
        out.buf.put_u32(len32);
        self.encode_envelope(&mut out.buf);
        match &self.body {
            Body::Encoded(b) => out.share(b.clone()),
            Body::Later(l) => l.encode_chunks(&mut out),
        }
        Some(out.finish())
    }
}

impl prost::Message for AppendRequest {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.encode_envelope(buf);
        match &self.body {
            Body::Encoded(b) => buf.put_slice(b),
            Body::Later(l) => l.encode_to(&mut |piece| buf.put_slice(piece)),
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        use prost::encoding::*;
        let delimited = |tag: u32, len: usize| match len {
            0 => 0,
            n => key_len(tag) + encoded_len_varint(n as u64) + n,
        };
        let varint = |tag: u32, v: u64| match v {
            0 => 0,
            v => key_len(tag) + encoded_len_varint(v),
        };
        delimited(CLUSTER_ID, self.cluster_id.len())
            + varint(FROM_NODE_ID, self.from_node_id)
            + varint(TO_NODE_ID, self.to_node_id)
            + varint(CODEC, Self::codec() as u64)
            + delimited(PAYLOAD, self.body.len())
    }

    fn clear(&mut self) {
        self.cluster_id = Arc::from("");
        self.from_node_id = 0;
        self.to_node_id = 0;
        self.body = Body::Encoded(Bytes::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use raftmq_proto::v1::RaftRequest;

    struct Fixed(Vec<u8>);

    impl EncodeLater for Fixed {
        fn len(&self) -> usize {
            self.0.len()
        }

        fn encode_to(&self, sink: &mut dyn FnMut(&[u8])) {
            for chunk in self.0.chunks(7) {
                sink(chunk);
            }
        }
    }

    fn generated(cluster_id: &str, from: u64, to: u64, payload: &[u8]) -> RaftRequest {
        RaftRequest {
            cluster_id: cluster_id.into(),
            from_node_id: from,
            to_node_id: to,
            codec: codec::CODEC as i32,
            payload: payload.to_vec().into(),
        }
    }

    #[test]
    fn encodes_as_the_generated_raft_request() {
        let payload: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        for (cluster, from, to, len) in [("c1", 1, 2, 70_000), ("", 0, 0, 0), ("x", 3, 0, 5)] {
            let want = generated(cluster, from, to, &payload[..len]);
            for body in [
                Body::Encoded(Bytes::copy_from_slice(&payload[..len])),
                Body::Later(Box::new(Fixed(payload[..len].to_vec()))),
            ] {
                let ours = AppendRequest {
                    cluster_id: Arc::from(cluster),
                    from_node_id: from,
                    to_node_id: to,
                    body,
                };
                assert_eq!(ours.encoded_len(), want.encoded_len());
                assert_eq!(ours.encode_to_vec(), want.encode_to_vec());
                let back = RaftRequest::decode(&ours.encode_to_vec()[..]).expect("decodes");
                assert_eq!(back, want);
                // Framed: the flag byte, the length, then the same bytes.
                let mut framed = vec![0u8];
                framed.extend_from_slice(&(want.encoded_len() as u32).to_be_bytes());
                framed.extend_from_slice(&want.encode_to_vec());
                let chunks = ours.frame(usize::MAX).expect("within the limit");
                assert_eq!(chunks.concat(), framed);
                assert!(
                    ours.frame(want.encoded_len() - 1).is_none(),
                    "above the limit"
                );
                assert!(ours.frame(want.encoded_len()).is_some(), "at the limit");
            }
        }
    }

    #[test]
    fn a_large_encoded_payload_is_a_shared_chunk() {
        let payload = Bytes::from(vec![7u8; SHARE_MIN_BYTES]);
        let small = Bytes::from(vec![7u8; SHARE_MIN_BYTES - 1]);
        for (body, shared) in [(payload, true), (small, false)] {
            let req = AppendRequest {
                cluster_id: Arc::from("c"),
                from_node_id: 1,
                to_node_id: 2,
                body: Body::Encoded(body.clone()),
            };
            let chunks = req.frame(usize::MAX).expect("within the limit");
            if shared {
                assert_eq!(chunks.len(), 2, "the envelope, then the payload");
                assert_eq!(chunks[1].as_ptr(), body.as_ptr(), "not copied");
            } else {
                assert_eq!(chunks.len(), 1, "copied with the envelope");
            }
            assert_eq!(chunks.concat()[5..], req.encode_to_vec()[..]);
        }
    }
}
