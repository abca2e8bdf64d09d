//! Forwarding a write from a follower to the leader (one hop).
//!
//! The forwarded call carries `x-raftmq-forwarded-by: <node id>` and is never forwarded again:
//! a node that receives it while not being the leader answers NOT_LEADER with its hint. When
//! no leader is known the follower waits for one (bounded by the send timeout). A forward
//! that cannot connect answers FORWARD_FAILED with `not_applied = true` (nothing was sent);
//! any other failure is passed through unchanged (the leader's code and detail trailer). A
//! forwarded success carries the leader's client address (`x-raftmq-leader-addr`).

use std::future::Future;
use std::time::Duration;

use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_proto::FORWARDED_BY_KEY;
use raftmq_proto::LEADER_ADDR_KEY;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::Code;
use tonic::Request;
use tonic::Response;
use tonic::Status;

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

/// Waits until some leader is known (or `deadline`): `(leader id, its client address)`.
pub async fn known_leader(core: &NodeCore, deadline: Instant) -> Option<(u64, String)> {
    loop {
        if let (Some(id), addr) = core.leader() {
            if !addr.is_empty() {
                return Some((id, addr));
            }
        }
        if Instant::now() >= deadline || core.is_shutting_down() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    F: FnOnce(RaftMqClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let node_id = core.node_id;
    let not_leader = |core: &NodeCore| {
        let (leader_id, leader_addr) = core.leader();
        to_status(
            NodeError::NotLeader {
                leader_id,
                leader_addr,
            },
            node_id,
        )
    };
    if was_forwarded(&req) || core.is_shutting_down() {
        return Err(not_leader(core));
    }
    let deadline = Instant::now() + core.config.send_timeout();
    let Some((leader_id, addr)) = known_leader(core, deadline).await else {
        return Err(not_leader(core));
    };
    if leader_id == node_id {
        return Err(not_leader(core));
    }
    let failed = |reason: String| {
        to_status(
            NodeError::ForwardFailed {
                leader_id: Some(leader_id),
                leader_addr: addr.clone(),
                reason,
            },
            node_id,
        )
    };
    let channel = core.channel(&addr).map_err(failed)?;
    let client = RaftMqClient::new(channel)
        .max_decoding_message_size(core.config.grpc_max_message_bytes as usize)
        .max_encoding_message_size(core.config.grpc_max_message_bytes as usize);
    let mut fwd = Request::new(req.into_inner());
    fwd.metadata_mut().insert(
        FORWARDED_BY_KEY,
        node_id
            .to_string()
            .parse()
            .map_err(|_| Status::internal("node id is not a valid header value"))?,
    );
    fwd.set_timeout(core.config.send_timeout() + Duration::from_secs(1));
    tracing::debug!(leader = leader_id, addr = %addr, "forwarding write to the leader");
    core.metrics.forwarded.inc();
    match call(client, fwd).await {
        Ok(resp) => {
            let mut out = Response::new(resp.into_inner());
            if let Ok(v) = addr.parse() {
                out.metadata_mut().insert(LEADER_ADDR_KEY, v);
            }
            Ok(out)
        }
        Err(s) if is_connect_error(&s) => Err(failed(s.to_string())),
        Err(s) => Err(relay(s)),
    }
}
