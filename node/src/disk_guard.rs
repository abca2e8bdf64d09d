//! The disk guard: a node whose disk is above `disk-reject-ratio` refuses writes cleanly, and
//! takes them again by itself once space returns (no restart).
//!
//! - **Sends, on the leader** ([`check_send`], called by the pipeline before anything is
//!   proposed): DISK_FULL (RESOURCE_EXHAUSTED, `not_applied`) when the leader's own disk is
//!   above the ratio, or when the voters known to be full leave no majority that could store
//!   the entry (it would be appended here and then wait out the send timeout for a commit that
//!   cannot come). The leader learns the followers' disk state from their own ClusterStatus
//!   answers, asked every [`POLL_INTERVAL`] while it leads ([`watch_voters`]); a report older
//!   than [`REPORT_TTL`] counts as not full.
//! - **Appends, on every node** ([`append_gate`], checked by the peer service): a node above the
//!   ratio refuses AppendEntries that carry entries, and snapshots, with RESOURCE_EXHAUSTED.
//!   The leader's replication backs off and sends again, so the node catches up once space
//!   returns. Heartbeats (no entries) are still answered: the node keeps its leader and does
//!   not disturb the cluster with elections. Nothing it has is truncated or lost: it only
//!   stops growing. Its ENOSPC would otherwise be a storage error that stops the Raft core.
//! - **Apply** waits for space instead of failing (the store's `StateMachine::apply`).
//!
//! The state shows in `cluster status` (`disk_usage`, `disk_full` of each member) and in
//! `/metrics` (`raftmq_disk_usage_ratio`, `raftmq_disk_full`,
//! `raftmq_appends_refused_disk_full_total`).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;

/// How often the leader asks every other voter for its disk state.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long a voter's "disk full" report counts.
pub const REPORT_TTL: Duration = Duration::from_secs(3);

/// What the leader last heard of one voter's disk.
#[derive(Clone, Copy, Debug)]
struct PeerDisk {
    full: bool,
    at: Instant,
}

/// Disk state a node keeps: its own (for logging changes once) and, on the leader, the
/// other voters' reports.
#[derive(Debug, Default)]
pub struct DiskGuard {
    /// True while this node refuses appends (logged when it turns).
    refusing: AtomicBool,
    /// Last report of each other voter (leader only; cleared when it stops leading).
    peers: Mutex<HashMap<NodeId, PeerDisk>>,
}

impl DiskGuard {
    fn peers(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, PeerDisk>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The voters among `voters` whose last report (younger than [`REPORT_TTL`]) says full.
    pub fn full_peers(&self, voters: &[NodeId]) -> Vec<NodeId> {
        let peers = self.peers();
        voters
            .iter()
            .copied()
            .filter(|v| {
                peers
                    .get(v)
                    .is_some_and(|p| p.full && p.at.elapsed() < REPORT_TTL)
            })
            .collect()
    }

    /// Records `id`'s report; logs when it turns.
    fn record(&self, id: NodeId, full: bool) {
        let before = self.peers().insert(
            id,
            PeerDisk {
                full,
                at: Instant::now(),
            },
        );
        match (before.is_some_and(|p| p.full), full) {
            (false, true) => tracing::warn!(
                peer = id,
                "voter reports its disk above disk-reject-ratio: it takes no entries"
            ),
            (true, false) => tracing::info!(peer = id, "voter's disk has room again"),
            _ => {}
        }
    }
}

/// True if this node's disk is above `disk-reject-ratio` (a statvfs failure counts as not
/// full: it is logged by whoever asked).
pub fn local_full(core: &NodeCore) -> bool {
    core.store.check_disk().is_err_and(|e| e.is_disk_full())
}

/// True if `voters` minus the `full` ones (the leader, checked before, is not among them)
/// still form a majority.
fn majority_has_room(voters: usize, full: usize) -> bool {
    voters.saturating_sub(full) > voters / 2
}

/// Refuses a send before anything is proposed (see the module docs).
pub fn check_send(core: &NodeCore) -> Result<(), NodeError> {
    core.store.check_disk()?;
    let voters: Vec<NodeId> =
        core.with_metrics(|m| m.membership_config.membership().voter_ids().collect());
    let others: Vec<NodeId> = voters
        .iter()
        .copied()
        .filter(|v| *v != core.node_id)
        .collect();
    let full = core.disk.full_peers(&others);
    if !majority_has_room(voters.len(), full.len()) {
        return Err(NodeError::DiskFull(format!(
            "voters {full:?} of {} are above their disk-reject-ratio: no majority has room \
             to store the message",
            voters.len()
        )));
    }
    Ok(())
}

/// The peer service's append gate: `Some(reason)` while this node's disk is above
/// `disk-reject-ratio` (appends carrying entries and snapshots are then refused), else None.
///
/// It holds the core weakly: the peer server's connection tasks may outlive a stopped node
/// for a while, and must not keep its store (and the `meta/` lock) open.
pub fn append_gate(core: &Arc<NodeCore>) -> impl Fn() -> Option<String> + Send + Sync + 'static {
    let core = Arc::downgrade(core);
    move || core.upgrade().and_then(|core| refusal(&core))
}

