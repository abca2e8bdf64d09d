//! StreamAppend served on the raw HTTP/2 body: each request is taken as the DATA frames it
//! arrived in, where tonic's decoder would copy every frame into its buffer first (10.9–11.2%
//! of a follower's samples at batches of 32, its largest item). h2 hands each frame out as a
//! slice of its read buffer, and the leader sends an entry's payload of 8 KiB or more as a
//! frame of its own (`framed`), so the entries' payloads come out as slices of the frames
//! (`codec::decode_parts`); the follower's log copies them once, into its write stage.
//!
//! The call is gRPC as tonic serves it: the same message framing and size limit, a request
//! that does not decode answers INVALID_ARGUMENT ("malformed protobuf message"), and the
//! answers go out as gRPC messages with the status in the trailers. Every other method of
//! `RaftPeer` goes to the tonic server ([`PeerServer`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::ready;
use std::task::Context;
use std::task::Poll;

use futures::Stream;
use futures::StreamExt as _;
use http_body::Frame;
use prost::bytes::Buf as _;
use prost::bytes::BufMut as _;
use prost::bytes::Bytes;
use prost::bytes::BytesMut;
use prost::encoding::DecodeContext;
use prost::encoding::WireType;
use prost::Message as _;
use raftmq_proto::v1::raft_peer_server::RaftPeer;
use raftmq_proto::v1::raft_peer_server::RaftPeerServer;
use raftmq_proto::v1::RaftReply;
use raftmq_proto::v1::RaftRequest;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::BoxFuture;
use tonic::codegen::Service;
use tonic::server::NamedService;
use tonic::Status;

use super::rope::Rope;

/// The method served here, as the generated client names it.
pub(super) const PATH: &str = "/raftmq.v1.RaftPeer/StreamAppend";

/// The bytes of a gRPC message's prefix: a compression flag and a big-endian `u32` length.
const PREFIX: usize = 5;

/// `RaftRequest.payload`'s field number.
const PAYLOAD_TAG: u32 = 5;

/// One request of a StreamAppend stream: its addressing fields, and its payload as the
/// pieces of the frames it arrived in (one piece when it came through tonic).
#[derive(Debug, Default)]
pub(super) struct PeerRequest {
    /// Everything but the payload (left empty).
    pub(super) fields: RaftRequest,
    pub(super) payload: Vec<Bytes>,
}

impl From<RaftRequest> for PeerRequest {
    fn from(mut fields: RaftRequest) -> Self {
        let payload = vec![std::mem::take(&mut fields.payload)];
        PeerRequest { fields, payload }
    }
}

/// What answers a StreamAppend call: the requests decoded here in, its answers out.
pub(super) trait AppendStream: Send + Sync + 'static {
    fn append_stream(
        &self,
        input: Pin<Box<dyn Stream<Item = Result<PeerRequest, Status>> + Send>>,
    ) -> Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send>>;
}

/// The `RaftPeer` service: StreamAppend on the raw body, the other methods through tonic.
pub struct PeerServer<T: RaftPeer> {
    grpc: RaftPeerServer<T>,
    service: Arc<T>,
    max_message_bytes: usize,
}

impl<T: RaftPeer> Clone for PeerServer<T> {
    fn clone(&self) -> Self {
        PeerServer {
            grpc: self.grpc.clone(),
            service: self.service.clone(),
            max_message_bytes: self.max_message_bytes,
        }
    }
}

impl<T: RaftPeer> PeerServer<T> {
    /// `service`, with message limits of `max_message_bytes` both ways.
    pub(super) fn new(service: T, max_message_bytes: usize) -> Self {
        let service = Arc::new(service);
        let grpc = RaftPeerServer::from_arc(service.clone())
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        PeerServer {
            grpc,
            service,
            max_message_bytes,
        }
    }
}

impl<T: RaftPeer> NamedService for PeerServer<T> {
    const NAME: &'static str = <RaftPeerServer<T> as NamedService>::NAME;
}

impl<T: RaftPeer + AppendStream> Service<http::Request<Body>> for PeerServer<T> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<http::Request<Body>>::poll_ready(&mut self.grpc, cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() != PATH {
            return self.grpc.call(request);
        }
        let max = self.max_message_bytes;
        let input = Messages::new(request.into_body(), max).map(|m| m.and_then(parse_request));
        let replies = self.service.append_stream(Box::pin(input));
        let response = http::Response::builder()
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .body(Body::new(ReplyBody::new(replies, max)))
            .unwrap_or_else(|e| Status::internal(format!("StreamAppend answer: {e}")).into_http());
        Box::pin(std::future::ready(Ok(response)))
    }
}

/// The gRPC messages of a request body, each as the pieces of the frames it arrived in.
pub(super) struct Messages<B> {
    body: B,
    /// Received bytes not yet handed out, in order.
    pieces: Rope,
    /// The length of the message whose prefix has been read.
    want: Option<usize>,
    max: usize,
    done: bool,
}

impl<B> Messages<B> {
    pub(super) fn new(body: B, max: usize) -> Self {
        Messages {
            body,
            pieces: Rope::default(),
            want: None,
            max,
            done: false,
        }
    }

