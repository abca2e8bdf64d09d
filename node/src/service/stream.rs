//! `SendStream`: pipelined single sends on one gRPC stream.
//!
//! A unary `Send` costs an HTTP/2 stream of its own (headers both ways, a server task, a
//! client-side buffer hop); with many sends in flight that per-call cost, not Raft, bounds a
//! producer. On a stream each message is one frame, answered on its own by `seq`.
//!
//! The response stream drives the work: polling it takes in requests while fewer than
//! [`MAX_IN_FLIGHT`] are unanswered and runs their sends concurrently in the stream's task.
//! A client that stops reading answers therefore stops the server reading requests, and
//! HTTP/2 flow control pushes back on the client. When the node stops, a stream takes no
//! more requests, answers those in flight and ends, so the client reconnects elsewhere.
//!
//! **Group proposal.** On the leader, the valid messages of one topic that arrived together
//! (in one poll) share one Raft entry, within `max-batch-messages` and `max-batch-bytes`:
//! every entry costs the same fixed Raft work (a log record, replication to each follower,
//! an apply on every node) whatever it holds. Each message keeps the answer it would get
//! alone:
//! - a message that fails validation is answered alone and joins no group;
//! - a group that stored nothing (refused before the proposal, or rejected as a whole by
//!   apply, e.g. the topic was deleted meanwhile) is sent again message by message, so each
//!   gets its own verdict;
//! - a group whose outcome is unknown (proposed, then a timeout or a leader change) answers
//!   that to each of its messages: the entry commits for all of them or for none.
//!
//! On a follower every message goes through `Send`'s handler, which forwards it; the answer
//! then names the leader (`leader_addr`), so the client moves its sends there.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::FutureExt;
use futures::Stream;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_server::RaftMq;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Request;
use tonic::Status;
use tonic::Streaming;

use super::send;
use super::ClientService;
use crate::error::NodeError;

/// Most unanswered sends of one stream; further requests wait in the transport.
pub const MAX_IN_FLIGHT: usize = 1024;

type Replies = Vec<pb::SendStreamReply>;

/// The answer stream of one `SendStream` call.
pub struct SendStreamDriver {
    svc: ClientService,
    requests: Streaming<pb::SendStreamRequest>,
    requests_done: bool,
    /// Why the request side failed; the answer stream ends with it once in-flight sends
    /// are answered.
    failed: Option<Status>,
    /// Resolves when the node stops.
    stopped: BoxFuture<'static, ()>,
    /// Sends (single or grouped) under way.
    in_flight: FuturesUnordered<BoxFuture<'static, Replies>>,
    /// Messages taken in and not yet answered.
    unanswered: usize,
    /// Answers ready to go out.
    ready: VecDeque<pb::SendStreamReply>,
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
            failed: None,
            stopped: stopped.boxed(),
            in_flight: FuturesUnordered::new(),
            unanswered: 0,
            ready: VecDeque::new(),
        }
    }

    /// Starts the sends of requests that arrived together (see the module docs).
    fn dispatch(&mut self, arrived: Vec<pb::SendStreamRequest>) {
        if arrived.len() == 1 || !self.svc.core.is_leader() {
            self.unanswered += arrived.len();
            for req in arrived {
                let svc = self.svc.clone();
                self.in_flight
                    .push(async move { vec![send_one(svc, req).await] }.boxed());
            }
            return;
        }
        let core = &self.svc.core;
        let max_count = core.config.max_batch_messages.max(1) as usize;
        let max_bytes = usize::try_from(core.config.max_batch_bytes).unwrap_or(usize::MAX);
        let mut groups: Vec<Group> = Vec::new();
        for req in arrived {
            let valid = req
                .message
                .ok_or_else(|| NodeError::InvalidArgument("message is missing".into()))
                .and_then(|m| send::prepare(core, vec![m]))
                .and_then(|mut v| {
                    v.pop()
                        .ok_or_else(|| NodeError::Internal("validation lost the message".into()))
                });
            let (m, wanted) = match valid {
                Ok(one) => one,
                Err(e) => {
                    // As for `Send`: a refused request is not a send (no latency sample).
                    self.ready
                        .push_back(error_reply(req.seq, &self.svc.status(e)));
                    continue;
                }
            };
            let size = send::message_bytes(&m);
            let open = groups.iter_mut().rev().find(|g| {
                g.topic == m.topic && g.items.len() < max_count && g.bytes + size <= max_bytes
            });
            match open {
                Some(g) => {
                    g.bytes += size;
                    g.items.push((req.seq, m, wanted));
                }
                None => groups.push(Group {
                    topic: m.topic.clone(),
                    bytes: size,
                    items: vec![(req.seq, m, wanted)],
                }),
            }
        }
        for g in groups {
            self.unanswered += g.items.len();
            let svc = self.svc.clone();
            self.in_flight.push(send_group(svc, g.items).boxed());
        }
    }
}

