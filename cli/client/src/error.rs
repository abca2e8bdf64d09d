//! [`ClientError`] and the rules that sort a failed call into "retry", "follow the leader",
//! "definitely failed" or "outcome unknown".

use raftmq_proto::v1::ErrorDetail;
use raftmq_proto::v1::ErrorReason;
use tonic::Code;
use tonic::Status;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused the call: it was not executed, and resending it unchanged will fail
    /// the same way (bad argument, unknown topic, permission, ...).
    #[error("{addr}: {code:?}: {message}")]
    Rejected {
        /// Node that answered.
        addr: String,
        /// gRPC code.
        code: Code,
        /// Server's message.
        message: String,
        /// Structured detail, if the server attached one.
        detail: Option<ErrorDetail>,
    },
    /// A write whose outcome is unknown: it may have been committed (and will then be visible)
    /// or not. Resending it may duplicate the message.
    #[error("outcome unknown after {addr} failed: {code:?}: {message}")]
    UnknownOutcome {
        /// Node the write was sent to.
        addr: String,
        /// gRPC code of the failure.
        code: Code,
        /// Failure message.
        message: String,
    },
    /// No node could serve the call within the attempt budget. For writes, every attempt is
    /// known not to have been applied.
    #[error("no node could serve the call after {attempts} attempts; last error: {last}")]
    Unavailable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The client was given unusable input (no seeds, bad address).
    #[error("invalid client argument: {0}")]
    InvalidArgument(String),
}

impl ClientError {
    /// True for a write that may or may not have been applied.
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, ClientError::UnknownOutcome { .. })
    }

    /// True when the call is known not to have taken effect.
    pub fn is_definite_failure(&self) -> bool {
        !self.is_unknown_outcome()
    }

    /// The gRPC code, when the failure came from a call.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Rejected { code, .. } | ClientError::UnknownOutcome { code, .. } => {
                Some(*code)
            }
            _ => None,
        }
    }
}

/// What to do after one failed attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Retry at this address (the leader hint) at once.
    Redirect(String),
    /// Retry, on another node, after a backoff; the call had no effect (or is a read).
    Retry,
    /// Stop: the call was refused.
    Reject,
    /// Stop (unless the caller opted into resending): a write may have been applied.
    Unknown,
}

/// Codes whose call was certainly not executed and will fail again.
fn is_refusal(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::ResourceExhausted
    )
}

/// True when the request never left this process: the TCP connection could not be made.
pub(crate) fn is_connect_error(status: &Status) -> bool {
    if status.code() != Code::Unavailable {
        return false;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::NotFound
            ) {
                return true;
            }
        }
        let text = e.to_string();
        if text.contains("tcp connect error") || text.contains("dns error") {
            return true;
        }
        source = e.source();
    }
    false
}

/// Sorts one failed attempt. `write` = the call is not idempotent.
pub(crate) fn classify(status: &Status, write: bool) -> Verdict {
    let detail = raftmq_proto::error_detail(status);
    if let Some(d) = &detail {
        let redirect = matches!(
            ErrorReason::try_from(d.reason),
            Ok(ErrorReason::NotLeader | ErrorReason::ForwardFailed)
        );
        if redirect && (d.not_applied || !write) && !d.leader_addr.is_empty() {
            return Verdict::Redirect(d.leader_addr.clone());
        }
        if d.not_applied || !write {
            return if is_refusal(status.code()) {
                Verdict::Reject
            } else {
                Verdict::Retry
            };
        }
    }
    if is_refusal(status.code()) {
        return Verdict::Reject;
    }
    if is_connect_error(status) || !write {
        return Verdict::Retry;
    }
    Verdict::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(status: Status, reason: ErrorReason, addr: &str, not_applied: bool) -> Status {
        raftmq_proto::with_error_detail(
            status,
            &ErrorDetail {
                reason: reason as i32,
                leader_id: Some(2),
                leader_addr: addr.into(),
                not_applied,
            },
        )
    }

    #[test]
    fn verdicts() {
        let not_leader = with(
            Status::unavailable("x"),
            ErrorReason::NotLeader,
            "h:2",
            true,
        );
        assert_eq!(classify(&not_leader, true), Verdict::Redirect("h:2".into()));
        assert_eq!(
            classify(&not_leader, false),
            Verdict::Redirect("h:2".into())
        );

        let no_quorum = with(Status::unavailable("x"), ErrorReason::NoQuorum, "", false);
        assert_eq!(classify(&no_quorum, true), Verdict::Unknown);
        assert_eq!(classify(&no_quorum, false), Verdict::Retry);

        let shutting = with(
            Status::unavailable("x"),
            ErrorReason::ShuttingDown,
            "",
            true,
        );
        assert_eq!(classify(&shutting, true), Verdict::Retry);

        assert_eq!(
            classify(&Status::invalid_argument("x"), true),
            Verdict::Reject
        );
        assert_eq!(classify(&Status::not_found("x"), false), Verdict::Reject);
        assert_eq!(
            classify(&Status::deadline_exceeded("x"), true),
            Verdict::Unknown
        );
        assert_eq!(classify(&Status::unavailable("x"), true), Verdict::Unknown);
        assert_eq!(classify(&Status::unavailable("x"), false), Verdict::Retry);
        assert_eq!(classify(&Status::internal("x"), false), Verdict::Retry);
    }
}
