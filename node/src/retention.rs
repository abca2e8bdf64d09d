//! The retention driver: retention (not openraft) decides what the Raft log may purge.
//!
//! Each pass: `store.retention_plan(now)`; if there is a plan, make sure a snapshot covers
//! `purge_upto` (trigger one and wait), `raft.trigger().purge_log(purge_upto)` and wait until
//! openraft reports the purge, then `store.apply_retention(plan)` deletes the segments and the
//! ConsumeQueue / index units below the new minimum physical offset. Every node runs its own
//! driver; purging is local to a node.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;
use crate::service::send::now_ms;

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

/// One retention pass; true if something was deleted.
pub async fn retention_pass(core: &NodeCore) -> Result<bool, NodeError> {
    let Some(plan) = core.store.retention_plan(now_ms())? else {
        return Ok(false);
    };
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
    Ok(true)
}

/// Runs [`retention_pass`] every `interval` until `stop` turns true.
pub async fn run(core: Arc<NodeCore>, interval: Duration, mut stop: watch::Receiver<bool>) {
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
    }
}
