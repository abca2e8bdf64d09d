//! Scenario 3: partition the leader away from the majority under load. The isolated old
//! leader commits nothing; the majority elects a new leader and goes on; after healing, every
//! node converges to the same queues with no acknowledged message lost. Also: a one-way cut
//! (leader cannot reach followers, followers still reach it) and a slow link.

use std::time::Duration;

use cluster_tests::cluster::NodeHandleExt;
use cluster_tests::cluster::TestCluster;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;

cluster_tests::plain_and_secure! {
    async fn isolated_leader_commits_nothing_majority_goes_on(security) -> anyhow::Result<()> {
        let cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 5], |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(50, Duration::from_secs(20))
            .await?;

        for round in 0..2 {
            let old = cluster.wait_leader().await?;
            // Round 0: the leader alone; round 1: the leader plus one follower (still a minority).
            let mut minority = vec![old];
            if round == 1 {
                minority.push(if old == 1 { 2 } else { 1 });
            }
            let majority: Vec<u64> = cluster
                .ids()
                .into_iter()
                .filter(|i| !minority.contains(i))
                .collect();
            cluster.partition(&minority);
            let committed_at_cut: Vec<Option<u64>> = minority
                .iter()
                .map(|&i| cluster.node(i).raft_metrics_committed())
                .collect();
            let next = cluster
                .wait_leader_among(&majority, Duration::from_secs(10))
                .await?;
            assert!(majority.contains(&next));
            run.producers
                .wait_more_acked(50, Duration::from_secs(20))
                .await?;
            // The minority side never committed past what it had when cut (up to what was
            // already in flight to the majority at the cut, which the majority commits and the
            // old leader may have learned through a last answer: allow nothing beyond the
            // majority's commit either).
            for (k, &i) in minority.iter().enumerate() {
                let now = cluster.node(i).raft_metrics_committed();
                let majority_commit = cluster.node(next).raft_metrics_committed();
                assert!(
                    now <= majority_commit,
                    "minority node {i} committed {now:?} beyond the majority {majority_commit:?}"
                );
                tracing::info!(node = i, at_cut = ?committed_at_cut[k], now = ?now, "minority commit");
            }
            cluster.heal();
            cluster.wait_converged(Duration::from_secs(20)).await?;
        }

        // One-way: the leader's requests to the others are dropped (their requests to it still go
        // through): the others stop hearing heartbeats and elect a new leader.
        let old = cluster.wait_leader().await?;
        for other in cluster.ids().into_iter().filter(|&i| i != old) {
            cluster.cut_one_way(old, other);
        }
        let others: Vec<u64> = cluster.ids().into_iter().filter(|&i| i != old).collect();
        cluster
            .wait_leader_among(&others, Duration::from_secs(10))
            .await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        cluster.heal();

        // A slow link to one follower: the cluster keeps going.
        let leader = cluster.wait_leader().await?;
        let slow = if leader == 1 { 2 } else { 1 };
        cluster
            .faults
            .delay((leader, slow), Duration::from_millis(150));
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        cluster.heal();

        let out = run.finish(&cluster).await?;
        out.assert_pass(150);
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    /// Responses lost after the request took effect: the follower appended, the leader never
    /// hears it, and retries; nothing is duplicated or lost.
    async fn lost_responses_after_effect(security) -> anyhow::Result<()> {
        let cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        let leader = cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(20, Duration::from_secs(20))
            .await?;
        let f = if leader == 1 { 2 } else { 1 };
        cluster.faults.lose_responses((leader, f), true);
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        cluster.heal();
        run.producers
            .wait_more_acked(20, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(80);
        cluster.shutdown().await
    }
}
