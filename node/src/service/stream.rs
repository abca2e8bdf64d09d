//! `SendStream`: pipelined sends on one gRPC stream.
//!
//! A unary `Send` or `SendBatch` costs an HTTP/2 stream of its own (headers both ways, a
//! server task, a client-side buffer hop); with many sends in flight that per-call cost, not
//! Raft, bounds a producer. On a stream each message, or each batch, is one frame, answered
//! on its own by `seq`.
//!
//! The response stream drives the work: polling it takes in requests while fewer than
//! [`MAX_IN_FLIGHT`] are unanswered (a request refused as invalid counts until its answer
//! leaves: an invalid request is not free) and their messages hold fewer than
//! `max-stream-inflight-bytes` (encoded request bytes; one request is always taken when
//! nothing is in flight), and runs their sends concurrently in the stream's task.
//! A client that stops reading answers therefore stops the server reading requests, and
//! HTTP/2 flow control pushes back on the client. When the node stops, a stream takes no
//! more requests, answers those in flight and ends, so the client reconnects elsewhere.
//!
//! **Group proposal.** On the leader, the valid messages of one topic that arrived together
//! (in one poll) share one Raft entry ([`Pipeline::submit_group`]), within
//! `max-batch-messages` and `max-batch-bytes`, and while the node is loaded with other
//! streams' entries they wait and share one with those streams' groups
//! (`crate::pipeline::coalesce`):
//! every entry costs the same fixed Raft work (a log record, replication to each follower,
//! an apply on every node) whatever it holds. Each message keeps the answer it would get
//! alone:
//! - a message that fails validation is answered alone and joins no group;
//! - a group whose entry stored nothing (refused before the proposal, or rejected as a whole
//!   by apply, e.g. the topic was deleted meanwhile) is submitted again message by message,
//!   so each gets its own verdict (a message that went out alone has its verdict already);
//! - a group whose outcome is unknown (proposed, then a timeout or a leader change) answers
//!   that to each of its messages: the entry commits for all of them or for none.
//!
//! **Batches.** A request with `batch` is a `SendBatch`: one entry of its own (merged with
//! others' only as unary batches are, [`Pipeline::submit_shared`]), all or nothing, one
//! answer; every message's topic is authorized before it starts.
//!
//! On a follower every message (every batch) is relayed to the leader as a unary `Send`
//! (`SendBatch`) ([`forward`]); the answer then names the leader (`leader_addr`), so the
//! client moves its sends there. A follower elected while a request waited for a new leader
//! stores it itself.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::task::Poll;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::FutureExt;
use futures::Stream;
use raftmq_proto::v1 as pb;
use raftmq_store::limits::message_bytes;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Status;
use tonic::Streaming;

use super::send;
use crate::auth::policy::authorize;
use crate::auth::policy::Action;
use crate::auth::Principal;
use crate::error::client_status;
use crate::error::NodeError;
use crate::pipeline::Pipeline;
use crate::pipeline::Source;
use crate::pipeline::SubmitBatch;

/// Most unanswered sends of one stream; further requests wait in the transport.
pub const MAX_IN_FLIGHT: usize = 1024;

type Replies = Vec<pb::SendStreamReply>;

mod submit;
use submit::error_reply;
use submit::missing_message;
use submit::same_topic;
use submit::send_batch;
use submit::send_group;
use submit::send_one;

/// The answer stream of one `SendStream` call.
pub struct SendStreamDriver {
    pipeline: Pipeline,
    requests: Streaming<pb::SendStreamRequest>,
    requests_done: bool,
    /// Why the request side failed; the answer stream ends with it once in-flight sends
    /// are answered.
    failed: Option<Status>,
    /// Resolves when the node stops.
    stopped: BoxFuture<'static, ()>,
    /// Sends (single or grouped) under way, each with the request bytes it holds.
    in_flight: FuturesUnordered<BoxFuture<'static, (Replies, u64)>>,
    /// Request bytes of the sends under way.
    bytes_in_flight: u64,
    /// `max-stream-inflight-bytes`.
    max_bytes: u64,
    /// Messages taken in and not yet answered.
    unanswered: usize,
    /// Answers ready to go out.
    ready: VecDeque<pb::SendStreamReply>,
    /// Who opened the stream (authenticated once, at its start); each message's topic is
    /// authorized against it.
    principal: Arc<Principal>,
    /// This stream as a source of groups ([`crate::pipeline::coalesce`]).
    source: Source,
}

/// Valid single sends of one topic, to be proposed as one entry.
struct Group {
    /// The `seq` of each message, in the batch's order.
    seqs: Vec<u64>,
    /// Their encoded request bytes (what the stream holds for them).
    request_bytes: u64,
    /// Their size as `max-batch-bytes` counts it.
    bytes: usize,
    batch: SubmitBatch,
}

