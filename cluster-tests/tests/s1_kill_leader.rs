//! Scenario 1: kill -9 the leader repeatedly under load (in-process crash: no hand-over, no
//! close, no final flush); then all three nodes killed at once and restarted. No acknowledged
//! message may be lost, and every replica must hold the same queues.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;

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
