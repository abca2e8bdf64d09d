//! The vote guard of a node that lost committed entries in a crash (its lost-commit floor,
//! see `LogStore::lost_commit_floor`).
//!
//! While the floor is set, a Vote or PreVote whose candidate's last log id is below it is
//! rejected before Raft sees it, as if this node's last log id were the floor: the candidate
//! lacks committed entries, and Raft's own check (against the shortened log) would let two
//! such nodes elect each other and overwrite a third node's committed entries. A leader
//! transfer to this node is refused for the same reason.

use std::sync::Arc;

use openraft::raft::VoteRequest;
use openraft::raft::VoteResponse;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::Vote;
use tonic::Status;

/// Reads a node's lost-commit floor.
pub type FloorFn = Arc<dyn Fn() -> Option<LogId> + Send + Sync>;

/// The guard; without a floor reader it lets everything through.
#[derive(Clone, Default)]
pub struct VoteGuard {
    floor: Option<FloorFn>,
}

impl VoteGuard {
    /// A guard reading the floor through `floor`.
    pub fn new(floor: FloorFn) -> Self {
        Self { floor: Some(floor) }
    }

    fn floor(&self) -> Option<LogId> {
        self.floor.as_ref().and_then(|f| f())
    }

    /// True while this node has a lost-commit floor (it stays out of elections).
    pub fn holds_floor(&self) -> bool {
        self.floor().is_some()
    }

    /// The rejection of `rpc` (a `what`: vote or pre-vote) if its candidate lacks entries this
    /// node had known as committed; `None` lets Raft decide. `current` is this node's vote.
    pub fn refuse<C: LogTypes>(
        &self,
        what: &str,
        rpc: &VoteRequest<C>,
        current: impl FnOnce() -> Vote,
    ) -> Option<VoteResponse<C>> {
        let floor = self.floor()?;
        if rpc.last_log_id.as_ref() >= Some(&floor) {
            return None;
        }
        tracing::warn!(
            candidate_vote = %rpc.vote,
            candidate_last_log_id = ?rpc.last_log_id,
            lost_commit_floor = %floor,
            "{what} refused: the candidate lacks committed entries this node lost in a crash \
             (set accept-lost-commits only if no member holds them any more)"
        );
        // Our floor as the last log id: the candidate's next election waits a little, as for
        // any voter with a greater log.
        Some(VoteResponse::new(current(), Some(floor), false))
    }

    /// The refusal of a leader transfer to node `me` while it lacks committed entries.
    pub fn refuse_transfer(&self, me: NodeId) -> Option<Status> {
        let floor = self.floor()?;
        Some(Status::failed_precondition(format!(
            "node {me} lost committed entries up to {floor} in a crash and cannot lead until \
             it has them again"
        )))
    }
}
