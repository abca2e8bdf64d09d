//! [`NodeError`]: every way a client call can fail, and [`to_status`], the one function that
//! maps them to `tonic::Status` codes (plus the `x-raftmq-error-bin` [`ErrorDetail`] trailer).
//!
//! Status codes (the wire contract `raftmq_client` relies on):
//!
//! | error | code | detail reason | not_applied |
//! |---|---|---|---|
//! | bad argument (names, sizes, ids, batch limits) | INVALID_ARGUMENT | INVALID_ARGUMENT | yes |
//! | stale or unknown receipt handle (pop ack / change invisible) | INVALID_ARGUMENT | INVALID_ARGUMENT | yes |
//! | unknown topic / message / node | NOT_FOUND | TOPIC_NOT_FOUND for topics | yes |
//! | topic exists | ALREADY_EXISTS | - | yes |
//! | topic not writable | PERMISSION_DENIED | - | yes |
//! | unsafe admin request (last voter, not a learner) | FAILED_PRECONDITION | - | yes |
//! | offset outside a queue | OUT_OF_RANGE | - | - |
//! | disk above the reject ratio | RESOURCE_EXHAUSTED | DISK_FULL | yes |
//! | a configured limit (`max-topics`, long-poll waiters, ...) | RESOURCE_EXHAUSTED | UNSPECIFIED | yes |
//! | not the leader, not forwarded | UNAVAILABLE | NOT_LEADER + hint | yes |
//! | forwarding could not connect | UNAVAILABLE | FORWARD_FAILED + hint | yes |
//! | no quorum heard before proposing | UNAVAILABLE | NO_QUORUM | yes |
//! | shutting down | UNAVAILABLE | SHUTTING_DOWN | yes |
//! | proposed, no quorum ack in time | DEADLINE_EXCEEDED | NO_QUORUM | no (outcome unknown) |
//! | proposed, then leader lost / Raft stopped | UNAVAILABLE | - | no (outcome unknown) |
//! | storage corruption | DATA_LOSS | - | - |
//! | other internal failures | INTERNAL | - | - |

use raftmq_proto::v1::ErrorDetail;
use raftmq_proto::v1::ErrorReason;
use raftmq_raft_log::types::NodeId;
use raftmq_store::limits::quote;
use raftmq_store::RejectCode;
use raftmq_store::StoreError;
use tonic::Code;
use tonic::Status;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The request is malformed or exceeds a limit.
    #[error("{0}")]
    InvalidArgument(String),
    /// A pop receipt handle is not the message's current one (stale after a redelivery or a
    /// deadline change, already acked, never handed out, or not a receipt handle at all).
    #[error("invalid receipt handle: {0}")]
    InvalidReceiptHandle(String),
    /// A topic does not exist (and may not be auto-created). The name is quoted bounded.
    #[error("topic {} does not exist", quote(.0))]
    TopicNotFound(String),
    /// Something else named does not exist (message, node).
    #[error("{0}")]
    NotFound(String),
    /// The thing to create exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// The topic's permissions or the caller's role forbid the call.
    #[error("{0}")]
    PermissionDenied(String),
    /// The call is not signed, or not by a known access key with its secret key.
    #[error("{0}")]
    Unauthenticated(String),
    /// The request is well formed but unsafe or impossible in the current state.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The disk is above the reject ratio.
    #[error("disk full: {0}")]
    DiskFull(String),
    /// This node is not the leader and did not forward the call.
    #[error("not the leader")]
    NotLeader {
        /// The leader this node knows.
        leader_id: Option<NodeId>,
        /// Its client address ("" if unknown).
        leader_addr: String,
    },
    /// Forwarding to the leader failed before the request was sent.
    #[error("forwarding to the leader at {leader_addr} failed: {reason}")]
    ForwardFailed {
        /// The leader.
        leader_id: Option<NodeId>,
        /// Its client address.
        leader_addr: String,
        /// The transport error.
        reason: String,
    },
    /// The leader has not heard from a quorum recently; nothing was proposed.
    #[error("no quorum: {0}")]
    NoQuorum(String),
    /// The node is shutting down and takes no new writes; nothing was proposed.
    #[error("node is shutting down")]
    ShuttingDown,
    /// The write was proposed but no quorum ack arrived in time: it may still commit.
    #[error("outcome unknown: {0}")]
    Timeout(String),
    /// The write was proposed and then lost track of (leader change, Raft stopped): it may
    /// have committed.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// A store error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else.
    #[error("internal error: {0}")]
    Internal(String),
}

impl NodeError {
    /// True when the failed write is known to have stored nothing (so its messages may be
    /// proposed again): anything but an outcome left unknown after the proposal. The same
    /// split as `not_applied` in [`to_status`].
    pub fn stored_nothing(&self) -> bool {
        !matches!(
            self,
            NodeError::Timeout(_) | NodeError::OutcomeUnknown(_) | NodeError::Internal(_)
        )
    }

    /// The refusal apply answered with (deterministic on every replica; nothing dispatched).
    pub fn from_reject(code: RejectCode, message: String) -> Self {
        match code {
            RejectCode::NoSuchTopic | RejectCode::NoSuchUser => NodeError::NotFound(message),
            RejectCode::NoSuchQueue | RejectCode::Invalid => NodeError::InvalidArgument(message),
            RejectCode::NoPermission => NodeError::PermissionDenied(message),
            RejectCode::TopicExists => NodeError::AlreadyExists(message),
            RejectCode::InvalidReceiptHandle | RejectCode::AlreadyAcked => {
                NodeError::InvalidReceiptHandle(message)
            }
        }
    }
}

fn detail(reason: ErrorReason, not_applied: bool) -> ErrorDetail {
    ErrorDetail {
        reason: reason as i32,
        leader_id: None,
        leader_addr: String::new(),
        not_applied,
    }
}

