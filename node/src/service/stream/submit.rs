//! What a SendStream does with each request or group it took: submit through the pipeline
//! (a single message relayed to the leader when this node is not it) and build the replies.

use raftmq_proto::v1 as pb;
use tokio::time::Instant;
use tonic::Request;
use tonic::Status;

use super::Group;
use super::Replies;
use crate::auth::Principal;
use crate::core::NodeCore;
use crate::error::client_status;
use crate::error::NodeError;
use crate::pipeline::GroupOutcome;
use crate::pipeline::Pipeline;
use crate::pipeline::Sent;
use crate::pipeline::Source;
use crate::pipeline::SubmitBatch;
use crate::service::convert;
use crate::service::forward::forward;
use crate::service::send;

pub(super) fn missing_message() -> NodeError {
    NodeError::InvalidArgument("message is missing".into())
}

pub(super) fn same_topic(a: &SubmitBatch, b: &SubmitBatch) -> bool {
    fn topic(x: &SubmitBatch) -> Option<&str> {
        x.messages().first().map(|m| m.topic.as_str())
    }
    topic(a) == topic(b)
}

pub(super) fn error_reply(seq: u64, status: &Status) -> pb::SendStreamReply {
    pb::SendStreamReply {
        seq,
        outcome: Some(pb::send_stream_reply::Outcome::Error(
            raftmq_proto::send_error(status),
        )),
        leader_addr: String::new(),
    }
}

fn batch_reply(seq: u64, results: Vec<pb::SendResult>) -> pb::SendStreamReply {
    pb::SendStreamReply {
        seq,
        outcome: Some(pb::send_stream_reply::Outcome::Batch(pb::SendBatchReply {
            results,
        })),
        leader_addr: String::new(),
    }
}

pub(super) fn result_reply(seq: u64, r: pb::SendResult) -> pb::SendStreamReply {
    pb::SendStreamReply {
        seq,
        outcome: Some(pb::send_stream_reply::Outcome::Result(r)),
        leader_addr: String::new(),
    }
}

/// The answer to a message submitted alone.
pub(super) fn single_reply(
    seq: u64,
    res: Result<Sent, NodeError>,
    node_id: u64,
) -> pb::SendStreamReply {
    match res {
        Ok(sent) => match sent.acks.first() {
            Some(a) => result_reply(seq, convert::ack_out(a, &sent.log_id)),
            None => error_reply(seq, &Status::internal("the send produced no result")),
        },
        Err(e) => error_reply(seq, &client_status(e, node_id)),
    }
}

/// One message, answered as `Send` answers it: stored alone on the leader, relayed by a
/// follower.
pub(super) async fn send_one(
    pipeline: Pipeline,
    req: pb::SendStreamRequest,
    arrived: Instant,
    principal: &Principal,
) -> pb::SendStreamReply {
    let core = pipeline.core();
    if !core.is_leader() {
        if let Some(reply) = relayed(core, req.clone(), principal).await {
            return reply;
        }
        // This node was elected while the message waited for a new leader; nothing was sent.
    }
    let res = match req.message.ok_or_else(missing_message) {
        Ok(m) => match send::batch_in(&pipeline, std::iter::once(m), arrived) {
            Ok(single) => pipeline.submit(single).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    single_reply(req.seq, res, core.node_id)
}

/// A batch request (`batch` set), answered as `SendBatch` answers it: one entry on the leader,
/// from this stream as its `source` of groups; relayed as a unary `SendBatch` by a follower.
pub(super) async fn send_batch(
    pipeline: Pipeline,
    source: Source,
    req: pb::SendStreamRequest,
    arrived: Instant,
    principal: &Principal,
) -> pb::SendStreamReply {
    let core = pipeline.core();
    let seq = req.seq;
    let batch = match (req.message, req.batch) {
        (None, Some(batch)) => batch,
        _ => {
            let e = NodeError::InvalidArgument(
                "a send stream request carries either `message` or `batch`, not both".into(),
            );
            return error_reply(seq, &client_status(e, core.node_id));
        }
    };
    if !core.is_leader() {
        // Kept for the case below (as `send_one` keeps a single message).
        let mut fwd = Request::new(batch.clone());
        // The leader authorizes the stream's caller again (see `crate::auth`).
        fwd.extensions_mut().insert(principal.clone());
        match forward(core, fwd, |mut c, r| async move { c.send_batch(r).await }).await {
            Ok(r) => {
                let leader = leader_addr(&r);
                return pb::SendStreamReply {
                    leader_addr: leader,
                    ..batch_reply(seq, r.into_inner().results)
                };
            }
            Err(status)
                if core.is_leader() && crate::service::forward::not_leader_unsent(&status) => {}
            Err(status) => return error_reply(seq, &status),
        }
        // This node was elected while the batch waited for a new leader; nothing was sent.
    }
    stored_batch(pipeline, source, seq, batch, arrived).await
}

/// A batch stored by this node, the leader.
async fn stored_batch(
    pipeline: Pipeline,
    source: Source,
    seq: u64,
    batch: pb::SendBatchRequest,
    arrived: Instant,
) -> pb::SendStreamReply {
    let res = match send::batch_in(&pipeline, batch.messages, arrived) {
        Ok(b) => pipeline.submit_shared(source, b).await,
        Err(e) => Err(e),
    };
    match res {
        Ok(sent) => batch_reply(seq, send::results_out(&sent)),
        Err(e) => error_reply(seq, &client_status(e, pipeline.core().node_id)),
    }
}

/// The leader's client address a forwarded call's answer names.
fn leader_addr<T>(r: &tonic::Response<T>) -> String {
    r.metadata()
        .get(raftmq_proto::LEADER_ADDR_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A follower's answer: the message relayed to the leader as a unary `Send`; `None` when this
/// node became the leader meanwhile and the message was sent nowhere (submit it here).
pub(super) async fn relayed(
    core: &NodeCore,
    req: pb::SendStreamRequest,
    principal: &Principal,
) -> Option<pb::SendStreamReply> {
    let seq = req.seq;
    let mut fwd = Request::new(pb::SendRequest {
        message: req.message,
    });
    // The leader authorizes the stream's caller again (see `crate::auth`).
    fwd.extensions_mut().insert(principal.clone());
    match forward(core, fwd, |mut c, r| async move { c.send(r).await }).await {
        Ok(r) => {
            let leader = leader_addr(&r);
            Some(match r.into_inner().result {
                Some(result) => pb::SendStreamReply {
                    leader_addr: leader,
                    ..result_reply(seq, result)
                },
                None => error_reply(seq, &Status::internal("the send produced no result")),
            })
        }
        Err(status) if core.is_leader() && crate::service::forward::not_leader_unsent(&status) => {
            None
        }
        Err(status) => Some(error_reply(seq, &status)),
    }
}

/// A group as one entry; one answer per message.
pub(super) async fn send_group(pipeline: Pipeline, source: Source, g: Group) -> Replies {
    let node_id = pipeline.core().node_id;
    match pipeline.submit_group(source, g.batch).await {
        GroupOutcome::Stored(sent) => g
            .seqs
            .iter()
            .zip(&sent.acks)
            .map(|(seq, a)| result_reply(*seq, convert::ack_out(a, &sent.log_id)))
            .collect(),
        GroupOutcome::OneByOne(results) => g
            .seqs
            .iter()
            .zip(results)
            .map(|(seq, res)| single_reply(*seq, res, node_id))
            .collect(),
        GroupOutcome::Unknown(e) => {
            let status = client_status(e, node_id);
            g.seqs
                .iter()
                .map(|seq| error_reply(*seq, &status))
                .collect()
        }
    }
}
