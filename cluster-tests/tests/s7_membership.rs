//! Scenario 7: leader transfer under load; a fourth node joins as a learner, is promoted to
//! voter and an old voter is removed; then a membership change while a voter is partitioned.
//! No acknowledged message is lost and every member ends with the same queues.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;
use tokio::time::Instant;

/// Waits until node `id` is a voter in the membership the leader reports.
async fn wait_voters(cluster: &TestCluster, voters: &[u64]) -> anyhow::Result<()> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = cluster.wait_leader().await?;
        let m = cluster.node(leader).core().raft_metrics();
        let mut now: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        now.sort_unstable();
        if now == voters {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < end, "voters {now:?}, want {voters:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

cluster_tests::plain_and_secure! {
    async fn transfer_add_promote_remove_and_change_while_partitioned(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;

        // Leader transfer under load, twice.
        for _ in 0..2 {
            let leader = cluster.wait_leader().await?;
            let to = leader % 3 + 1;
            let got = run.client.transfer_leader(Some(to)).await?;
            assert_eq!(got, to);
            assert_eq!(cluster.wait_leader().await?, to);
            run.producers
                .wait_more_acked(30, Duration::from_secs(20))
                .await?;
        }

        // Node 4 joins as a learner, is promoted; node 1 is removed.
        let n4 = cluster.add_node(FlushPolicy::Sync, 2).await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        run.client
            .change_membership(vec![n4], vec![1], false)
            .await?;
        wait_voters(&cluster, &[2, 3, 4]).await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        cluster.stop(1).await?;

        // Partition a follower, then add node 5 and promote it while the follower is cut off.
        let leader = cluster.wait_leader().await?;
        let cut = [2, 3, 4]
            .into_iter()
            .find(|&i| i != leader)
            .expect("a follower");
        cluster.partition(&[cut]);
        let n5 = cluster.add_node(FlushPolicy::Async, leader).await?;
        cluster.partition_pair(cut, n5);
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        run.client
            .change_membership(vec![n5], vec![], false)
            .await?;
        wait_voters(&cluster, &[2, 3, 4, 5]).await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        cluster.heal();

        let out = run.finish(&cluster).await?;
        out.assert_pass(200);
        cluster.shutdown().await
    }
}
