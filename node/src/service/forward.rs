//! Forwarding a write from a follower to the leader (one hop).
//!
//! The forwarded call carries `x-raftmq-forwarded-by: <node id>` and is never forwarded again:
//! a node that receives it while not being the leader answers NOT_LEADER with its hint. When
//! no leader is known the follower waits for one (bounded by the send timeout). A forward
//! that cannot connect (the request was not sent) means the known leader is most likely dead:
//! the follower waits, within the same deadline, for another leader and forwards there (the
//! same one is tried again every [`SAME_LEADER_RETRY`]), so a client does not bounce between
//! a follower and a dead leader through an election. A NOT_LEADER or SHUTTING_DOWN answer
//! with `not_applied` (the node stepped down, or is stopping and still answers on the
//! connections it has) is handled the same way: the request ran nowhere. If this node is
//! elected meanwhile it answers NOT_LEADER naming itself; at the deadline, FORWARD_FAILED
//! with `not_applied = true` (or the last refusal, passed on). Any other failure is passed
//! through unchanged (the leader's code and detail trailer). A forwarded success carries the
//! leader's client address (`x-raftmq-leader-addr`). With authentication on, the forwarded
//! call is signed by this node and names the caller (the [`Principal`] the handler filed in
//! the request's extensions), so the leader authorizes the same caller (see [`crate::auth`]).

use std::future::Future;
use std::time::Duration;

use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_proto::v1::ErrorReason;
use raftmq_proto::FORWARDED_BY_KEY;
use raftmq_proto::LEADER_ADDR_KEY;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::Code;
use tonic::Request;
use tonic::Response;
use tonic::Status;

use crate::auth::Principal;
use crate::core::NodeCore;
use crate::error::to_status;
use crate::error::NodeError;

/// True when `status` proves the request never reached the server (TCP connect failed).
pub fn is_connect_error(status: &Status) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
            ) {
                return true;
            }
        }
        if e.to_string().contains("tcp connect error") {
            return true;
        }
        source = e.source();
    }
    false
}

/// A status received from the leader, rebuilt for our own answer: code, message and the
/// error detail trailer (transport headers dropped).
fn relay(status: Status) -> Status {
    let out = Status::new(status.code(), status.message().to_string());
    match raftmq_proto::error_detail(&status) {
        Some(d) => raftmq_proto::with_error_detail(out, &d),
        None => out,
    }
}

/// How often a follower tries again a leader it could not connect to while no other leader is
/// known.
pub const SAME_LEADER_RETRY: Duration = Duration::from_millis(100);

/// Waits until some leader is known (or `deadline`): `(leader id, its client address)`.
pub async fn known_leader(core: &NodeCore, deadline: Instant) -> Option<(u64, String)> {
    other_leader(core, None, deadline).await
}

