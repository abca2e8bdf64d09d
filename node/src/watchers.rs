//! Tasks of a running node that follow openraft's metrics: role-change logging (and refusing
//! writes after a fatal Raft error), turning elections back on once a node that lost
//! committed entries has them again, and (on the leader) restarting the replication of a
//! follower stuck behind while its stream is idle.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::ServerState;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::NodeId;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::NodeCore;

/// Logs (info) every change of role, term or known leader, and turns the log's inline
/// flushing ([`raftmq_raft_log::LogStore::set_inline_flush`]) on for any role but leader.
/// Follows the server metrics (sent only when they change), not the full metrics (sent on
/// every turn of openraft's core loop, several times per message); the core drops their
/// sender when it stops.
pub async fn log_role_changes(core: Arc<NodeCore>, stop: watch::Receiver<bool>) {
    use openraft::vote::RaftLeaderId;
    let mut rx = core.raft.server_metrics();
    let mut last = None;
    let mut core_ended = false;
    loop {
        let now = {
            let m = rx.borrow_watched();
            (m.state, m.vote.leader_id().term(), m.current_leader)
        };
        let fatal = core.running_state().err();
        if let Some(e) = fatal.filter(|e| !matches!(e, openraft::errors::Fatal::Stopped)) {
            core.shutting_down.store(true, Ordering::Release);
            tracing::error!(error = %e, "raft stopped on a fatal error; refusing writes");
            return;
        }
        if last != Some(now) {
            let (state, term, leader) = now;
            // A leader's append must return at once (replication starts after it); any
            // other node's quiet appends flush on openraft's core, saving two wake-ups.
            core.store
                .log()
                .set_inline_flush(state != ServerState::Leader);
            tracing::info!(?state, term, leader = ?leader, "raft role");
            last = Some(now);
        }
        // The running state is checked once more after the core ended (it is set just before).
        if core_ended || *stop.borrow() {
            return;
        }
        core_ended = rx.changed().await.is_err();
    }
}

/// A node that lost committed entries starts with elections off; this turns them back on once
/// its committed index has reached what it had lost (the log store then clears the floor).
pub async fn resume_elections_when_caught_up(
    core: Arc<NodeCore>,
    floor: impl Fn() -> Option<LogId>,
    stop: watch::Receiver<bool>,
) {
    let mut rx = core.raft.metrics();
    loop {
        if floor().is_none() {
            core.raft.runtime_config().elect(true);
            tracing::info!(
                "caught up past the lost committed entries: standing for election again"
            );
            return;
        }
        if *stop.borrow() || rx.changed().await.is_err() {
            return;
        }
    }
}

