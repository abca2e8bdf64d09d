//! Writes, receives and acks run on the leader; a follower's RocketMQ service forwards the
//! request to the leader's MessagingService (mounted on every node's client port too), one
//! hop, so a leader change is invisible to RocketMQ clients.
//!
//! The forwarded call carries `x-raftmq-forwarded-by: <node id>`. A node that receives one
//! while not leading refuses it at the gRPC level with NOT_LEADER (it ran nothing), and the
//! follower tries again: a refused or unconnectable forward is retried until the send
//! timeout, as the leader changes. A forward that failed otherwise (broke on the way, timed
//! out) answers PROXY_TIMEOUT: its outcome is unknown, and the clients retry with the same
//! message id.
//!
//! With authentication on, the follower has authenticated and authorized the client before it
//! forwards; the forward is signed with the root credential every node holds
//! (`Authenticator::sign_internal`), so the leader accepts it as a call of a trusted node.

use std::future::Future;
use std::time::Duration;

use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::rocketmq::v2::messaging_service_client::MessagingServiceClient;
use raftmq_proto::FORWARDED_BY_KEY;
use rmq::Code;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::Request;

use super::status;
use super::RocketMqService;
use crate::core::NodeCore;
use crate::service::forward::is_connect_error;
use crate::service::forward::known_leader;
use crate::service::forward::refused_by_leaving_leader;

/// A MessagingService client of the leader.
pub type LeaderClient = MessagingServiceClient<Channel>;

/// `msg` as a forwarded request (header set, deadline the send timeout + 1 s).
pub fn request<T>(core: &NodeCore, msg: T) -> Request<T> {
    request_for(
        core,
        msg,
        core.config.send_timeout() + Duration::from_secs(1),
    )
}

/// `msg` as a forwarded request with its own deadline (long polls).
pub fn request_for<T>(core: &NodeCore, msg: T, timeout: Duration) -> Request<T> {
    let mut r = Request::new(msg);
    if let Ok(v) = core.node_id.to_string().parse() {
        r.metadata_mut().insert(FORWARDED_BY_KEY, v);
    }
    // This node authorized the caller already; it signs the forward as itself (root).
    core.auth.sign_internal(r.metadata_mut(), None);
    r.set_timeout(timeout);
    r
}

/// True when the leader never ran the forwarded call: it could not be reached, or it was no
/// longer the leader (or was stopping) and refused it.
fn retryable(s: &tonic::Status) -> bool {
    is_connect_error(s) || refused_by_leaving_leader(s)
}

/// Runs `local` if this node leads, else `remote` on the leader's client (see the module
/// docs); waits for a leader up to the send timeout.
pub async fn on_leader<T, L, LF, R, RF>(
    svc: &RocketMqService,
    local: L,
    mut remote: R,
) -> Result<T, rmq::Status>
where
    L: FnOnce(RocketMqService) -> LF,
    LF: Future<Output = Result<T, rmq::Status>>,
    R: FnMut(LeaderClient) -> RF,
    RF: Future<Output = Result<T, tonic::Status>>,
{
    let core = &svc.core;
    let deadline = Instant::now() + core.config.send_timeout();
    let mut local = Some(local);
    loop {
        if core.is_leader() {
            let run = local
                .take()
                .expect("on_leader runs local at most once: it returns");
            return run(svc.clone()).await;
        }
        if core.is_shutting_down() {
            return Err(status::status(
                Code::HaNotAvailable,
                format!("node {} is shutting down", core.node_id),
            ));
        }
        let Some((id, addr)) = known_leader(core, deadline).await else {
            return Err(status::status(
                Code::HaNotAvailable,
                format!(
                    "node {}: no leader within the send timeout ({} ms)",
                    core.node_id, core.config.send_timeout_ms
                ),
            ));
        };
        if id == core.node_id {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let max = usize::try_from(core.config.grpc_max_message_bytes).unwrap_or(usize::MAX);
        let channel = core
            .channel(&addr)
            .map_err(|e| status::status(Code::InternalServerError, e))?;
        let client = MessagingServiceClient::new(channel)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        core.metrics.forwarded.inc();
        match remote(client).await {
            Ok(t) => return Ok(t),
            Err(s) if retryable(&s) && Instant::now() < deadline => {
                tracing::debug!(leader = id, error = %s, "forward to the leader refused; retrying");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(s) => {
                // Unreached or refused: nothing ran. Anything else (the call broke on the way
                // or timed out): the leader may have run it, the outcome is unknown.
                let code = if retryable(&s) {
                    Code::HaNotAvailable
                } else {
                    Code::ProxyTimeout
                };
                return Err(status::status(
                    code,
                    format!(
                        "node {}: forwarding to leader {id} at {addr} failed: {}",
                        core.node_id,
                        s.message()
                    ),
                ));
            }
        }
    }
}