/// Waits until a leader is known that is not `gone.0`, or is `gone.0` again at or after
/// `gone.1` (or `deadline`): `(leader id, its client address)`.
async fn other_leader(
    core: &NodeCore,
    gone: Option<(u64, Instant)>,
    deadline: Instant,
) -> Option<(u64, String)> {
    loop {
        if let (Some(id), addr) = core.leader() {
            let usable = match gone {
                Some((dead, retry_at)) => id != dead || Instant::now() >= retry_at,
                None => true,
            };
            if usable && !addr.is_empty() {
                return Some((id, addr));
            }
        }
        if Instant::now() >= deadline || core.is_shutting_down() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The reason of a refusal that ran nothing (`not_applied` in its error detail), if it is one.
fn unsent_reason(status: &Status) -> Option<ErrorReason> {
    raftmq_proto::error_detail(status)
        .filter(|d| d.not_applied)
        .and_then(|d| ErrorReason::try_from(d.reason).ok())
}

/// True for NOT_LEADER with `not_applied`: the request ran nowhere (when this node is the
/// leader by now, it was elected while the request waited and should run it itself).
pub fn not_leader_unsent(status: &Status) -> bool {
    unsent_reason(status) == Some(ErrorReason::NotLeader)
}

/// True for NOT_LEADER or SHUTTING_DOWN with `not_applied`: the node a write was forwarded
/// to ran nothing and will not lead any more (it stepped down, or it is stopping), so the
/// write can go to the next leader.
pub fn refused_by_leaving_leader(status: &Status) -> bool {
    matches!(
        unsent_reason(status),
        Some(ErrorReason::NotLeader | ErrorReason::ShuttingDown)
    )
}

/// True if the request was already forwarded by another node.
pub fn was_forwarded<T>(req: &Request<T>) -> bool {
    req.metadata().get(FORWARDED_BY_KEY).is_some()
}

/// Forwards `req` to the leader with `call`; see the module docs.
pub async fn forward<Req, Resp, F, Fut>(
    core: &NodeCore,
    req: Request<Req>,
    call: F,
) -> Result<Response<Resp>, Status>
where
    Req: Clone,
    F: Fn(RaftMqClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    if was_forwarded(&req) || core.is_shutting_down() {
        return Err(not_leader(core));
    }
    let deadline = Instant::now() + core.config.send_timeout();
    let caller = req.extensions().get::<Principal>().cloned();
    let req = req.into_inner();
    let mut gone: Option<(u64, Instant)> = None;
    // The last refusal of a leaving leader, passed on if no other leader comes in time.
    let mut refusal: Option<Status> = None;
    loop {
        let Some((leader_id, addr)) = other_leader(core, gone, deadline).await else {
            // The leader that failed us is still the only one known: say how it failed.
            let (known, known_addr) = core.leader();
            let stuck = gone.is_some_and(|(dead, _)| known == Some(dead));
            return Err(match (known, refusal) {
                (Some(_), Some(refused)) if stuck => relay(refused),
                (Some(dead), None) if stuck => forward_failed(
                    core,
                    dead,
                    known_addr,
                    "the leader stayed unreachable until the send timeout".into(),
                ),
                _ => not_leader(core),
            });
        };
        if leader_id == core.node_id {
            return Err(not_leader(core));
        }
        match forward_once(core, leader_id, &addr, req.clone(), caller.as_ref(), &call).await {
            // Not sent: wait for a new leader (or retry this one a little later).
            Err(s) if is_connect_error(&s) && Instant::now() < deadline => {
                tracing::debug!(leader = leader_id, addr = %addr, error = %s,
                    "leader unreachable; waiting for a new leader");
                gone = Some((leader_id, Instant::now() + SAME_LEADER_RETRY));
                refusal = None;
            }
            Err(s) if is_connect_error(&s) => {
                return Err(forward_failed(core, leader_id, addr, s.to_string()))
            }
            // Refused, ran nowhere: the node stepped down, or is shutting down and answers
            // on the connections it still has, before our view of the leader caught up.
            Err(s) if refused_by_leaving_leader(&s) && Instant::now() < deadline => {
                tracing::debug!(leader = leader_id, addr = %addr, answer = %s.message(),
                    "the leader refused the forward; waiting for the new one");
                gone = Some((leader_id, Instant::now() + SAME_LEADER_RETRY));
                refusal = Some(s);
            }
            Err(s) => return Err(relay(s)),
            Ok(out) => return Ok(out),
        }
    }
}

fn not_leader(core: &NodeCore) -> Status {
    let (leader_id, leader_addr) = core.leader();
    to_status(
        NodeError::NotLeader {
            leader_id,
            leader_addr,
        },
        core.node_id,
    )
}

fn forward_failed(core: &NodeCore, leader_id: u64, leader_addr: String, reason: String) -> Status {
    to_status(
        NodeError::ForwardFailed {
            leader_id: Some(leader_id),
            leader_addr,
            reason,
        },
        core.node_id,
    )
}

/// One forwarded call to `leader_id` at `addr`. A connect error is returned as it is (the
/// caller decides); a success carries the leader's address.
async fn forward_once<Req, Resp, F, Fut>(
    core: &NodeCore,
    leader_id: u64,
    addr: &str,
    req: Req,
    caller: Option<&Principal>,
    call: &F,
) -> Result<Response<Resp>, Status>
where
    F: Fn(RaftMqClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let channel = core
        .channel(addr)
        .map_err(|e| forward_failed(core, leader_id, addr.to_string(), e))?;
    let client = RaftMqClient::new(channel)
        .max_decoding_message_size(core.config.grpc_max_message_bytes as usize)
        .max_encoding_message_size(core.config.grpc_max_message_bytes as usize);
    let mut fwd = Request::new(req);
    fwd.metadata_mut().insert(
        FORWARDED_BY_KEY,
        core.node_id
            .to_string()
            .parse()
            .map_err(|_| Status::internal("node id is not a valid header value"))?,
    );
    core.auth.sign_internal(fwd.metadata_mut(), caller);
    fwd.set_timeout(core.config.send_timeout() + Duration::from_secs(1));
    tracing::debug!(leader = leader_id, addr = %addr, "forwarding write to the leader");
    core.metrics.forwarded.inc();
    let resp = call(client, fwd).await?;
    let mut out = Response::new(resp.into_inner());
    if let Ok(v) = addr.parse() {
        out.metadata_mut().insert(LEADER_ADDR_KEY, v);
    }
    Ok(out)
}
