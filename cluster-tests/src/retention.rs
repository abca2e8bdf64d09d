//! Retention on demand: one retention pass of a node at a chosen "now", so a test can expire
//! segments without waiting hours (the node's own driver uses the wall clock every 10 s).

use std::time::Duration;

use raftmq_node::NodeHandle;
use tokio::time::Instant;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the node's retention driver does in one pass (checkpoint, plan, snapshot covering the
/// purge point, Raft purge, segment deletion), with `now_ms` as the clock. True if something
/// was deleted.
pub async fn purge_at(node: &NodeHandle, now_ms: u64) -> anyhow::Result<bool> {
    let core = node.core();
    core.store.checkpoint()?;
    let Some(plan) = core.store.retention_plan(now_ms)? else {
        return Ok(false);
    };
    let upto = plan.purge_upto.index;
    let covered = |m: &raftmq_node::core::RaftMetrics| m.snapshot.is_some_and(|s| s.index >= upto);
    if !covered(&core.raft_metrics()) {
        core.raft.trigger().snapshot().await?;
        wait(node, "snapshot", covered).await?;
    }
    core.raft.trigger().purge_log(upto).await?;
    wait(node, "purge", |m| m.purged.is_some_and(|p| p.index >= upto)).await?;
    core.store.apply_retention(&plan)?;
    Ok(true)
}

async fn wait(
    node: &NodeHandle,
    what: &str,
    cond: impl Fn(&raftmq_node::core::RaftMetrics) -> bool,
) -> anyhow::Result<()> {
    let end = Instant::now() + Duration::from_secs(20);
    while !cond(&node.core().raft_metrics()) {
        anyhow::ensure!(Instant::now() < end, "{what} did not happen within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
