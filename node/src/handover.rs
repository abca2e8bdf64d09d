//! Graceful stop of a leader: hand leadership to the most caught-up voter before the node
//! stops. While the transfer runs, `NodeCore::handover_to` names the target, so a write that
//! reaches this node is redirected there (`pipeline::propose::stopping_refusal`) instead of
//! being refused with SHUTTING_DOWN.

use std::sync::atomic::Ordering;

use crate::core::NodeCore;

/// Leader only: transfers leadership to the most caught-up voter and waits (bounded) for it.
/// New writes are refused from the start (`shutting_down`); while the transfer runs they wait
/// for the new leader and are redirected to it (`handover_to`, see `pipeline::propose`).
pub async fn hand_over_leadership(core: &NodeCore) {
    let m = core.raft_metrics();
    let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
    let to = crate::service::admin::most_caught_up(core, &m, &voters);
    core.handover_to.store(to.unwrap_or(0), Ordering::Release);
    core.shutting_down.store(true, Ordering::Release);
    let Some(to) = to else {
        return;
    };
    let started = std::time::Instant::now();
    match crate::service::admin::transfer_leader(core, Some(to)).await {
        Ok(l) => tracing::info!(
            to = l,
            took_ms = started.elapsed().as_millis() as u64,
            "leadership handed over before shutdown"
        ),
        Err(e) => {
            tracing::warn!(to, error = %e, "leadership hand-over failed; shutting down anyway")
        }
    }
    core.handover_to.store(0, Ordering::Release);
}