fn store_status(e: &StoreError) -> (Code, Option<ErrorDetail>) {
    match e {
        StoreError::InvalidArgument { .. } | StoreError::Config { .. } => (
            Code::InvalidArgument,
            Some(detail(ErrorReason::InvalidArgument, true)),
        ),
        StoreError::NotFound { .. } => (Code::NotFound, None),
        StoreError::AlreadyExists { .. } => (Code::AlreadyExists, None),
        StoreError::OffsetOutOfRange { .. } => (Code::OutOfRange, None),
        StoreError::DiskFull { .. } => (
            Code::ResourceExhausted,
            Some(detail(ErrorReason::DiskFull, true)),
        ),
        StoreError::LimitReached { .. } => (
            Code::ResourceExhausted,
            Some(detail(ErrorReason::Unspecified, true)),
        ),
        StoreError::Corruption { .. } => (Code::DataLoss, None),
        _ => (Code::Internal, None),
    }
}

/// Maps `err` (seen on node `node_id`) to the status a client receives.
pub fn to_status(err: NodeError, node_id: NodeId) -> Status {
    let msg = format!("node {node_id}: {err}");
    let (code, det) = match &err {
        NodeError::InvalidArgument(_) | NodeError::InvalidReceiptHandle(_) => (
            Code::InvalidArgument,
            Some(detail(ErrorReason::InvalidArgument, true)),
        ),
        NodeError::TopicNotFound(_) => (
            Code::NotFound,
            Some(detail(ErrorReason::TopicNotFound, true)),
        ),
        NodeError::NotFound(_) => (Code::NotFound, None),
        NodeError::AlreadyExists(_) => (Code::AlreadyExists, None),
        NodeError::PermissionDenied(_) => (Code::PermissionDenied, None),
        NodeError::Unauthenticated(_) => (Code::Unauthenticated, None),
        NodeError::FailedPrecondition(_) => (Code::FailedPrecondition, None),
        NodeError::DiskFull(_) => (
            Code::ResourceExhausted,
            Some(detail(ErrorReason::DiskFull, true)),
        ),
        NodeError::NotLeader {
            leader_id,
            leader_addr,
        } => return raftmq_proto::not_leader_status(node_id, *leader_id, leader_addr),
        NodeError::ForwardFailed {
            leader_id,
            leader_addr,
            ..
        } => {
            let d = ErrorDetail {
                reason: ErrorReason::ForwardFailed as i32,
                leader_id: *leader_id,
                leader_addr: leader_addr.clone(),
                not_applied: true,
            };
            (Code::Unavailable, Some(d))
        }
        NodeError::NoQuorum(_) => (Code::Unavailable, Some(detail(ErrorReason::NoQuorum, true))),
        NodeError::ShuttingDown => (
            Code::Unavailable,
            Some(detail(ErrorReason::ShuttingDown, true)),
        ),
        NodeError::Timeout(_) => (
            Code::DeadlineExceeded,
            Some(detail(ErrorReason::NoQuorum, false)),
        ),
        NodeError::OutcomeUnknown(_) => (Code::Unavailable, None),
        NodeError::Store(e) => store_status(e),
        NodeError::Internal(_) => (Code::Internal, None),
    };
    let status = Status::new(code, msg);
    match det {
        Some(d) => raftmq_proto::with_error_detail(status, &d),
        None => status,
    }
}

/// [`to_status`] of an answer to a client, logged at debug level first (NOT_LEADER is routine
/// and not logged).
pub fn client_status(err: NodeError, node_id: NodeId) -> Status {
    if !matches!(err, NodeError::NotLeader { .. }) {
        tracing::debug!(error = %err, "request failed");
    }
    to_status(err, node_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_not_applied() {
        let cases = [
            (
                NodeError::InvalidArgument("x".into()),
                Code::InvalidArgument,
                Some(true),
            ),
            (
                NodeError::TopicNotFound("t".into()),
                Code::NotFound,
                Some(true),
            ),
            (
                NodeError::NoQuorum("x".into()),
                Code::Unavailable,
                Some(true),
            ),
            (NodeError::ShuttingDown, Code::Unavailable, Some(true)),
            (
                NodeError::Timeout("x".into()),
                Code::DeadlineExceeded,
                Some(false),
            ),
            (
                NodeError::OutcomeUnknown("x".into()),
                Code::Unavailable,
                None,
            ),
            (
                NodeError::DiskFull("x".into()),
                Code::ResourceExhausted,
                Some(true),
            ),
            (
                NodeError::Store(StoreError::LimitReached {
                    what: "2 topics exist".into(),
                    setting: "max-topics",
                    max: 2,
                }),
                Code::ResourceExhausted,
                Some(true),
            ),
        ];
        for (err, code, not_applied) in cases {
            let s = to_status(err, 1);
            assert_eq!(s.code(), code, "{s:?}");
            let d = raftmq_proto::error_detail(&s).map(|d| d.not_applied);
            assert_eq!(d, not_applied, "{s:?}");
            assert!(s.message().starts_with("node 1: "), "{s:?}");
        }
        let s = to_status(
            NodeError::NotLeader {
                leader_id: Some(2),
                leader_addr: "h:2".into(),
            },
            1,
        );
        let d = raftmq_proto::error_detail(&s).expect("detail");
        assert_eq!((d.leader_id, d.not_applied), (Some(2), true));
    }

    #[test]
    fn client_input_is_quoted_bounded() {
        let huge = "t".repeat(60 << 20);
        let s = to_status(NodeError::TopicNotFound(huge), 1);
        assert!(s.message().len() < 200, "{} bytes", s.message().len());
        assert!(s.message().contains("(62914560 bytes)"), "{}", s.message());
    }
}
