//! Scenario 9: a follower comes back behind by many large entries and the cluster is idle
//! (issue 13 §3). With no further send, every follower must reach replication lag 0 on its
//! own: a replication RPC timing out on a large AppendEntries (the follower writes and fsyncs
//! many MiB before it answers) must neither leave the stream stalled nor hand its entries to a
//! stream nobody reads.
//!
//! openraft's replication timeout is one heartbeat interval (50 ms, the LAN default), and 1 MiB
//! entries make one AppendEntries of the catch-up carry up to the gRPC limit (16 MiB), which a
//! follower does not write and fsync that fast. (With the shortest valid heartbeat, 10 ms, even
//! the live sends time out, so the scenario would not get as far as the catch-up.)

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::FlushPolicy;
use raftmq_client::Client;
use raftmq_proto::v1::Message;
use tokio::time::Instant;

/// Bytes of one message body: 64 of them make one 1 MiB entry.
const BODY_BYTES: usize = 16 << 10;
/// Messages per batch (one Raft entry each batch).
const BATCH: usize = 64;
/// Batches sent while the follower is down, per round (32 MiB).
const BATCHES_PER_ROUND: usize = 32;
/// Kill / send / restart rounds.
const ROUNDS: usize = 3;
/// Concurrent senders.
const SENDERS: usize = 2;
/// How long one batch may take to be acknowledged, retries included.
const SEND_DEADLINE: Duration = Duration::from_secs(120);
/// How long an idle cluster may take to bring the follower back to lag 0.
const CATCH_UP_DEADLINE: Duration = Duration::from_secs(60);

fn tweak(c: &mut raftmq_node::config::NodeConfig) {
    c.heartbeat_ms = 50;
    c.send_timeout_ms = 10_000;
    c.log.segment_bytes = 4 << 20;
    c.grpc_max_message_bytes = 16 << 20;
    c.store.limits.max_message_bytes = 64 << 10;
    c.store.limits.max_batch_messages = BATCH as u32;
    c.store.limits.max_batch_bytes = (1 << 20) + (64 << 10);
}

cluster_tests::plain_and_secure! {
    async fn idle_cluster_brings_a_follower_behind_by_large_entries_to_lag_zero(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], tweak).await?;
        let leader = cluster.wait_leader().await?;
        let client = cluster.client(Duration::from_secs(10))?;
        send_batches(&client, "s9", 2).await?;
        let follower = leader % 3 + 1;
        for round in 0..ROUNDS {
            let leader = cluster.wait_leader().await?;
            let follower = if follower == leader {
                leader % 3 + 1
            } else {
                follower
            };
            cluster.kill(follower).await;
            send_batches(&client, "s9", BATCHES_PER_ROUND).await?;
            cluster.restart(follower).await?;
            // No further load from here on.
            let waited = wait_lag_zero(&cluster, CATCH_UP_DEADLINE).await?;
            tracing::warn!(round, follower, ?waited, "follower caught up while idle");
        }
        cluster.shutdown().await
    }
}

/// Sends `batches` batches of [`BATCH`] messages to `topic` from [`SENDERS`] tasks.
async fn send_batches(client: &Client, topic: &str, batches: usize) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let client = client.clone();
        let topic = topic.to_string();
        tasks.push(tokio::spawn(async move {
            for b in (s..batches).step_by(SENDERS) {
                let messages = (0..BATCH)
                    .map(|i| Message {
                        topic: topic.clone(),
                        body: body(b, i).into(),
                        ..Message::default()
                    })
                    .collect();
                send_until_stored(&client, messages).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Sends one batch, again after a failure (a duplicate does not matter here), until it is
/// acknowledged or [`SEND_DEADLINE`] passed.
async fn send_until_stored(client: &Client, messages: Vec<Message>) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        match client.send_batch(messages.clone()).await {
            Ok(_) => return Ok(()),
            Err(e) if start.elapsed() < SEND_DEADLINE => {
                tracing::warn!(error = %e, "batch not acknowledged; sending it again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A body that differs per batch and message (no run of equal bytes).
fn body(batch: usize, msg: usize) -> Vec<u8> {
    let mut x = (batch as u64) << 32 | msg as u64 | 1;
    (0..BODY_BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Waits until the leader reports replication lag 0 (matched index = its last log index)
/// for every member, asking its ClusterStatus; returns how long that took.
async fn wait_lag_zero(cluster: &TestCluster, deadline: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < deadline {
        let leader = cluster.wait_leader().await?;
        let mut grpc = cluster.grpc(leader).await?;
        let status = grpc
            .cluster_status(raftmq_proto::v1::ClusterStatusRequest {})
            .await?
            .into_inner();
        let lags: Vec<(u64, Option<u64>)> = status
            .members
            .iter()
            .map(|m| (m.node_id, m.replication_lag))
            .collect();
        if status.leader_id == Some(leader) && lags.iter().all(|&(_, lag)| lag == Some(0)) {
            return Ok(start.elapsed());
        }
        last = format!("leader {leader}: lags {lags:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("an idle cluster did not reach lag 0 within {deadline:?}; last seen {last}")
}