    /// The next whole message buffered, if any.
    fn next_message(&mut self) -> Result<Option<Vec<Bytes>>, Status> {
        if self.want.is_none() && self.pieces.remaining() >= PREFIX {
            let mut prefix = [0u8; PREFIX];
            self.pieces.copy_to_slice(&mut prefix);
            match prefix[0] {
                0 => {}
                1 => {
                    return Err(Status::internal(
                        "protocol error: received message with compressed-flag but no \
                         grpc-encoding was specified",
                    ))
                }
                f => {
                    return Err(Status::internal(format!(
                        "protocol error: received message with invalid compression flag: {f} \
                         (valid flags are 0 and 1), while sending request"
                    )))
                }
            }
            let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
            if len > self.max {
                return Err(Status::out_of_range(format!(
                    "Error, decoded message length too large: found {len} bytes, the limit \
                     is: {} bytes",
                    self.max
                )));
            }
            self.want = Some(len);
        }
        match self.want {
            Some(len) if self.pieces.remaining() >= len => {
                self.want = None;
                Ok(Some(self.pieces.take_pieces(len)))
            }
            _ => Ok(None),
        }
    }
}

impl<B> Stream for Messages<B>
where
    B: http_body::Body<Data = Bytes, Error = Status> + Unpin,
{
    type Item = Result<Vec<Bytes>, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match self.next_message() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(status) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                // Request trailers carry nothing for this call.
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.pieces.push(data);
                    }
                }
                Some(Err(status)) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
                None => {
                    self.done = true;
                    if self.want.is_some() || self.pieces.remaining() > 0 {
                        return Poll::Ready(Some(Err(Status::internal(
                            "Unexpected EOF decoding stream.",
                        ))));
                    }
                }
            }
        }
    }
}

/// Decodes a `RaftRequest` from `message`, its payload left as slices of the pieces.
pub(super) fn parse_request(message: Vec<Bytes>) -> Result<PeerRequest, Status> {
    let malformed = |e: &dyn std::fmt::Display| {
        Status::invalid_argument(format!("malformed protobuf message (RaftRequest): {e}"))
    };
    let mut rope = Rope::from(message);
    let mut request = PeerRequest::default();
    while rope.has_remaining() {
        let (tag, wire_type) = prost::encoding::decode_key(&mut rope).map_err(|e| malformed(&e))?;
        if tag == PAYLOAD_TAG && wire_type == WireType::LengthDelimited {
            let len = prost::encoding::decode_varint(&mut rope).map_err(|e| malformed(&e))?;
            if len > rope.remaining() as u64 {
                return Err(malformed(&"buffer underflow"));
            }
            // As prost does: the last occurrence of a bytes field wins.
            request.payload = rope.take_pieces(len as usize);
        } else {
            request
                .fields
                .merge_field(tag, wire_type, &mut rope, DecodeContext::default())
                .map_err(|e| malformed(&e))?;
        }
    }
    Ok(request)
}

/// A StreamAppend answer: each reply a gRPC message, then the status as trailers. Replies
/// ready together go out in one frame, up to [`YIELD_BYTES`], as tonic's encoder sends them.
struct ReplyBody {
    replies: Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send>>,
    max: usize,
    /// The status to end with, once the replies before it are out.
    end: Option<Status>,
    done: bool,
}

/// The most bytes of replies gathered into one frame (tonic's yield threshold).
const YIELD_BYTES: usize = 32 << 10;

impl ReplyBody {
    fn new(
        replies: Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send>>,
        max: usize,
    ) -> Self {
        ReplyBody {
            replies,
            max,
            end: None,
            done: false,
        }
    }
}

impl http_body::Body for ReplyBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut buf = BytesMut::new();
        while self.end.is_none() && buf.len() < YIELD_BYTES {
            let next = match self.replies.poll_next_unpin(cx) {
                Poll::Ready(next) => next,
                Poll::Pending if buf.is_empty() => return Poll::Pending,
                Poll::Pending => break,
            };
            match next {
                Some(Ok(reply)) => {
                    if let Err(status) = put_reply(&mut buf, &reply, self.max) {
                        self.end = Some(status);
                    }
                }
                Some(Err(status)) => self.end = Some(status),
                None => self.end = Some(Status::ok("")),
            }
        }
        if !buf.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(buf.freeze()))));
        }
        let end = self.end.take().unwrap_or_else(|| Status::ok(""));
        self.done = true;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(&end)))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

/// Appends `reply` to `buf` as a gRPC message (prefix and bytes), at most `max` bytes long.
fn put_reply(buf: &mut BytesMut, reply: &RaftReply, max: usize) -> Result<(), Status> {
    let len = reply.encoded_len();
    let len32 = u32::try_from(len)
        .ok()
        .filter(|_| len <= max)
        .ok_or_else(|| {
            Status::out_of_range(format!(
                "Error, encoded message length too large: found {len} bytes, the limit is: {max} \
             bytes"
            ))
        })?;
    buf.reserve(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(len32);
    reply.encode_raw(buf);
    Ok(())
}

/// `status` as gRPC trailers (a status whose metadata cannot be headers ends INTERNAL).
fn trailers(status: &Status) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    if let Err(bad) = status.add_header(&mut map) {
        map.clear();
        let _ = Status::internal(bad.message().to_string()).add_header(&mut map);
    }
    map
}

#[cfg(test)]
#[path = "raw_append_tests.rs"]
mod tests;
