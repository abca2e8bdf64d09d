//! Scenario 1: kill -9 the leader repeatedly under load (in-process crash: no hand-over, no
//! close, no final flush); then all three nodes killed at once and restarted. No acknowledged
//! message may be lost, and every replica must hold the same queues.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;
use raftmq_raft_log::stage_file;

const MIXED: [FlushPolicy; 3] = [FlushPolicy::Sync, FlushPolicy::Async, FlushPolicy::Sync];
const ROUNDS: usize = 3;

cluster_tests::plain_and_secure! {
    async fn kill_leader_repeatedly_then_all(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &MIXED, |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(50, Duration::from_secs(20))
            .await?;
        for _ in 0..ROUNDS {
            let leader = cluster.wait_leader().await?;
            cluster.kill(leader).await;
            let next = cluster.wait_leader().await?;
            assert_ne!(next, leader);
            run.producers
                .wait_more_acked(30, Duration::from_secs(20))
                .await?;
            cluster.restart(leader).await?;
            run.producers
                .wait_more_acked(20, Duration::from_secs(20))
                .await?;
        }
        // All three at once.
        for id in cluster.ids() {
            cluster.kill(id).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for id in cluster.ids() {
            cluster.restart(id).await?;
        }
        cluster.wait_leader().await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(200);
        cluster.shutdown().await
    }
}

/// Every node `async`, all three killed at once: what each node appended last (and answered
/// its leader for) is only in its write stage, a file the kernel keeps. Opened again, each
/// log replays its stage file before recovery: it ends where it ended at the kill, and no
/// acknowledged message is lost. The stages are written out every 10 ms, so the kill is
/// repeated until it found bytes only a stage held.
#[tokio::test]
async fn all_async_nodes_killed_at_once_lose_nothing() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Async; 3], |_| {}).await?;
    cluster.wait_leader().await?;
    let run = Run::start(&cluster, ProducerOptions::default())?;
    let mut replayed = 0;
    for _ in 0..20 {
        run.producers
            .wait_more_acked(50, Duration::from_secs(20))
            .await?;
        let mut at_kill = Vec::new();
        for id in cluster.ids() {
            at_kill.push((id, cluster.kill(id).await));
        }
        for (id, before) in at_kill {
            let stage = cluster.data_dir(id).join(stage_file::STAGE_FILE);
            replayed += stage_file::pending(&stage)?;
            let after = cluster.reopen_log(id)?;
            assert_eq!(after.appended, before.appended, "node {id}");
            assert_eq!(
                after.appended_phys_end, before.appended_phys_end,
                "node {id}"
            );
        }
        for id in cluster.ids() {
            cluster.restart(id).await?;
        }
        cluster.wait_leader().await?;
        if replayed > 0 {
            break;
        }
    }
    assert!(replayed > 0, "no kill found bytes only a write stage held");
    run.producers
        .wait_more_acked(30, Duration::from_secs(20))
        .await?;
    let out = run.finish(&cluster).await?;
    out.assert_pass(80);
    cluster.shutdown().await
}
