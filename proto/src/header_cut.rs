//! HTTP/2 bodies re-cut so that the gRPC length prefix of every large message ends a DATA
//! frame: a node's servers cut their requests ([`HeaderCutLayer`]), the client its answers
//! ([`CutResponses`]).
//!
//! tonic's decoder (`StreamingInner::decode_chunk`) reserves a message's full length in its
//! buffer when it reads the prefix, even when the buffer already holds the message. A client
//! sends a `SendStream` batch of 32 × 1 KiB as one frame, prefix and message together, so
//! every such reserve found the message there and asked for that much again: a new buffer
//! and a copy of the message (or a `realloc` of the whole buffer, bytes already decoded
//! included), 4.0% of a leader's samples at batches of 32, more than tonic's own copy of the
//! frame; for a consumer's `Pull` answers of 64 messages, 4.2% of its samples. Cut right
//! after the prefix, the frame leaves the buffer empty when tonic reads the prefix, so the
//! reserve copies nothing; the message comes in the next piece of the frame. The pieces are
//! slices of the frame: nothing is copied here. Messages under [`CUT_FROM`] bytes pass uncut
//! (many share a frame; their reserves are small).

use std::pin::Pin;
use std::task::ready;
use std::task::Context;
use std::task::Poll;

use futures::future::MapOk;
use futures::TryFutureExt as _;
use http_body::Frame;
use http_body::SizeHint;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::Bytes;
use tonic::codegen::Service;
use tonic::Status;

/// Messages of at least this many bytes get their prefix cut off from their bytes.
pub const CUT_FROM: u32 = 4096;

/// The length of a gRPC message's prefix: a compression flag and a big-endian `u32` length.
const PREFIX_BYTES: u8 = 5;

/// A tower layer giving each request a [`HeaderCut`] body (`Server::builder().layer(..)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderCutLayer;

impl<S> tower_layer::Layer<S> for HeaderCutLayer {
    type Service = HeaderCutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HeaderCutService { inner }
    }
}

/// `inner` with each request's body re-cut (see the module's docs).
#[derive(Debug, Clone)]
pub struct HeaderCutService<S> {
    inner: S,
}

impl<S> Service<http::Request<Body>> for HeaderCutService<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        self.inner
            .call(request.map(|body| Body::new(HeaderCut::new(body))))
    }
}

/// A client's service (a `Channel`) with each answer's body re-cut (see the module's docs).
#[derive(Debug, Clone)]
pub struct CutResponses<S> {
    inner: S,
}

impl<S> CutResponses<S> {
    /// `inner`, its answers re-cut.
    pub fn new(inner: S) -> Self {
        CutResponses { inner }
    }
}

/// An answer with its body re-cut.
fn cut_response(response: http::Response<Body>) -> http::Response<Body> {
    response.map(|body| Body::new(HeaderCut::new(body)))
}

/// The future of a [`CutResponses`] call.
type CutFuture<F> = MapOk<F, fn(http::Response<Body>) -> http::Response<Body>>;

impl<S, B> Service<http::Request<B>> for CutResponses<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = CutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.inner.call(request).map_ok(cut_response as fn(_) -> _)
    }
}

/// Where a stream of gRPC messages stands at the end of what has been walked.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Framing {
    /// Bytes of the current message still to come; while zero, a prefix is being read.
    left: u64,
    /// Bytes of the prefix read so far (0..5).
    got: u8,
    /// The length read so far from the prefix's last four bytes.
    len: u32,
}

impl Framing {
    /// Walks `data`, the stream's next bytes, and returns the offset right after the first
    /// prefix in it of a message of [`CUT_FROM`] bytes or more (having walked up to there
    /// only), or `None` having walked all of it.
    fn walk(&mut self, data: &[u8]) -> Option<usize> {
        let mut at = 0;
        while at < data.len() {
            if self.left > 0 {
                let n = self.left.min((data.len() - at) as u64);
                self.left -= n;
                at += n as usize; // n <= data.len() - at
                continue;
            }
            if self.got > 0 {
                self.len = (self.len << 8) | u32::from(data[at]);
            }
            at += 1;
            self.got += 1;
            if self.got == PREFIX_BYTES {
                let len = self.len;
                *self = Framing {
                    left: u64::from(len),
                    ..Framing::default()
                };
                if len >= CUT_FROM {
                    return Some(at);
                }
            }
        }
        None
    }
}

/// A body whose DATA frames end right after each large message's prefix; the bytes
/// and their order are the body's own (a malformed stream is left for tonic to refuse).
pub struct HeaderCut {
    inner: Body,
    framing: Framing,
    /// The rest of a frame cut after a prefix, the next piece to hand out.
    rest: Option<Bytes>,
}

impl HeaderCut {
    /// `inner`, re-cut.
    pub fn new(inner: Body) -> Self {
        HeaderCut {
            inner,
            framing: Framing::default(),
            rest: None,
        }
    }
}

impl http_body::Body for HeaderCut {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let mut data = match this.rest.take() {
            Some(rest) => rest,
            None => match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return Poll::Ready(other),
            },
        };
        if let Some(at) = this.framing.walk(&data) {
            if at < data.len() {
                this.rest = Some(data.split_off(at));
            }
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.as_ref().map_or(0, |r| r.len() as u64);
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(rest));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(rest));
        }
        hint
    }
}

#[cfg(test)]
#[path = "header_cut_tests.rs"]
mod tests;
