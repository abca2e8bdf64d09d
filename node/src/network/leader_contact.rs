//! [`LeaderContact`]: when this node last heard from a leader over the peer transport, and
//! what it does when that connection is lost: a Pre-Vote as soon as its leader lease ends.
//!
//! openraft starts an election only once the leader lease (its `election_timeout_max`) *and*
//! then a randomized election timeout have passed since the leader was last heard. When the
//! leader's replication stream breaks (its process died and its kernel closed the
//! connection), waiting out the second part buys nothing: this node triggers a Pre-Vote right
//! after its own lease ends, staggered by node id ([`STAGGER_STEP`]) so that two followers do
//! not split the vote. Safety stays with the vote rules: a Pre-Vote changes no state, a peer
//! refuses it while its own lease holds, and the real election follows only after a quorum
//! would grant it. Nothing is triggered if any append arrived meanwhile, if this node's vote
//! changed (it granted another candidate), if it is not a follower, or while its lost-commit
//! floor keeps it out of elections. If the Pre-Vote is refused, the election timer remains.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::storage::RaftStateMachine;
use openraft::Raft;
use openraft::ServerState;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use tokio::time::Instant;

use super::vote_guard::VoteGuard;

/// Time after this node's lease ends before it pre-votes (its peers' leases end about then).
pub const LEASE_MARGIN: Duration = Duration::from_millis(15);

/// Extra delay per node id (`node_id % 4` steps), so two followers do not campaign together.
pub const STAGGER_STEP: Duration = Duration::from_millis(15);

/// The last append (unary or streamed) this node received from a leader.
///
/// Invariant: `seq` grows by one with every append heard; `at` is when the last one arrived;
/// at most one Pre-Vote is scheduled per `seq`.
#[derive(Debug, Default)]
pub struct LeaderContact {
    last: Mutex<Heard>,
    /// Counts the Pre-Votes triggered (a metric of the node).
    triggered: prometheus_client::metrics::counter::Counter,
}

#[derive(Clone, Copy, Debug, Default)]
struct Heard {
    seq: u64,
    at: Option<Instant>,
    /// The `seq` a Pre-Vote is already scheduled for (several streams can end at once).
    armed: Option<u64>,
}

impl LeaderContact {
    /// A contact that counts its Pre-Votes in `triggered`.
    pub fn counting(triggered: prometheus_client::metrics::counter::Counter) -> Self {
        Self {
            last: Mutex::default(),
            triggered,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An append arrived.
    pub fn heard(&self) {
        let mut h = self.lock();
        h.seq += 1;
        h.at = Some(Instant::now());
    }

    /// The leader's replication stream ended: schedules a Pre-Vote for when this node's lease
    /// ends (see the module docs).
    pub fn stream_lost<C, SM>(
        self: &Arc<Self>,
        raft: &Raft<C, SM>,
        node_id: NodeId,
        guard: VoteGuard,
    ) where
        C: LogTypes,
        SM: RaftStateMachine<C>,
    {
        let (seq, at) = {
            let mut h = self.lock();
            let Some(at) = h.at.filter(|_| h.armed != Some(h.seq)) else {
                return;
            };
            h.armed = Some(h.seq);
            (h.seq, at)
        };
        let (state, vote) = {
            let m = raft.metrics();
            let m = m.borrow_watched();
            (m.state, m.vote)
        };
        if state != ServerState::Follower {
            return;
        }
        let lease = Duration::from_millis(raft.config().election_timeout_max);
        let steps = u32::try_from(node_id % 4).unwrap_or(0);
        // The stagger also applies when the lease is long over (a leader that fell silent
        // before its stream ended), so two followers never campaign at the same instant.
        let fire_at = (at + lease + LEASE_MARGIN).max(Instant::now()) + STAGGER_STEP * steps;
        // Called from a drop too: outside a runtime (a shutdown) there is nothing to do.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let contact = self.clone();
        let raft = raft.clone();
        rt.spawn(async move {
            tokio::time::sleep_until(fire_at).await;
            if contact.lock().seq != seq || guard.holds_floor() {
                return;
            }
            let unchanged = {
                let m = raft.metrics();
                let m = m.borrow_watched();
                m.state == ServerState::Follower && m.vote == vote
            };
            if !unchanged {
                return;
            }
            tracing::info!(
                silent_ms = at.elapsed().as_millis() as u64,
                "leader connection lost and lease over: pre-vote"
            );
            contact.triggered.inc();
            if let Err(e) = raft.trigger().elect(true).await {
                tracing::debug!(error = %e, "pre-vote trigger refused");
            }
        });
    }
}

/// Runs its action once: at the first [`StreamEnd::fire`] or when dropped (a stream dropped by
/// the transport, e.g. because its connection died, is never polled to its end).
pub struct StreamEnd {
    action: Box<dyn Fn() + Send + Sync>,
    done: AtomicBool,
}

impl StreamEnd {
    /// Calls `action` once, when the stream ends.
    pub fn new(action: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            action: Box::new(action),
            done: AtomicBool::new(false),
        }
    }

    /// The stream ended: runs the action unless it already ran.
    pub fn fire(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            (self.action)();
        }
    }
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        self.fire();
    }
}
