//! `SendStream`: pipelined single sends on one gRPC stream.
//!
//! A unary `Send` costs an HTTP/2 stream of its own (headers both ways, a server task, a
//! client-side buffer hop); with many sends in flight that per-call cost, not Raft, bounds a
//! producer. On a stream each message is one frame. Every message is still its own send: it
//! goes through the same handler as `Send` (so a follower forwards it, and the answer, metrics
//! and quorum semantics are exactly those of `Send`) and is answered on its own, by `seq`.
//!
//! The response stream drives the work: polling it takes in requests while fewer than
//! [`MAX_IN_FLIGHT`] are unanswered and runs their sends concurrently in the stream's task.
//! A client that stops reading answers therefore stops the server reading requests, and
//! HTTP/2 flow control pushes back on the client. When the node stops, a stream takes no
//! more requests, answers those in flight and ends, so the client reconnects elsewhere.

use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::FutureExt;
use futures::Stream;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_server::RaftMq;
use tokio::sync::watch;
use tonic::Request;
use tonic::Status;
use tonic::Streaming;

use super::ClientService;

/// Most unanswered sends of one stream; further requests wait in the transport.
pub const MAX_IN_FLIGHT: usize = 1024;

/// The answer stream of one `SendStream` call.
pub struct SendStreamDriver {
    svc: ClientService,
    requests: Streaming<pb::SendStreamRequest>,
    requests_done: bool,
    /// Resolves when the node stops.
    stopped: BoxFuture<'static, ()>,
    /// Why the request side failed; the answer stream ends with it once in-flight sends
    /// are answered.
    failed: Option<Status>,
    in_flight: FuturesUnordered<BoxFuture<'static, pb::SendStreamReply>>,
}

impl SendStreamDriver {
    /// Answers the requests of `requests` with `svc` until `stop` turns true.
    pub fn new(
        svc: ClientService,
        requests: Streaming<pb::SendStreamRequest>,
        mut stop: watch::Receiver<bool>,
    ) -> Self {
        let stopped = async move {
            while !*stop.borrow_and_update() {
                if stop.changed().await.is_err() {
                    return;
                }
            }
        };
        Self {
            svc,
            requests,
            requests_done: false,
            stopped: stopped.boxed(),
            failed: None,
            in_flight: FuturesUnordered::new(),
        }
    }
}

/// One message of a stream, answered as `Send` answers it.
async fn send_one(svc: ClientService, req: pb::SendStreamRequest) -> pb::SendStreamReply {
    let seq = req.seq;
    let res = svc
        .send(Request::new(pb::SendRequest {
            message: req.message,
        }))
        .await;
    let outcome = match res.map(|r| r.into_inner().result) {
        Ok(Some(result)) => pb::send_stream_reply::Outcome::Result(result),
        Ok(None) => pb::send_stream_reply::Outcome::Error(raftmq_proto::send_error(
            &Status::internal("the send produced no result"),
        )),
        Err(status) => pb::send_stream_reply::Outcome::Error(raftmq_proto::send_error(&status)),
    };
    pb::SendStreamReply {
        seq,
        outcome: Some(outcome),
    }
}

impl Stream for SendStreamDriver {
    type Item = Result<pb::SendStreamReply, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if !this.requests_done && this.stopped.poll_unpin(cx).is_ready() {
            this.requests_done = true;
        }
        while !this.requests_done && this.in_flight.len() < MAX_IN_FLIGHT {
            match Pin::new(&mut this.requests).poll_next(cx) {
                Poll::Ready(Some(Ok(req))) => {
                    let svc = this.svc.clone();
                    this.in_flight.push(send_one(svc, req).boxed());
                }
                Poll::Ready(Some(Err(status))) => {
                    // The client's half broke (reset, undecodable frame): answer what is in
                    // flight, take nothing more, then end with the reason.
                    tracing::debug!(code = ?status.code(), message = status.message(), "send stream: request side ended with an error");
                    this.requests_done = true;
                    this.failed = Some(status);
                }
                Poll::Ready(None) => this.requests_done = true,
                Poll::Pending => break,
            }
        }
        match Pin::new(&mut this.in_flight).poll_next(cx) {
            Poll::Ready(Some(reply)) => Poll::Ready(Some(Ok(reply))),
            Poll::Ready(None) if this.requests_done => Poll::Ready(this.failed.take().map(Err)),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}
