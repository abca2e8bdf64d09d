//! Scenario 6: on-disk damage found at restart.
//! - A torn partial record past the flushed end: recovery cuts it, the node starts and
//!   converges.
//! - A flipped bit in flushed data: the node refuses to start with an error naming the
//!   corruption; with the operator flag `repair-truncate-corruption` it truncates at the bad
//!   record and catches up from its peers, ending with the same queues as everyone else.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn torn_tail_is_cut_and_corruption_refuses_then_repairs() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {}).await?;
    let leader = cluster.wait_leader().await?;
    let run = Run::start(&cluster, ProducerOptions::default())?;
    run.producers
        .wait_more_acked(100, Duration::from_secs(20))
        .await?;
    let f = leader % 3 + 1;

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
        log.entry_location(last / 2).expect("entry present")
    };
    cluster.kill(f).await;
    flip_bit(&cluster.data_dir(f), loc.phys + 16)?;
    let err = match cluster.try_start(f).await {
        Ok(_) => panic!("node {f} started on a corrupt CommitLog"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.to_lowercase().contains("corrupt"),
        "refusal does not name the corruption: {err}"
    );
    tracing::info!(error = %err, "corrupt node refused to start");

    // Operator repair: truncate at the bad record, re-replicate from the peers.
    cluster.configs[f as usize - 1].repair_truncate_corruption = true;
    cluster.restart(f).await?;
    run.producers
        .wait_more_acked(50, Duration::from_secs(20))
        .await?;
    let out = run.finish(&cluster).await?;
    out.assert_pass(200);
    // And it restarts cleanly without the flag afterwards.
    cluster.kill(f).await;
    cluster.configs[f as usize - 1].repair_truncate_corruption = false;
    cluster.restart(f).await?;
    cluster.wait_converged(Duration::from_secs(20)).await?;
    cluster.shutdown().await
}
