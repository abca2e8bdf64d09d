//! Scenario 8: consumer group offsets committed before a failover are still there after it
//! (they are replicated through Raft), read from every node, also after a full restart.

use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::FlushPolicy;
use raftmq_client::proto as pb;

const GROUPS: [&str; 2] = ["billing", "audit"];

cluster_tests::plain_and_secure! {
    async fn offsets_survive_failover(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        cluster.wait_leader().await?;
        let client = cluster.client(Duration::from_secs(3))?;
        for i in 0..40u32 {
            let m = pb::Message {
                topic: "orders".into(),
                body: format!("m{i}").into_bytes().into(),
                ..Default::default()
            };
            client.send(m).await?;
        }
        let expected = |g: usize, q: i32| (g as u64 + 1) * 3 + q as u64;
        for (g, group) in GROUPS.iter().enumerate() {
            for q in 0..4 {
                client
                    .commit_offset(group, "orders", q, expected(g, q))
                    .await?;
            }
        }
        // Failover: crash the leader that stored them.
        let leader = cluster.wait_leader().await?;
        cluster.kill(leader).await;
        let next = cluster.wait_leader().await?;
        assert_ne!(next, leader);
        check_offsets(&cluster, &client, &expected).await?;
        // Move them on under the new leader, then restart the old one: it must learn them.
        for q in 0..4 {
            client
                .commit_offset("billing", "orders", q, 100 + q as u64)
                .await?;
        }
        cluster.restart(leader).await?;
        cluster.wait_converged(Duration::from_secs(20)).await?;
        let moved = |g: usize, q: i32| {
            if g == 0 {
                100 + q as u64
            } else {
                expected(g, q)
            }
        };
        check_offsets(&cluster, &client, &moved).await?;
        // Full crash of every node and restart.
        for id in cluster.ids() {
            cluster.kill(id).await;
        }
        for id in cluster.ids() {
            cluster.restart(id).await?;
        }
        cluster.wait_leader().await?;
        cluster.wait_converged(Duration::from_secs(20)).await?;
        check_offsets(&cluster, &client, &moved).await?;
        cluster.shutdown().await
    }
}

/// Every running node serves the expected offset of every group and queue.
async fn check_offsets(
    cluster: &TestCluster,
    client: &raftmq_client::Client,
    expected: &dyn Fn(usize, i32) -> u64,
) -> anyhow::Result<()> {
    cluster.wait_converged(Duration::from_secs(20)).await?;
    for (g, group) in GROUPS.iter().enumerate() {
        for q in 0..4 {
            let got = client.fetch_offset(group, "orders", q).await?;
            assert_eq!(got, Some(expected(g, q)), "group {group} queue {q}");
        }
    }
    for id in cluster.ids().into_iter().filter(|&i| cluster.is_up(i)) {
        let store = cluster.node(id).store();
        for (g, group) in GROUPS.iter().enumerate() {
            for q in 0..4 {
                let got = store
                    .fetch_offset(group, "orders", QueueId::new(q as u32))
                    .map(QueueOffset::get);
                assert_eq!(
                    got,
                    Some(expected(g, q)),
                    "node {id} group {group} queue {q}"
                );
            }
        }
    }
    Ok(())
}
