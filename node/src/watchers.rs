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

/// Logs (info) every change of role, term or known leader.
pub async fn log_role_changes(core: Arc<NodeCore>, stop: watch::Receiver<bool>) {
    let mut rx = core.raft.metrics();
    let mut last = None;
    loop {
        let now = {
            let m = rx.borrow_watched();
            (m.state, m.current_term, m.current_leader)
        };
        let fatal = rx.borrow_watched().running_state.clone().err();
        if let Some(e) = fatal.filter(|e| !matches!(e, openraft::errors::Fatal::Stopped)) {
            core.shutting_down.store(true, Ordering::Release);
            tracing::error!(error = %e, "raft stopped on a fatal error; refusing writes");
            return;
        }
        if last != Some(now) {
            let (state, term, leader) = now;
            tracing::info!(?state, term, leader = ?leader, "raft role");
            last = Some(now);
        }
        if *stop.borrow() || rx.changed().await.is_err() {
            return;
        }
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
    let stall = stall_after(&core);
    let mut since: HashMap<NodeId, (Option<u64>, Instant)> = HashMap::new();
    let mut counted = kick.ended();
    let mut tick = tokio::time::interval((stall / 4).max(Duration::from_millis(20)));
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
            (leading, m.last_log_index, m.replication.clone())
        });
        let Some(replication) = replication.filter(|_| leading) else {
            since.clear();
            continue;
        };
        since.retain(|id, _| replication.contains_key(id));
        let now = Instant::now();
        for (&id, matched) in replication.iter().filter(|(&id, _)| id != core.node_id) {
            let matched = matched.as_ref().map(|l| l.index);
            if matched >= last {
                since.remove(&id);
                continue;
            }
            let entry = since.entry(id).or_insert((matched, now));
            if entry.0 != matched {
                *entry = (matched, now);
            } else if now.duration_since(entry.1) >= stall {
                tracing::debug!(
                    target_node = id,
                    ?matched,
                    ?last,
                    "follower stuck behind: kicking its replication stream"
                );
                kick.kick(id);
                entry.1 = now;
            }
        }
        let ended = kick.ended();
        if ended > counted {
            core.metrics.replication_kicks.inc_by(ended - counted);
            counted = ended;
        }
    }
}

/// How long a follower's matched index may stand still below the leader's log before its
/// idle stream is ended: twice replication-timeout-ms. A stream that is not idle has its
/// own reply timeout, so this only has to outlast one round trip of a healthy stream.
pub fn stall_after(core: &NodeCore) -> Duration {
    Duration::from_millis(core.config.replication_timeout_ms.saturating_mul(2))
}