/// Valid messages of one topic proposed as one entry.
struct Group {
    topic: String,
    bytes: usize,
    items: Vec<(u64, Message, Option<QueueId>)>,
}

fn error_reply(seq: u64, status: &Status) -> pb::SendStreamReply {
    pb::SendStreamReply {
        seq,
        outcome: Some(pb::send_stream_reply::Outcome::Error(
            raftmq_proto::send_error(status),
        )),
        leader_addr: String::new(),
    }
}

fn result_reply(seq: u64, r: pb::SendResult) -> pb::SendStreamReply {
    pb::SendStreamReply {
        seq,
        outcome: Some(pb::send_stream_reply::Outcome::Result(r)),
        leader_addr: String::new(),
    }
}

/// One message, answered as `Send` answers it.
async fn send_one(svc: ClientService, req: pb::SendStreamRequest) -> pb::SendStreamReply {
    let seq = req.seq;
    let res = svc
        .send(Request::new(pb::SendRequest {
            message: req.message,
        }))
        .await;
    match res {
        Ok(r) => {
            let leader = r
                .metadata()
                .get(raftmq_proto::LEADER_ADDR_KEY)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            match r.into_inner().result {
                Some(result) => pb::SendStreamReply {
                    leader_addr: leader,
                    ..result_reply(seq, result)
                },
                None => error_reply(seq, &Status::internal("the send produced no result")),
            }
        }
        Err(status) => error_reply(seq, &status),
    }
}

/// Validated messages of one topic as one entry; one answer per message.
async fn send_group(svc: ClientService, items: Vec<(u64, Message, Option<QueueId>)>) -> Replies {
    let core = &svc.core;
    let start = Instant::now();
    let deadline = start + core.config.send_timeout();
    let batch: Vec<(Message, Option<QueueId>)> =
        items.iter().map(|(_, m, q)| (m.clone(), *q)).collect();
    match send::send_batch(core, batch, deadline).await {
        Ok(results) => {
            let elapsed = start.elapsed();
            let bytes: usize = items.iter().map(|(_, m, _)| m.body.len()).sum();
            core.metrics.record_in(items.len(), bytes);
            items
                .iter()
                .zip(results)
                .map(|((seq, _, _), r)| {
                    core.metrics.record_send(elapsed, true);
                    result_reply(*seq, r)
                })
                .collect()
        }
        Err(e) if e.stored_nothing() => {
            tracing::debug!(error = %e, messages = items.len(), "group send stored nothing; sending its messages one by one");
            let one_by_one = items.into_iter().map(|(seq, m, q)| {
                let svc = svc.clone();
                async move {
                    match svc.send_prepared(vec![(m, q)], start).await {
                        Ok(mut r) => match r.pop() {
                            Some(r) => result_reply(seq, r),
                            None => error_reply(seq, &Status::internal("no result")),
                        },
                        Err(status) => error_reply(seq, &status),
                    }
                }
            });
            futures::future::join_all(one_by_one).await
        }
        Err(e) => {
            let status = svc.status(e);
            items
                .iter()
                .map(|(seq, _, _)| {
                    core.metrics.record_send(start.elapsed(), false);
                    error_reply(*seq, &status)
                })
                .collect()
        }
    }
}

impl Stream for SendStreamDriver {
    type Item = Result<pb::SendStreamReply, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if !this.requests_done && this.stopped.poll_unpin(cx).is_ready() {
            this.requests_done = true;
        }
        let mut arrived = Vec::new();
        while !this.requests_done && this.unanswered + arrived.len() < MAX_IN_FLIGHT {
            match Pin::new(&mut this.requests).poll_next(cx) {
                Poll::Ready(Some(Ok(req))) => arrived.push(req),
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
        while let Poll::Ready(Some(replies)) = Pin::new(&mut this.in_flight).poll_next(cx) {
            this.unanswered -= replies.len().min(this.unanswered);
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
