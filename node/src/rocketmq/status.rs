//! RocketMQ `Status` bodies. The protocol answers gRPC OK and puts the outcome in the body; only
//! codes the oldest official client we serve (crate `rocketmq` 5.0.0) knows are used, because it
//! panics on a code it cannot decode (it unwraps `Code::from_i32`).

use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_store::StoreError;
use rmq::Code;

use crate::error::NodeError;

/// A status with `code` and `message`.
pub fn status(code: Code, message: impl Into<String>) -> rmq::Status {
    rmq::Status {
        code: code as i32,
        message: message.into(),
    }
}

/// OK.
pub fn ok() -> rmq::Status {
    status(Code::Ok, "OK")
}

/// BAD_REQUEST with `message`.
pub fn bad_request(message: impl Into<String>) -> rmq::Status {
    status(Code::BadRequest, message)
}

/// The code a [`NodeError`] answers with. Refusals that stored nothing and may pass after a
/// leader change (no leader, no quorum, shutting down) are HA_NOT_AVAILABLE; an outcome that is
/// unknown (timeout) is PROXY_TIMEOUT, which the clients retry with the same message id.
pub fn code_of(e: &NodeError) -> Code {
    match e {
        NodeError::InvalidArgument(_) => Code::BadRequest,
        NodeError::InvalidReceiptHandle(_) => Code::InvalidReceiptHandle,
        NodeError::TopicNotFound(_) => Code::TopicNotFound,
        NodeError::NotFound(_) => Code::NotFound,
        NodeError::AlreadyExists(_) | NodeError::FailedPrecondition(_) => Code::PreconditionFailed,
        NodeError::PermissionDenied(_) => Code::Forbidden,
        NodeError::Unauthenticated(_) => Code::Unauthorized,
        NodeError::DiskFull(_) => Code::InternalServerError,
        NodeError::NotLeader { .. }
        | NodeError::ForwardFailed { .. }
        | NodeError::NoQuorum(_)
        | NodeError::ShuttingDown => Code::HaNotAvailable,
        NodeError::Timeout(_) | NodeError::OutcomeUnknown(_) => Code::ProxyTimeout,
        NodeError::Store(s) => match s {
            StoreError::InvalidArgument { .. } | StoreError::Config { .. } => Code::BadRequest,
            StoreError::NotFound { .. } => Code::NotFound,
            StoreError::DiskFull { .. } => Code::InternalServerError,
            StoreError::LimitReached { .. } => Code::TooManyRequests,
            _ => Code::InternalServerError,
        },
        NodeError::Internal(_) => Code::InternalServerError,
    }
}

/// The status of `e`, seen on node `node_id`.
pub fn from_error(e: &NodeError, node_id: u64) -> rmq::Status {
    status(code_of(e), format!("node {node_id}: {e}"))
}

/// True if `s` is OK.
pub fn is_ok(s: &Option<rmq::Status>) -> bool {
    s.as_ref().is_some_and(|s| s.code == Code::Ok as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code we can answer with, and the newest code crate `rocketmq` 5.0.0 decodes
    /// (`FAILED_TO_CONSUME_MESSAGE`, 60000; the codes added later, e.g. ILLEGAL_OFFSET 40019,
    /// MESSAGE_BODY_EMPTY 41302, OFFSET_NOT_FOUND 40404, are not among them).
    const KNOWN_TO_RUST_5_0_0: [i32; 47] = [
        0, 20000, 30000, 40000, 40001, 40002, 40003, 40004, 40005, 40006, 40007, 40008, 40009,
        40010, 40011, 40012, 40013, 40014, 40015, 40016, 40017, 40018, 40100, 40200, 40300, 40400,
        40401, 40402, 40403, 40800, 41300, 41301, 42800, 42900, 43100, 43101, 50000, 50001, 50002,
        50100, 50400, 50401, 50402, 50500, 50501, 50502, 60000,
    ];

    #[test]
    fn every_error_maps_to_a_code_the_old_rust_client_knows() {
        let errors = [
            NodeError::InvalidArgument("x".into()),
            NodeError::InvalidReceiptHandle("x".into()),
            NodeError::TopicNotFound("t".into()),
            NodeError::NotFound("x".into()),
            NodeError::AlreadyExists("x".into()),
            NodeError::PermissionDenied("x".into()),
            NodeError::Unauthenticated("x".into()),
            NodeError::FailedPrecondition("x".into()),
            NodeError::DiskFull("x".into()),
            NodeError::NoQuorum("x".into()),
            NodeError::ShuttingDown,
            NodeError::Timeout("x".into()),
            NodeError::OutcomeUnknown("x".into()),
            NodeError::Internal("x".into()),
            NodeError::Store(StoreError::LimitReached {
                what: "x".into(),
                setting: "max-long-poll-waiters",
                max: 0,
            }),
        ];
        for e in &errors {
            let c = code_of(e) as i32;
            assert!(KNOWN_TO_RUST_5_0_0.contains(&c), "{e}: {c}");
        }
        for c in [
            Code::MessageBodyTooLarge,
            Code::IllegalMessageId,
            Code::IllegalMessagePropertyKey,
            Code::IllegalTopic,
            Code::IllegalConsumerGroup,
            Code::InvalidReceiptHandle,
            Code::MessageNotFound,
            Code::Unsupported,
            Code::NotImplemented,
            Code::IllegalInvisibleTime,
            Code::IllegalPollingTime,
            Code::IllegalFilterExpression,
            Code::IllegalDeliveryTime,
            Code::IllegalMessageGroup,
        ] {
            assert!(KNOWN_TO_RUST_5_0_0.contains(&(c as i32)), "{c:?}");
        }
    }
}
