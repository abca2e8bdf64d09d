//! StreamAppend with requests the leader frames itself: each request goes to HTTP/2 as the
//! chunks of its gRPC message (`AppendRequest::frame`), its entries' payloads shared with the
//! log's cache, where tonic's client would copy every request into its frame buffer first. The
//! answers are decoded by tonic as before.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::ready;
use std::task::Context;
use std::task::Poll;

use futures::Stream;
use http_body::Frame;
use raftmq_proto::codec::StrictProstCodec;
use raftmq_proto::v1::RaftReply;
use tonic::codec::Codec;
use tonic::codegen::http;
use tonic::codegen::Bytes;
use tonic::codegen::Service;
use tonic::transport::Channel;
use tonic::Code;
use tonic::Status;

use super::raw_append::PATH;

/// Opens `raftmq.v1.RaftPeer/StreamAppend` on `channel` with `frames` as its request stream
/// (each item one gRPC message in chunks) and returns the replies, decoded up to
/// `max_decoding_bytes` each. The call as tonic's client makes it: the same headers, a
/// trailers-only answer's status as the error.
pub(super) async fn stream_append<S>(
    mut channel: Channel,
    frames: S,
    max_decoding_bytes: usize,
) -> Result<tonic::Streaming<RaftReply>, Status>
where
    S: Stream<Item = Vec<Bytes>> + Send + Unpin + 'static,
{
    futures::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
    let body = tonic::body::Body::new(FramedBody::new(frames));
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(PATH)
        .version(http::Version::HTTP_2)
        .header(http::header::TE, "trailers")
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .body(body)
        .map_err(|e| Status::internal(format!("StreamAppend request: {e}")))?;
    let response = channel
        .call(request)
        .await
        .map_err(|e| Status::from_error(Box::new(e)))?;
    let trailers_only = Status::from_header_map(response.headers());
    if let Some(status) = &trailers_only {
        if status.code() != Code::Ok {
            return Err(status.clone());
        }
    }
    let status_code = response.status();
    let decoder = StrictProstCodec::<(), RaftReply>::default().decoder();
    let body = response.into_body();
    Ok(match trailers_only {
        Some(_) => tonic::Streaming::new_empty(decoder, body),
        None => tonic::Streaming::new_response(
            decoder,
            body,
            status_code,
            None,
            Some(max_decoding_bytes),
        ),
    })
}

/// A request body of framed messages: each chunk one DATA frame's worth for HTTP/2 (which
/// cuts it to the frame size and writes the large ones without copying them).
pub(super) struct FramedBody<S> {
    frames: S,
    /// The rest of the message being sent.
    chunks: VecDeque<Bytes>,
}

impl<S> FramedBody<S> {
    /// The body of `frames`, each item one message in chunks.
    pub(super) fn new(frames: S) -> Self {
        FramedBody {
            frames,
            chunks: VecDeque::new(),
        }
    }
}

impl<S> http_body::Body for FramedBody<S>
where
    S: Stream<Item = Vec<Bytes>> + Unpin,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if let Some(chunk) = self.chunks.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            match ready!(Pin::new(&mut self.frames).poll_next(cx)) {
                Some(message) => self.chunks.extend(message),
                None => return Poll::Ready(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use http_body::Body;

    use super::*;

    /// Every chunk of every message, in order, then the end.
    #[tokio::test]
    async fn the_body_yields_the_chunks_in_order() {
        let a = vec![Bytes::from_static(b"ab"), Bytes::from_static(b"c")];
        let b = vec![Bytes::from_static(b"d")];
        let mut body = FramedBody::new(futures::stream::iter([a, Vec::new(), b]));
        let mut got = Vec::new();
        while let Some(f) = futures::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            got.push(f.expect("infallible").into_data().expect("data"));
        }
        assert_eq!(got, ["ab", "c", "d"]);
        assert!(body.frames.next().await.is_none());
    }
}
