//! Tasks of a running node that follow openraft's metrics: role-change logging (and refusing
//! writes after a fatal Raft error), and turning elections back on once a node that lost
//! committed entries has them again.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use openraft::async_runtime::WatchReceiver;
use raftmq_raft_log::types::LogId;
use tokio::sync::watch;

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