fn refusal(core: &NodeCore) -> Option<String> {
    match core.store.check_disk() {
        Ok(()) => {
            if core.disk.refusing.swap(false, Ordering::AcqRel) {
                tracing::info!("disk below disk-reject-ratio again: taking entries, catching up");
            }
            None
        }
        Err(e) if e.is_disk_full() => {
            if !core.disk.refusing.swap(true, Ordering::AcqRel) {
                tracing::error!(error = %e,
                    "disk above disk-reject-ratio: refusing entries and snapshots until space \
                     returns (what this node has is kept)");
            }
            core.metrics.appends_refused_disk_full.inc();
            Some(format!(
                "node {}: {e}; it takes no entries until space returns",
                core.node_id
            ))
        }
        Err(e) => {
            tracing::warn!(error = %e, "disk check failed; taking entries");
            None
        }
    }
}

/// While this node leads, asks every other voter for its disk state every [`POLL_INTERVAL`]
/// (its own ClusterStatus answer), for [`check_send`]. Runs until `stop` turns true.
pub async fn watch_voters(core: Arc<NodeCore>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        if !core.is_leader() {
            core.disk.peers().clear();
            continue;
        }
        let others: Vec<(NodeId, PeerNode)> = core.with_metrics(|m| {
            let ms = m.membership_config.membership();
            ms.voter_ids()
                .filter(|id| *id != core.node_id)
                .filter_map(|id| ms.get_node(&id).map(|n| (id, n.clone())))
                .collect()
        });
        let answers = join_all(
            others
                .iter()
                .map(|(id, n)| crate::service::status::peer_status(&core, *id, n, true)),
        )
        .await;
        for s in answers {
            if s.role != raftmq_proto::v1::Role::Unreachable as i32 {
                core.disk.record(s.node_id, s.disk_full);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_with_room_is_needed() {
        assert!(majority_has_room(1, 0));
        assert!(majority_has_room(3, 1), "one full follower of three");
        assert!(!majority_has_room(3, 2));
        assert!(majority_has_room(5, 2));
        assert!(!majority_has_room(5, 3));
        assert!(!majority_has_room(4, 2), "two of four is no majority");
        assert!(majority_has_room(4, 1));
    }

    #[test]
    fn only_fresh_full_reports_count() {
        let g = DiskGuard::default();
        g.record(2, true);
        g.record(3, false);
        assert_eq!(g.full_peers(&[2, 3, 4]), vec![2]);
        g.peers().insert(
            2,
            PeerDisk {
                full: true,
                at: Instant::now() - REPORT_TTL - Duration::from_millis(1),
            },
        );
        assert!(
            g.full_peers(&[2, 3]).is_empty(),
            "a stale report is forgotten"
        );
        g.record(3, true);
        assert_eq!(g.full_peers(&[3]), vec![3]);
    }
}
