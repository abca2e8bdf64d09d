//! Fault injection on peer links, for cluster tests: a [`PeerFaults`] table per cluster id,
//! consulted by the receiving [`super::PeerService`] for every request.
//!
//! A test registers a table with [`register_faults`] before it starts its nodes; a node whose
//! cluster id has no table (every production node) pays one map lookup at start and nothing
//! per request. Faults are directed links `from -> to` (the sender and the receiver of a
//! request):
//!
//! - **cut**: the receiver refuses the request with UNAVAILABLE before Raft sees it (the sender
//!   backs off as for an unreachable peer); an open replication stream ends at its next request.
//!   Cutting both directions is a partition; one direction is a one-way partition.
//! - **delay**: the receiver waits before handing the request to Raft.
//! - **lose responses**: the request is processed, then its answer is replaced by
//!   UNAVAILABLE, so the sender cannot know that it took effect.
//! - **corrupt snapshots**: the next snapshots received over the link get one bit flipped in
//!   their first chunk past offset 0 (a segment part), as a bad disk or wire would.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

use raftmq_raft_log::types::NodeId;
use tonic::Status;

/// A directed peer link: `(sender, receiver)`.
pub type Link = (NodeId, NodeId);

/// The faults currently injected into one cluster's peer links.
#[derive(Debug, Default)]
pub struct PeerFaults {
    state: Mutex<FaultState>,
    /// Snapshot chunks corrupted so far (never reset).
    snapshots_corrupted: AtomicU64,
}

#[derive(Debug, Default)]
struct FaultState {
    cut: HashSet<Link>,
    delay: HashMap<Link, Duration>,
    lose_responses: HashSet<Link>,
    corrupt_snapshots: HashMap<Link, u32>,
}

impl PeerFaults {
    fn state(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops every request sent over `link` from now on.
    pub fn cut(&self, link: Link) {
        self.state().cut.insert(link);
    }

    /// Delays every request sent over `link` by `delay` (zero removes it).
    pub fn delay(&self, link: Link, delay: Duration) {
        let mut st = self.state();
        if delay.is_zero() {
            st.delay.remove(&link);
        } else {
            st.delay.insert(link, delay);
        }
    }

    /// Processes requests sent over `link` but loses their responses (or stops doing so).
    pub fn lose_responses(&self, link: Link, on: bool) {
        let mut st = self.state();
        if on {
            st.lose_responses.insert(link);
        } else {
            st.lose_responses.remove(&link);
        }
    }

    /// Corrupts the next `count` snapshots received over `link` (see the module docs).
    pub fn corrupt_snapshots(&self, link: Link, count: u32) {
        self.state().corrupt_snapshots.insert(link, count);
    }

    /// How many snapshots were corrupted so far.
    pub fn snapshots_corrupted(&self) -> u64 {
        self.snapshots_corrupted.load(Ordering::Relaxed)
    }

    /// Receiver side, at the start of a snapshot: whether to corrupt this one.
    pub(super) fn take_snapshot_corruption(&self, from: NodeId, to: NodeId) -> bool {
        let mut st = self.state();
        match st.corrupt_snapshots.get_mut(&(from, to)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Receiver side: flips one bit of `data`, a chunk of a snapshot being corrupted.
    pub(super) fn corrupt_chunk(&self, data: &mut [u8]) {
        if let Some(b) = data.get_mut(data.len() / 2) {
            *b ^= 1;
            self.snapshots_corrupted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes every fault.
    pub fn heal(&self) {
        *self.state() = FaultState::default();
    }

    /// Whether `link` is cut.
    pub fn is_cut(&self, link: Link) -> bool {
        self.state().cut.contains(&link)
    }

    /// Receiver side, before processing: refuses a cut link, waits out a delay.
    pub(super) async fn inbound(&self, from: NodeId, to: NodeId) -> Result<(), Status> {
        let delay = {
            let st = self.state();
            if st.cut.contains(&(from, to)) {
                return Err(cut_status(from, to));
            }
            st.delay.get(&(from, to)).copied()
        };
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
            if self.is_cut((from, to)) {
                return Err(cut_status(from, to));
            }
        }
        Ok(())
    }

    /// Receiver side, after processing: whether the answer must be lost.
    pub(super) fn outbound(&self, from: NodeId, to: NodeId) -> Result<(), Status> {
        let st = self.state();
        if st.lose_responses.contains(&(from, to)) || st.cut.contains(&(to, from)) {
            return Err(Status::unavailable(format!(
                "fault injection: response of node {to} to node {from} lost"
            )));
        }
        Ok(())
    }
}

fn cut_status(from: NodeId, to: NodeId) -> Status {
    Status::unavailable(format!(
        "fault injection: link from node {from} to node {to} is cut"
    ))
}

type Registry = Mutex<HashMap<String, Arc<PeerFaults>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// Test support: creates (or returns) the fault table of `cluster_id`; nodes of that cluster
/// started afterwards consult it.
pub fn register_faults(cluster_id: &str) -> Arc<PeerFaults> {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(cluster_id.to_string())
        .or_default()
        .clone()
}

/// Test support: forgets the fault table of `cluster_id`.
pub fn unregister_faults(cluster_id: &str) {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(cluster_id);
}

/// The fault table of `cluster_id`, if a test registered one.
pub(super) fn faults_of(cluster_id: &str) -> Option<Arc<PeerFaults>> {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(cluster_id)
        .cloned()
}
