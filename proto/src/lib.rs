//! raftmq's wire schema: the `.proto` files under `proto/raftmq/v1/` and the prost/tonic code
//! generated from them at build time (protox, so no `protoc` binary is needed).
//!
//! Two services, both in package `raftmq.v1`:
//! - [`v1::raft_mq_server::RaftMq`] / [`v1::raft_mq_client::RaftMqClient`]: the client API
//!   (send, pull, queries, consumer offsets, topic and cluster admin). Any node accepts every
//!   call; a follower forwards writes to the leader or answers with a leader hint in the
//!   [`ERROR_DETAIL_KEY`] trailer (an encoded [`v1::ErrorDetail`]).
//! - [`v1::raft_peer_server::RaftPeer`] / [`v1::raft_peer_client::RaftPeerClient`]: the Raft
//!   transport between peers. openraft's messages travel as opaque bytes (codec named in each
//!   request); every request names its cluster id and target node, which the server checks.
//!
//!
//! And the RocketMQ 5 protocol, vendored unchanged from Apache RocketMQ (`apache/rocketmq-apis`,
//! Apache-2.0; see `NOTICE`): [`rocketmq::v2::messaging_service_server::MessagingService`], the
//! gRPC service the official RocketMQ 5 clients speak.
//!
//! All use [`codec::StrictProstCodec`]: an undecodable message answers INVALID_ARGUMENT.
//! [`call_client::CallClient`] makes three calls with request types of our own that encode as
//! the generated ones: `SendBatch` and `SendStream` with messages behind an `Arc`
//! ([`shared::Shared`]: no copy per resend) and `StreamAppend` with AppendEntries requests
//! written straight into the frame.
//!
//! Invariant: field numbers are never reused; a breaking change gets a new package
//! (`raftmq.v2`) served beside the old one.

pub mod call_client;
pub mod codec;
pub mod header_cut;
pub mod shared;
pub mod signature;

/// Generated code of package `raftmq.v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("raftmq.v1");
}

/// Redacts the secret key, which must never reach a log.
impl std::fmt::Debug for v1::CreateUserReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateUserReply")
            .field("user", &self.user)
            .field("secret_key", &"<redacted>")
            .field("log_id", &self.log_id)
            .finish()
    }
}

/// The RocketMQ 5 protocol (package `apache.rocketmq.v2`), generated from the vendored
/// `proto/apache/rocketmq/v2/{definition,service}.proto`.
pub mod rocketmq {
    /// Generated code of package `apache.rocketmq.v2`.
    #[allow(clippy::all, missing_docs)]
    pub mod v2 {
        tonic::include_proto!("apache.rocketmq.v2");
    }
}

/// Binary metadata key of the [`v1::ErrorDetail`] attached to a failed call.
pub const ERROR_DETAIL_KEY: &str = "x-raftmq-error-bin";

/// The largest HTTP/2 frame our servers and channels accept (SETTINGS_MAX_FRAME_SIZE; HTTP/2's
/// default is 16 KiB). h2 writes one DATA frame per system call, so at the default an
/// AppendEntries of ~90 KiB (an entry of 4 x 64 single sends) took six `writev`s per
/// follower, and a pull answer of a megabyte 64.
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// Metadata key a follower adds when it forwards a write to the leader (value: its node id).
/// A call that carries it is never forwarded again.
pub const FORWARDED_BY_KEY: &str = "x-raftmq-forwarded-by";

/// Response header of a write a follower forwarded: the client address of the leader that
/// executed it, so a client that sent it to the follower can go to the leader next time.
pub const LEADER_ADDR_KEY: &str = "x-raftmq-leader-addr";

/// Reads the [`v1::ErrorDetail`] of a failed call, if the server attached one.
pub fn error_detail(status: &tonic::Status) -> Option<v1::ErrorDetail> {
    use prost::Message;
    let value = status.metadata().get_bin(ERROR_DETAIL_KEY)?;
    let bytes = value.to_bytes().ok()?;
    v1::ErrorDetail::decode(bytes).ok()
}

/// Attaches `detail` to `status` (as the [`ERROR_DETAIL_KEY`] trailer).
pub fn with_error_detail(mut status: tonic::Status, detail: &v1::ErrorDetail) -> tonic::Status {
    use prost::Message;
    let value = tonic::metadata::MetadataValue::from_bytes(&detail.encode_to_vec());
    status.metadata_mut().insert_bin(ERROR_DETAIL_KEY, value);
    status
}