/// On the leader: when a follower's matched index stays below the leader's last log index
/// without moving for [`stall_after`], ends the follower's replication stream if it is idle
/// (see [`ReplicationKick`]), so openraft resends from the matched index; an idle cluster
/// thus brings every reachable follower to lag 0 on its own. Streams actually ended are
/// counted in the `replication_kicks` metric.
pub async fn kick_stalled_replication(core: Arc<NodeCore>, mut stop: watch::Receiver<bool>) {
    let kick = core.replication_kick.clone();
    let mut stalls = StallTracker::new(stall_after(&core));
    let mut counted = kick.ended();
    let mut tick = tokio::time::interval((stalls.stall / 4).max(Duration::from_millis(20)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        let (leading, last, replication) = core.with_metrics(|m| {
            let leading = m.state == ServerState::Leader && m.current_leader == Some(core.node_id);
            let matched: Option<Vec<(NodeId, Option<u64>)>> = m.replication.as_ref().map(|r| {
                (r.iter().filter(|(&id, _)| id != core.node_id))
                    .map(|(&id, l)| (id, l.as_ref().map(|l| l.index)))
                    .collect()
            });
            (leading, m.last_log_index, matched)
        });
        let matched = replication.filter(|_| leading).unwrap_or_default();
        for id in stalls.observe(Instant::now(), last, &matched) {
            tracing::debug!(
                target_node = id,
                ?last,
                "follower stuck behind: kicking its replication stream"
            );
            kick.kick(id);
        }
        let ended = kick.ended();
        if ended > counted {
            core.metrics.replication_kicks.inc_by(ended - counted);
            counted = ended;
        }
    }
}

/// Which followers stand still below the leader's last log index for `stall` or longer.
struct StallTracker {
    stall: Duration,
    /// Per follower behind: its matched index and since when it has not moved (or since its
    /// last kick).
    since: HashMap<NodeId, (Option<u64>, Instant)>,
}

impl StallTracker {
    fn new(stall: Duration) -> Self {
        Self {
            stall,
            since: HashMap::new(),
        }
    }

    /// Takes the followers' matched indexes at `now` (none when this node does not lead) and
    /// returns the followers to kick: behind `last` without moving for `stall`, then again
    /// every `stall` while that lasts.
    fn observe(
        &mut self,
        now: Instant,
        last: Option<u64>,
        matched: &[(NodeId, Option<u64>)],
    ) -> Vec<NodeId> {
        self.since
            .retain(|id, _| matched.iter().any(|(m, _)| m == id));
        let mut kick = Vec::new();
        for &(id, index) in matched {
            if index >= last {
                self.since.remove(&id);
                continue;
            }
            let entry = self.since.entry(id).or_insert((index, now));
            if entry.0 != index {
                *entry = (index, now);
            } else if now.duration_since(entry.1) >= self.stall {
                kick.push(id);
                entry.1 = now;
            }
        }
        kick
    }
}

/// How long a follower's matched index may stand still below the leader's log before its
/// idle stream is ended: twice replication-timeout-ms. A stream that is not idle has its
/// own reply timeout, so this only has to outlast one round trip of a healthy stream.
pub fn stall_after(core: &NodeCore) -> Duration {
    Duration::from_millis(core.config.replication_timeout_ms.saturating_mul(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_standing_still_behind_is_kicked_once_per_stall() {
        let stall = Duration::from_secs(2);
        let mut t = StallTracker::new(stall);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Follower 2 is behind at 10, follower 3 caught up.
        let behind = [(2, Some(10)), (3, Some(50))];
        assert!(t.observe(at(0), Some(50), &behind).is_empty());
        assert!(t.observe(at(1_999), Some(50), &behind).is_empty());
        assert_eq!(t.observe(at(2_000), Some(50), &behind), vec![2]);
        assert!(
            t.observe(at(3_000), Some(50), &behind).is_empty(),
            "not again at once"
        );
        assert_eq!(
            t.observe(at(4_000), Some(50), &behind),
            vec![2],
            "again after a stall"
        );
    }

    #[test]
    fn progress_catching_up_or_losing_leadership_resets_the_clock() {
        let mut t = StallTracker::new(Duration::from_secs(2));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(t.observe(at(0), Some(50), &[(2, Some(10))]).is_empty());
        // It moved: the clock starts again.
        assert!(t.observe(at(1_500), Some(50), &[(2, Some(20))]).is_empty());
        assert!(t.observe(at(3_000), Some(50), &[(2, Some(20))]).is_empty());
        assert_eq!(t.observe(at(3_500), Some(50), &[(2, Some(20))]), vec![2]);
        // Caught up, then behind again: a fresh clock.
        assert!(t.observe(at(4_000), Some(50), &[(2, Some(50))]).is_empty());
        assert!(t.observe(at(4_100), Some(60), &[(2, Some(50))]).is_empty());
        assert!(t.observe(at(5_000), Some(60), &[(2, Some(50))]).is_empty());
        // Not leading (no followers known): forgotten.
        assert!(t.observe(at(5_500), Some(60), &[]).is_empty());
        assert!(t.observe(at(6_200), Some(60), &[(2, Some(50))]).is_empty());
        assert_eq!(t.observe(at(8_200), Some(60), &[(2, Some(50))]), vec![2]);
        // A follower that matched nothing yet counts as behind.
        let mut t = StallTracker::new(Duration::from_secs(2));
        assert!(t.observe(at(0), Some(5), &[(3, None)]).is_empty());
        assert_eq!(t.observe(at(2_000), Some(5), &[(3, None)]), vec![3]);
    }
}
