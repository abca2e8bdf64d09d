//! What a SendStream does with each request or group it took: submit through the pipeline
//! (a single message relayed to the leader when this node is not it) and build the replies.

use std::future::Future;

use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use tokio::time::Instant;
use tonic::transport::Channel;
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
/// from this stream as its `source` of groups (as a unary `SendBatch` from its connection);
/// relayed as a unary `SendBatch` by a follower.
pub(super) async fn send_batch(
    pipeline: Pipeline,
    source: Source,
    req: pb::SendStreamRequest,
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
        // The batch is kept for the case below (as `send_one` keeps a single message).
        let call = |mut c: RaftMqClient<Channel>, r| async move { c.send_batch(r).await };
        match relay(core, batch.clone(), principal, call).await {
            Some(Ok((reply, leader))) => {
                return pb::SendStreamReply {
                    leader_addr: leader,
                    ..batch_reply(seq, reply.results)
                }
            }
            Some(Err(status)) => return error_reply(seq, &status),
            // This node was elected while the batch waited for a new leader; nothing was sent.
            None => {}
        }
    }
    match send::send_messages(&pipeline, source, batch.messages).await {
        Ok(results) => batch_reply(seq, results),
        Err(e) => error_reply(seq, &client_status(e, core.node_id)),
    }
}

/// Relays `req` to the leader with `call`, on behalf of the stream's caller: the leader's
/// answer with its client address, or the failure; `None` when this node became the leader
/// meanwhile and the request was sent nowhere (store it here).
async fn relay<Req, Resp, F, Fut>(
    core: &NodeCore,
    req: Req,
    principal: &Principal,
    call: F,
) -> Option<Result<(Resp, String), Status>>
where
    Req: Clone,
    F: Fn(RaftMqClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let mut fwd = Request::new(req);
    // The leader authorizes the stream's caller again (see `crate::auth`).
    fwd.extensions_mut().insert(principal.clone());
    match forward(core, fwd, call).await {
        Ok(r) => {
            let leader = r
                .metadata()
                .get(raftmq_proto::LEADER_ADDR_KEY)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            Some(Ok((r.into_inner(), leader)))
        }
        Err(status) if core.is_leader() && crate::service::forward::not_leader_unsent(&status) => {
            None
        }
        Err(status) => Some(Err(status)),
    }
}

/// A follower's answer: the message relayed to the leader as a unary `Send`; `None` when this
/// node became the leader meanwhile and the message was sent nowhere (submit it here).
pub(super) async fn relayed(
    core: &NodeCore,
    req: pb::SendStreamRequest,
    principal: &Principal,
) -> Option<pb::SendStreamReply> {
    let seq = req.seq;
    let single = pb::SendRequest {
        message: req.message,
    };
    let call = |mut c: RaftMqClient<Channel>, r| async move { c.send(r).await };
    Some(match relay(core, single, principal, call).await? {
        Ok((
            pb::SendReply {
                result: Some(result),
            },
            leader,
        )) => pb::SendStreamReply {
            leader_addr: leader,
            ..result_reply(seq, result)
        },
        Ok(_) => error_reply(seq, &Status::internal("the send produced no result")),
        Err(status) => error_reply(seq, &status),
    })
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
