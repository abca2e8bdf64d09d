//! The retention driver: retention (not openraft) decides what the Raft log may purge.
//!
//! Each pass: `store.retention_plan(now)`; if there is a plan, make sure a snapshot covers
//! `purge_upto` (trigger one and wait), `raft.trigger().purge_log(purge_upto)` and wait until
//! openraft reports the purge, then `store.apply_retention(plan)` deletes the segments and the
//! ConsumeQueue / index units below the new minimum physical offset. Every node runs its own
//! driver; purging is local to a node.
//!
//! A full disk: freeing space must not need free space first, yet a pass writes before it
//! deletes (a snapshot prefix, the trimmed snapshot, the purge record in `meta/`). So:
//! - when the disk is above `disk-reject-ratio`, the pass first takes only what the stored
//!   snapshot already covers (`retention_plan_covered`): no new snapshot is built, only the
//!   stored one is trimmed (smaller than itself);
//! - every pass that deletes releases the store's disk reserve first (a preallocated file as
//!   large as the stored snapshots plus a margin, see `raftmq_store::disk_reserve`), so those
//!   writes have room even when no block was free; the reserve is made again after the pass,
//!   and at every tick until it is whole.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;
use crate::service::send::now_ms;
use raftmq_store::retention::RetentionPlan;

/// How long one pass waits for openraft to build a snapshot or purge.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

async fn wait_until(
    core: &NodeCore,
    what: &str,
    cond: impl Fn(&crate::core::RaftMetrics) -> bool,
) -> Result<(), NodeError> {
    let end = Instant::now() + STEP_TIMEOUT;
    loop {
        if cond(&core.raft_metrics()) {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(NodeError::Internal(format!(
                "retention: {what} did not happen within {} s",
                STEP_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pass's plan: on a full disk what the stored snapshot covers, if anything; else the
/// whole plan.
fn plan(core: &NodeCore) -> Result<Option<RetentionPlan>, NodeError> {
    let now = now_ms();
    if crate::disk_guard::local_full(core) {
        if let Some(s) = core.with_metrics(|m| m.snapshot) {
            let covered = raftmq_store::types::LogIndex::new(s.index);
            if let Some(p) = core.store.retention_plan_covered(now, covered)? {
                tracing::info!(
                    log_index = p.purge_upto.index,
                    snapshot_index = s.index,
                    "disk full: retention takes what the stored snapshot covers first"
                );
                return Ok(Some(p));
            }
        }
    }
    Ok(core.store.retention_plan(now)?)
}

/// One retention pass; true if something was deleted.
pub async fn retention_pass(core: &NodeCore) -> Result<bool, NodeError> {
    if crate::disk_guard::local_full(core) {
        // The segments kept for reuse hold space nothing needs now.
        let store = core.store.clone();
        match tokio::task::spawn_blocking(move || store.log().delete_free_segments()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "deleting the segments kept for reuse failed"),
            Err(e) => {
                tracing::warn!(error = %e, "deleting the segments kept for reuse: task failed")
            }
        }
    }
    let Some(plan) = plan(core)? else {
        return Ok(false);
    };
    // The pass writes before it deletes: give it the reserve's room (see the module docs).
    let store = core.store.clone();
    tokio::task::spawn_blocking(move || store.release_disk_reserve())
        .await
        .map_err(|e| NodeError::Internal(format!("retention task failed: {e}")))??;
    let res = purge_and_delete(core, plan).await;
    ensure_reserve(core).await;
    res.map(|()| true)
}

/// Snapshot (unless one covers `plan`), purge, delete.
async fn purge_and_delete(core: &NodeCore, plan: RetentionPlan) -> Result<(), NodeError> {
    let upto = plan.purge_upto.index;
    let fatal =
        |e: openraft::errors::Fatal<raftmq_store::TypeConfig>| NodeError::Internal(e.to_string());
    let covered = |m: &crate::core::RaftMetrics| m.snapshot.is_some_and(|s| s.index >= upto);
    if !covered(&core.raft_metrics()) {
        core.raft.trigger().snapshot().await.map_err(fatal)?;
        wait_until(core, "snapshot", covered).await?;
    }
    core.raft.trigger().purge_log(upto).await.map_err(fatal)?;
    wait_until(core, "purge", |m| m.purged.is_some_and(|p| p.index >= upto)).await?;
    // File deletions block for a while: off the runtime's workers.
    let store = core.store.clone();
    tokio::task::spawn_blocking(move || store.apply_retention(&plan))
        .await
        .map_err(|e| NodeError::Internal(format!("retention task failed: {e}")))??;
    tracing::info!(
        log_index = upto,
        phys_offset = plan.delete_below_phys.get(),
        "retention pass purged the log and deleted segments"
    );
    Ok(())
}

/// Makes the disk reserve whole (a full disk is logged by the store; other errors here).
async fn ensure_reserve(core: &NodeCore) {
    let store = core.store.clone();
    match tokio::task::spawn_blocking(move || store.ensure_disk_reserve()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "disk reserve not made"),
        Err(e) => tracing::warn!(error = %e, "disk reserve task failed"),
    }
}

/// Runs [`retention_pass`] every `interval` until `stop` turns true.
pub async fn run(core: Arc<NodeCore>, interval: Duration, mut stop: watch::Receiver<bool>) {
    ensure_reserve(&core).await;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        if let Err(e) = retention_pass(&core).await {
            tracing::warn!(error = %e, "retention pass failed");
        }
        ensure_reserve(&core).await;
    }
}
