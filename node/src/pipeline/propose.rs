//! Proposing one entry on the leader with the quorum semantics clients see.
//!
//! 1. Before proposing, the leader must have heard from a quorum of voters within
//!    [`NodeCore::quorum_freshness`] (openraft's `last_quorum_acked`). If it has not, it waits
//!    (polling) until the send deadline, then refuses with UNAVAILABLE / NO_QUORUM and
//!    `not_applied = true`: nothing was appended, the write can never become visible.
//! 2. openraft refuses a write itself while its leader lease is not (yet) valid
//!    (`ForwardToLeader { reason: LeaseExpired }`, e.g. right after an election): nothing was
//!    appended either, so this is retried like step 1 until the deadline.
//! 3. Once proposed, the write waits for commit + apply until the deadline. If the quorum
//!    vanished after the proposal, the outcome is unknown (the entry may commit later): the
//!    answer is DEADLINE_EXCEEDED with `not_applied = false`, which `raftmq_client` reports
//!    as `UnknownOutcome`.
//! 4. The answer waits until this node cannot forget the entry in a crash (`wait_durable`).

use raftmq_raft_log::types::LogIndex;
use std::time::Duration;

use openraft::errors::ClientWriteError;
use openraft::errors::ForwardReason;
use openraft::errors::RaftError;
use raftmq_raft_log::types::AppPayload;
use raftmq_store::TypeConfig;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;

/// The leader's answer to a committed and applied write.
pub type WriteResponse = openraft::raft::ClientWriteResponse<TypeConfig>;

/// Poll interval while waiting for a quorum or a lease.
const RETRY_STEP: Duration = Duration::from_millis(10);

fn not_leader(core: &NodeCore) -> NodeError {
    let (leader_id, leader_addr) = core.leader();
    NodeError::NotLeader {
        leader_id,
        leader_addr,
    }
}

/// Waits (until `deadline`) for this leader to have a fresh quorum. Errors when this node is
/// not the leader, shuts down, or the deadline passes; in all cases nothing was proposed.
async fn await_quorum(core: &NodeCore, deadline: Instant) -> Result<(), NodeError> {
    loop {
        if core.is_shutting_down() {
            return Err(stopping_refusal(core, deadline).await);
        }
        if !core.is_leader() {
            return Err(not_leader(core));
        }
        if core.has_fresh_quorum() {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(NodeError::NoQuorum(format!(
                "the leader has not heard from a quorum of voters within {} ms; nothing was \
                 proposed",
                core.quorum_freshness().as_millis()
            )));
        }
        tokio::time::sleep(RETRY_STEP.min(deadline - now)).await;
    }
}

/// What a write reaching a stopping node is told: while it hands leadership over, it waits
/// (until `deadline`) for the new leader and names it (NOT_LEADER with its address: the client
/// goes there at once). Once this node has stepped down for the transfer target (no longer
/// leader, its vote is the target's), the target is named even before this node hears from it
/// as leader: a write reaching
/// the target during its election waits there for the outcome. Otherwise SHUTTING_DOWN.
/// Nothing was proposed either way.
pub(crate) async fn stopping_refusal(core: &NodeCore, deadline: Instant) -> NodeError {
    use std::sync::atomic::Ordering;
    loop {
        let (leader_id, leader_addr) = core.leader();
        if leader_id.is_some_and(|l| l != core.node_id) && !leader_addr.is_empty() {
            return NodeError::NotLeader {
                leader_id,
                leader_addr,
            };
        }
        let target = core.handover_to.load(Ordering::Acquire);
        if target == 0 {
            return NodeError::ShuttingDown;
        }
        let (stepped_down, target_addr) = core.with_metrics(|m| {
            use openraft::vote::RaftLeaderId;
            let addr = m
                .membership_config
                .membership()
                .get_node(&target)
                .map(|n| n.client_addr.clone())
                .unwrap_or_default();
            // Stepped down for the target: no longer leader, and its vote is the target's.
            let for_target =
                m.state != openraft::ServerState::Leader && *m.vote.leader_id().node_id() == target;
            (for_target, addr)
        });
        if stepped_down && !target_addr.is_empty() {
            return NodeError::NotLeader {
                leader_id: Some(target),
                leader_addr: target_addr,
            };
        }
        let now = Instant::now();
        if now >= deadline {
            return NodeError::ShuttingDown;
        }
        tokio::time::sleep(Duration::from_millis(2).min(deadline - now)).await;
    }
}

/// Holds an applied write's answer until this leader cannot forget the entry in a crash: it
/// is flushed in its log (mostly at once on a `sync` node), or the committed id covering it is
/// durable (the log persists that off openraft's core loop; a crash that loses the entry then
/// leaves the lost-commit floor). Only then may the client hear of it.
async fn durable_committed(
    core: &NodeCore,
    resp: WriteResponse,
    deadline: Instant,
) -> Result<WriteResponse, NodeError> {
    let index = LogIndex::of(&resp.log_id);
    let wait = core.store.log().wait_durable(index);
    match tokio::time::timeout_at(deadline, wait).await {
        Ok(Ok(())) => Ok(resp),
        Ok(Err(e)) => Err(NodeError::OutcomeUnknown(format!(
            "entry {index} committed, but this node could not persist its committed id: {e}"
        ))),
        Err(_) => Err(NodeError::Timeout(format!(
            "entry {index} committed, but its committed id was not persisted within \
             send-timeout-ms ({} ms)",
            core.config.send_timeout_ms
        ))),
    }
}

/// Proposes `payload` and waits for its apply result, within `deadline` (see module docs).
pub async fn propose(
    core: &NodeCore,
    payload: AppPayload,
    deadline: Instant,
) -> Result<WriteResponse, NodeError> {
    loop {
        await_quorum(core, deadline).await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let res = tokio::time::timeout(remaining, core.raft.client_write(payload.clone())).await;
        let err = match res {
            Err(_) => {
                return Err(NodeError::Timeout(format!(
                    "the entry was proposed but no quorum acknowledged it within send-timeout-ms \
                     ({} ms); it may still commit",
                    core.config.send_timeout_ms
                )))
            }
            Ok(Ok(resp)) => return durable_committed(core, resp, deadline).await,
            Ok(Err(e)) => e,
        };
        match err {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f))
                if f.reason == ForwardReason::LeaseExpired =>
            {
                // Nothing appended; the lease comes back with the next quorum ack.
                if Instant::now() >= deadline {
                    return Err(NodeError::NoQuorum(
                        "the leader's lease expired (no quorum ack); nothing was proposed".into(),
                    ));
                }
                tokio::time::sleep(RETRY_STEP).await;
            }
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                let leader_addr = f.leader_node.map(|n| n.client_addr).unwrap_or_default();
                return Err(NodeError::NotLeader {
                    leader_id: f.leader_id,
                    leader_addr,
                });
            }
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(f)) => {
                return Err(NodeError::OutcomeUnknown(format!(
                    "leadership changed before the entry committed (leader now {:?}); it may \
                     still commit",
                    f.leader_id
                )))
            }
            RaftError::APIError(other) => {
                return Err(NodeError::FailedPrecondition(other.to_string()))
            }
            RaftError::Fatal(f) => {
                return Err(NodeError::OutcomeUnknown(format!("raft stopped: {f}")))
            }
        }
    }
}