impl SendStreamDriver {
    /// Answers the requests of `requests` through `pipeline` until `stop` turns true.
    pub fn new(
        pipeline: Pipeline,
        requests: Streaming<pb::SendStreamRequest>,
        mut stop: watch::Receiver<bool>,
        principal: Principal,
    ) -> Self {
        let stopped = async move {
            while !*stop.borrow_and_update() {
                if stop.changed().await.is_err() {
                    return;
                }
            }
        };
        let max_bytes = pipeline.core().config.max_stream_inflight_bytes;
        let source = pipeline.core().proposals.new_source();
        Self {
            pipeline,
            requests,
            bytes_in_flight: 0,
            max_bytes,
            requests_done: false,
            failed: None,
            stopped: stopped.boxed(),
            in_flight: FuturesUnordered::new(),
            unanswered: 0,
            ready: VecDeque::new(),
            principal: Arc::new(principal),
            source,
        }
    }

    /// Answers at once the requests whose topic the stream's principal may not send to;
    /// returns the others.
    /// A user's entry is looked up again each time, so a deleted or changed user takes
    /// effect on streams it opened before.
    fn permitted(&mut self, requests: Vec<pb::SendStreamRequest>) -> Vec<pb::SendStreamRequest> {
        let core = self.pipeline.core();
        let node_id = core.node_id;
        let current = match &*self.principal {
            Principal::User(u) => match core.store.user_by_access_key(&u.access_key) {
                Some(now) if now == *u => Ok(None),
                Some(now) => Ok(Some(Principal::User(now))),
                None => Err(NodeError::Unauthenticated(format!(
                    "unknown access key '{}' (the user was deleted)",
                    u.access_key
                ))),
            },
            _ => Ok(None),
        };
        match current {
            Ok(Some(p)) => self.principal = Arc::new(p),
            Ok(None) => {}
            Err(e) => {
                let status = client_status(e, node_id);
                for req in requests {
                    self.ready.push_back(error_reply(req.seq, &status));
                }
                return Vec::new();
            }
        }
        let mut out = Vec::with_capacity(requests.len());
        for req in requests {
            let denied = topics(&req)
                .find_map(|topic| authorize(&self.principal, Action::Send { topic }).err());
            match denied {
                None => out.push(req),
                Some(e) => self
                    .ready
                    .push_back(error_reply(req.seq, &client_status(e, node_id))),
            }
        }
        out
    }

    /// Starts a batch request (`batch` set): one entry of its own, one answer.
    fn start_batch(&mut self, req: pb::SendStreamRequest) {
        let bytes = request_bytes(&req);
        self.unanswered += 1;
        self.bytes_in_flight += bytes;
        let (pipeline, source, principal) =
            (self.pipeline.clone(), self.source, self.principal.clone());
        self.in_flight.push(
            async move {
                let reply = send_batch(pipeline, source, req, &principal).await;
                (vec![reply], bytes)
            }
            .boxed(),
        );
    }

    /// Starts the sends of requests that arrived together (see the module docs).
    fn dispatch(&mut self, requests: Vec<pb::SendStreamRequest>) {
        let arrived = Instant::now();
        let mut requests = self.permitted(requests);
        // Collects (allocates) nothing when no batch arrived, as a rule.
        let batches: Vec<_> = requests.extract_if(.., |r| r.batch.is_some()).collect();
        for req in batches {
            self.start_batch(req);
        }
        if requests.is_empty() {
            return;
        }
        if !self.pipeline.core().is_leader() {
            self.unanswered += requests.len();
            for req in requests {
                let pipeline = self.pipeline.clone();
                let bytes = request_bytes(&req);
                self.bytes_in_flight += bytes;
                let principal = self.principal.clone();
                self.in_flight.push(
                    async move {
                        (
                            vec![send_one(pipeline, req, arrived, &principal).await],
                            bytes,
                        )
                    }
                    .boxed(),
                );
            }
            return;
        }
        for g in self.group(requests, arrived) {
            self.unanswered += g.seqs.len();
            self.bytes_in_flight += g.request_bytes;
            let pipeline = self.pipeline.clone();
            let bytes = g.request_bytes;
            let source = self.source;
            self.in_flight
                .push(async move { (send_group(pipeline, source, g).await, bytes) }.boxed());
        }
    }

