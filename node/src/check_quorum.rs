//! Check-quorum: a leader that has not heard from a quorum of voters for an election timeout
//! stops claiming leadership, until a quorum answers again.
//!
//! openraft 0.10 keeps such a leader in its Leader state: its leader lease (the election
//! timeout's upper bound) only makes `client_write` refuse new proposals, and the node goes on
//! naming itself leader (openraft's `docs::protocol::check_quorum`). [`watch`] follows the
//! leader's `last_quorum_acked` metric and marks the node [`QuorumCheck::is_lost`] once that is
//! older than the election timeout; while marked, [`crate::core::NodeCore::is_leader`] is false
//! and [`crate::core::NodeCore::leader`] names no leader, so writes there are refused with
//! NOT_LEADER (no hint, nothing proposed), followers do not forward to it, and `ClusterStatus`
//! reports no leader. The mark clears as soon as a quorum acknowledges again (openraft keeps
//! sending heartbeats) or the node is no longer leader. Raft is not touched: its state, votes
//! and terms stay openraft's, so safety is openraft's as well.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::Instant as _;
use openraft::ServerState;
use raftmq_raft_log::types::NodeId;
use raftmq_store::Raft;
use tokio::sync::watch;

/// Whether this node, a leader in openraft's eyes, has lost its quorum.
#[derive(Debug, Default)]
pub struct QuorumCheck {
    /// Invariant: true only while openraft reports this node as leader and no quorum of
    /// voters acknowledged anything for longer than the election timeout.
    lost: AtomicBool,
}

impl QuorumCheck {
    /// True while this leader has not heard from a quorum for an election timeout.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Sets the mark; returns the previous value.
    fn set(&self, lost: bool) -> bool {
        self.lost.swap(lost, Ordering::AcqRel)
    }
}

/// The decision: a leader of more than one voter whose last quorum acknowledgement (or, before
/// the first one, its election) lies more than `timeout` back has lost its quorum.
pub fn quorum_lost(
    leading: bool,
    voters: usize,
    quorum_acked_ago: Option<Duration>,
    leading_for: Duration,
    timeout: Duration,
) -> bool {
    leading && voters > 1 && quorum_acked_ago.unwrap_or(leading_for) > timeout
}

/// Every `interval` until `stop`, updates `check` for node `me` from `raft`'s metrics (see
/// the module docs); `timeout` is the election timeout a quorum must have answered within.
pub async fn watch(
    raft: Raft,
    me: NodeId,
    timeout: Duration,
    interval: Duration,
    check: std::sync::Arc<QuorumCheck>,
    stop: watch::Receiver<bool>,
) {
    let rx = raft.metrics();
    // The term this node leads in, and since when (for the time before the first quorum ack).
    let mut leading_since: Option<(u64, std::time::Instant)> = None;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !*stop.borrow() {
        tick.tick().await;
        let (leading, term, voters, acked_ago) = {
            let m = rx.borrow_watched();
            let leading = m.state == ServerState::Leader && m.current_leader == Some(me);
            let voters = m.membership_config.membership().voter_ids().count();
            let acked_ago = m.last_quorum_acked.as_ref().map(|t| t.elapsed());
            (leading, m.current_term, voters, acked_ago)
        };
        leading_since = match leading_since {
            Some((t, since)) if leading && t == term => Some((t, since)),
            _ if leading => Some((term, std::time::Instant::now())),
            _ => None,
        };
        let leading_for = leading_since.map_or(Duration::ZERO, |(_, s)| s.elapsed());
        let lost = quorum_lost(leading, voters, acked_ago, leading_for, timeout);
        match (check.set(lost), lost) {
            (false, true) => tracing::warn!(
                term,
                quorum_acked_ms_ago = acked_ago.map(|d| d.as_millis() as u64),
                timeout_ms = timeout.as_millis() as u64,
                "check-quorum: no quorum heard for an election timeout; no longer claiming \
                 leadership, refusing writes"
            ),
            (true, false) if leading => {
                tracing::info!(term, "check-quorum: a quorum answers again; leading")
            }
            (true, false) => tracing::info!(term, "check-quorum: no longer leader"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn only_a_leader_of_several_voters_past_the_timeout_loses_its_quorum() {
        let t = 300 * MS;
        assert!(quorum_lost(true, 3, Some(301 * MS), Duration::ZERO, t));
        assert!(!quorum_lost(true, 3, Some(300 * MS), Duration::ZERO, t));
        assert!(!quorum_lost(true, 3, Some(10 * MS), 10_000 * MS, t));
        // Not a leader, or alone: never.
        assert!(!quorum_lost(false, 3, Some(10_000 * MS), 10_000 * MS, t));
        assert!(!quorum_lost(true, 1, None, 10_000 * MS, t));
        // No ack yet: the time since the election counts.
        assert!(!quorum_lost(true, 3, None, 100 * MS, t));
        assert!(quorum_lost(true, 5, None, 400 * MS, t));
    }

    #[test]
    fn the_mark_reports_its_previous_value() {
        let c = QuorumCheck::default();
        assert!(!c.is_lost());
        assert!(!c.set(true));
        assert!(c.is_lost());
        assert!(c.set(false));
        assert!(!c.is_lost());
    }
}
