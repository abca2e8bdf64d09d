//! Scenario 6: on-disk damage found at restart.
//! - A torn partial record past the flushed end: recovery cuts it, the node starts and
//!   converges.
//! - A flipped bit in flushed data: the node refuses to start with an error naming the
//!   corruption; with the operator flag `repair-truncate-corruption` it truncates at the bad
//!   record and catches up from its peers, ending with the same queues as everyone else.

use raftmq_raft_log::types::LogIndex;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::power::flip_bit;
use cluster_tests::power::segments;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;

/// Writes the first 30 bytes of a record header (length, magic, version, kind; no CRC) at
/// physical offset `phys` of the stopped node: a record whose write was torn.
fn write_torn_header(dir: &std::path::Path, phys: u64) -> anyhow::Result<()> {
    let (start, path) = segments(dir)?
        .into_iter()
        .rev()
        .find(|(s, _)| *s <= phys)
        .ok_or_else(|| anyhow::anyhow!("no segment for {phys}"))?;
    let mut h = Vec::new();
    h.extend_from_slice(&200u32.to_le_bytes());
    h.extend_from_slice(&0x524d_5145u32.to_le_bytes());
    h.extend_from_slice(&[1, 3, 0, 0]);
    h.extend_from_slice(&152u32.to_le_bytes());
    h.extend_from_slice(&[7; 14]);
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all_at(&h, phys - start)?;
    f.sync_all()?;
    Ok(())
}

/// Torn tail cut on restart; a flipped bit in flushed data makes the node refuse to start
/// with an error naming the file, offset and reason. Returns the cluster (node `f` down,
/// corrupted), the run and `f`.
async fn torn_then_corrupt(
    security: cluster_tests::Security,
    flush: [FlushPolicy; 3],
) -> anyhow::Result<(TestCluster, Run, u64)> {
    let mut cluster = TestCluster::start_as(security, &flush, |_| {}).await?;
    cluster.wait_leader().await?;
    let run = Run::start(&cluster, ProducerOptions::default())?;
    run.producers
        .wait_more_acked(100, Duration::from_secs(20))
        .await?;
    // The damaged node: a `sync` follower.
    let mut leader = cluster.wait_leader().await?;
    if flush.iter().filter(|&&p| p == FlushPolicy::Sync).count() == 1
        && flush[leader as usize - 1] == FlushPolicy::Sync
    {
        let to = leader % 3 + 1;
        leader = run.client.transfer_leader(Some(to)).await?;
        assert_eq!(cluster.wait_leader().await?, leader);
    }
    let f = cluster
        .ids()
        .into_iter()
        .find(|&i| i != leader && flush[i as usize - 1] == FlushPolicy::Sync)
        .expect("a sync follower");

    // Torn tail.
    let end = cluster.kill_reporting_flushed(f).await;
    write_torn_header(&cluster.data_dir(f), end)?;
    cluster.restart(f).await?;
    run.producers
        .wait_more_acked(50, Duration::from_secs(20))
        .await?;
    cluster.wait_converged(Duration::from_secs(20)).await?;

    // Flipped bit in the header of a flushed, committed entry in the middle of the log.
    let loc = {
        let log = cluster.node(f).log();
        let last = log.watermarks().flushed.expect("flushed entries").index;
        log.entry_location(LogIndex::new(last / 2))
            .expect("entry present")
    };
    cluster.kill(f).await;
    flip_bit(&cluster.data_dir(f), loc.phys + 16)?;
    let err = match cluster.try_start(f).await {
        Ok(_) => panic!("node {f} started on a corrupt CommitLog"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.contains("corruption") && err.contains(&format!("offset {}", loc.phys)),
        "refusal does not name the corruption and where: {err}"
    );
    tracing::info!(error = %err, "corrupt node refused to start");
    Ok((cluster, run, f))
}

/// Operator repair: truncate at the bad record, re-replicate from the peers, and end with
/// the same queues as everyone else; restarts cleanly without the flag afterwards.
async fn repair(mut cluster: TestCluster, run: Run, f: u64) -> anyhow::Result<()> {
    cluster.configs[f as usize - 1]
        .log
        .repair_truncate_corruption = true;
    cluster.restart(f).await?;
    run.producers
        .wait_more_acked(50, Duration::from_secs(20))
        .await?;
    let mut out = run.finish(&cluster).await?;
    // The repaired node's reported commit index drops to its truncated log end after the
    // restart (first samples still show the pre-damage value): an amnesia the operator chose,
    // not a cluster regression; other nodes must not regress.
    let regressions = std::mem::take(&mut out.report.observed.commit_regressions);
    tracing::info!(
        node = f,
        ?regressions,
        "commit index regressions (repaired node only)"
    );
    assert!(regressions.iter().all(|r| r.0 == f), "{regressions:?}");
    out.assert_pass(200);
    cluster.kill(f).await;
    cluster.configs[f as usize - 1]
        .log
        .repair_truncate_corruption = false;
    cluster.restart(f).await?;
    cluster.wait_converged(Duration::from_secs(20)).await?;
    cluster.shutdown().await
}

cluster_tests::plain_and_secure! {
    async fn torn_tail_is_cut_and_corruption_refuses_to_start(security) -> anyhow::Result<()> {
        let (cluster, run, _) = torn_then_corrupt(security, [FlushPolicy::Sync; 3]).await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(150);
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    /// The repair path with `async` peers: their Raft config allows log reversion, so the leader
    /// accepts that the repaired node's log went backwards.
    async fn repair_truncate_corruption_restores_from_async_peers(security) -> anyhow::Result<()> {
        let flush = [FlushPolicy::Async, FlushPolicy::Async, FlushPolicy::Sync];
        let (cluster, run, f) = torn_then_corrupt(security, flush).await?;
        repair(cluster, run, f).await
    }
}

cluster_tests::plain_and_secure! {
    /// With `sync` peers the repaired node's log is shorter than the leader's recorded matching
    /// index for it; openraft accepts that only with `Config::allow_log_reversion` on the *leader*,
    /// which is why every node enables it (`NodeConfig::raft_config`).
    async fn repair_truncate_corruption_restores_from_sync_peers(security) -> anyhow::Result<()> {
        let (cluster, run, f) = torn_then_corrupt(security, [FlushPolicy::Sync; 3]).await?;
        repair(cluster, run, f).await
    }
}