/// The [`v1::SendError`] answering one message of a `SendStream`: the status `Send` would
/// have answered, with its [`v1::ErrorDetail`] trailer.
pub fn send_error(status: &tonic::Status) -> v1::SendError {
    v1::SendError {
        code: status.code() as i32,
        message: status.message().to_string(),
        detail: error_detail(status),
    }
}

/// The status a [`v1::SendError`] stands for (the inverse of [`send_error`]); an unknown code
/// reads as UNKNOWN.
pub fn send_error_status(e: v1::SendError) -> tonic::Status {
    let status = tonic::Status::new(tonic::Code::from_i32(e.code), e.message);
    match &e.detail {
        Some(d) => with_error_detail(status, d),
        None => status,
    }
}

/// The answer of a node that will not execute a write because it is not the leader and did
/// not forward it: UNAVAILABLE plus an [`v1::ErrorDetail`] with reason NOT_LEADER, the leader
/// it knows (if any) and `not_applied = true`, so clients resend to the leader safely.
pub fn not_leader_status(node_id: u64, leader_id: Option<u64>, leader_addr: &str) -> tonic::Status {
    let msg = match leader_id {
        Some(id) => {
            format!("node {node_id} is not the leader; the leader is node {id} at {leader_addr}")
        }
        None => format!("node {node_id} is not the leader and knows no leader yet"),
    };
    let detail = v1::ErrorDetail {
        reason: v1::ErrorReason::NotLeader as i32,
        leader_id,
        leader_addr: leader_addr.to_string(),
        not_applied: true,
    };
    with_error_detail(tonic::Status::unavailable(msg), &detail)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::rocketmq::v2 as rmq;
    use super::*;

    #[test]
    fn send_error_round_trips_to_the_same_status() {
        let s = not_leader_status(2, Some(1), "127.0.0.1:9101");
        let back = send_error_status(send_error(&s));
        assert_eq!(back.code(), tonic::Code::Unavailable);
        assert_eq!(back.message(), s.message());
        assert_eq!(error_detail(&back), error_detail(&s));
        let plain = send_error_status(send_error(&tonic::Status::internal("boom")));
        assert_eq!(plain.code(), tonic::Code::Internal);
        assert!(error_detail(&plain).is_none());
        let odd = send_error_status(v1::SendError {
            code: 999,
            message: "?".into(),
            detail: None,
        });
        assert_eq!(odd.code(), tonic::Code::Unknown);
    }

    #[test]
    fn error_detail_round_trips_through_status_metadata() {
        let detail = v1::ErrorDetail {
            reason: v1::ErrorReason::NotLeader as i32,
            leader_id: Some(3),
            leader_addr: "127.0.0.1:9103".into(),
            not_applied: true,
        };
        let status = with_error_detail(tonic::Status::unavailable("not leader"), &detail);
        assert_eq!(error_detail(&status), Some(detail));
        assert_eq!(error_detail(&tonic::Status::internal("x")), None);

        let s = not_leader_status(1, Some(3), "h:9203");
        assert_eq!(s.code(), tonic::Code::Unavailable);
        let d = error_detail(&s).expect("detail attached");
        assert_eq!(
            (d.leader_id, d.leader_addr.as_str(), d.not_applied),
            (Some(3), "h:9203", true)
        );
    }

    #[test]
    fn rocketmq_messages_round_trip() {
        let req = rmq::QueryRouteRequest {
            topic: Some(rmq::Resource {
                resource_namespace: String::new(),
                name: "orders".into(),
            }),
            endpoints: None,
        };
        let bytes = req.encode_to_vec();
        let back = rmq::QueryRouteRequest::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, req);
        assert_eq!(
            rmq::Code::from_str_name("TOPIC_NOT_FOUND"),
            Some(rmq::Code::TopicNotFound)
        );
    }

    #[test]
    fn create_user_reply_debug_redacts_the_secret() {
        let r = v1::CreateUserReply {
            user: None,
            secret_key: "s3cr3t-value".into(),
            log_id: None,
        };
        let text = format!("{r:?}");
        assert!(
            !text.contains("s3cr3t-value") && text.contains("<redacted>"),
            "{text}"
        );
    }
}