    /// Validates each request alone (a refused one is answered at once and joins no group)
    /// and groups the valid ones by topic within the batch limits.
    fn group(&mut self, requests: Vec<pb::SendStreamRequest>, arrived: Instant) -> Vec<Group> {
        let core = self.pipeline.core();
        let limits = &core.config.store.limits;
        let max_count = limits.max_batch_messages.max(1) as usize;
        let max_bytes = usize::try_from(limits.max_batch_bytes).unwrap_or(usize::MAX);
        let mut groups: Vec<Group> = Vec::new();
        for req in requests {
            let req_bytes = request_bytes(&req);
            let single = req
                .message
                .ok_or_else(missing_message)
                .and_then(|m| send::batch_in(&self.pipeline, std::iter::once(m), arrived));
            let single = match single {
                Ok(single) => single,
                Err(e) => {
                    // As for `Send`: a refused request is not a send (no latency sample).
                    let status = client_status(e, core.node_id);
                    self.ready.push_back(error_reply(req.seq, &status));
                    continue;
                }
            };
            let size: usize = single.messages().iter().map(message_bytes).sum();
            let open = groups.iter_mut().rev().find(|g| {
                same_topic(&g.batch, &single)
                    && g.seqs.len() < max_count
                    && g.bytes + size <= max_bytes
            });
            match open {
                Some(g) => {
                    g.bytes += size;
                    g.request_bytes += req_bytes;
                    g.seqs.push(req.seq);
                    g.batch.join(single);
                }
                None => groups.push(Group {
                    seqs: vec![req.seq],
                    request_bytes: req_bytes,
                    bytes: size,
                    batch: single,
                }),
            }
        }
        groups
    }
}

/// True while a stream may take in one more request: it holds fewer than [`MAX_IN_FLIGHT`]
/// requests (answers waiting to leave included, so a refused request counts until its answer
/// is read) and fewer than `max_bytes` request bytes (one request always when it holds none).
fn may_take(held_requests: usize, held_bytes: u64, max_bytes: u64) -> bool {
    held_requests < MAX_IN_FLIGHT && (held_bytes < max_bytes || held_bytes == 0)
}

/// The topics a request sends to (`""` for a request without a message, refused later).
fn topics(req: &pb::SendStreamRequest) -> impl Iterator<Item = &str> {
    let batch = req.batch.iter().flat_map(|b| &b.messages);
    let message = match (&req.message, &req.batch) {
        (Some(m), _) => Some(m.topic.as_str()),
        (None, None) => Some(""),
        (None, Some(_)) => None,
    };
    message.into_iter().chain(batch.map(|m| m.topic.as_str()))
}

/// Bytes a request holds while it is in flight (its encoded size).
fn request_bytes(req: &pb::SendStreamRequest) -> u64 {
    prost::Message::encoded_len(req) as u64
}

impl Stream for SendStreamDriver {
    type Item = Result<pb::SendStreamReply, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if !this.requests_done && this.stopped.poll_unpin(cx).is_ready() {
            this.requests_done = true;
        }
        let mut arrived = Vec::new();
        let mut arrived_bytes = 0u64;
        while !this.requests_done
            && may_take(
                this.unanswered + this.ready.len() + arrived.len(),
                this.bytes_in_flight + arrived_bytes,
                this.max_bytes,
            )
        {
            match Pin::new(&mut this.requests).poll_next(cx) {
                Poll::Ready(Some(Ok(req))) => {
                    arrived_bytes += request_bytes(&req);
                    arrived.push(req);
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
        if !arrived.is_empty() {
            this.dispatch(arrived);
        }
        while let Poll::Ready(Some((replies, bytes))) = Pin::new(&mut this.in_flight).poll_next(cx)
        {
            this.unanswered -= replies.len().min(this.unanswered);
            this.bytes_in_flight -= bytes.min(this.bytes_in_flight);
            this.ready.extend(replies);
        }
        if let Some(reply) = this.ready.pop_front() {
            return Poll::Ready(Some(Ok(reply)));
        }
        if this.requests_done && this.in_flight.is_empty() {
            return Poll::Ready(this.failed.take().map(Err));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_bytes_held_bound_what_a_stream_takes_in() {
        assert!(may_take(0, 0, 1 << 20));
        assert!(
            !may_take(MAX_IN_FLIGHT, 0, 1 << 20),
            "answers not read yet count"
        );
        assert!(may_take(3, (1 << 20) - 1, 1 << 20));
        assert!(!may_take(3, 1 << 20, 1 << 20), "bytes in flight bound it");
        assert!(may_take(0, 0, 0), "one request always passes");
        let big = pb::SendStreamRequest {
            seq: 1,
            batch: None,
            message: Some(pb::Message {
                body: vec![0; 4096].into(),
                ..Default::default()
            }),
        };
        assert!(request_bytes(&big) > 4096);
        let invalid = pb::SendStreamRequest {
            seq: 2,
            message: None,
            batch: None,
        };
        assert!(
            request_bytes(&invalid) > 0,
            "an invalid request is not free"
        );
    }
}
