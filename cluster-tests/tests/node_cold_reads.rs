//! Readers far behind the page-cache window (`log-cache-bytes`): a consumer pulling a backlog
//! from a follower and a leader bringing a follower back from far behind read the CommitLog
//! around the page cache (raft-log's `cold_read.rs`: `O_DIRECT` chunks), and every message
//! comes back byte for byte, on both.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::metrics::metric;
use cluster_tests::raw::read_all;
use cluster_tests::FlushPolicy;
use raftmq_client::Client;
use raftmq_proto::v1::Message;
use tokio::time::Instant;

const TOPIC: &str = "cold";
const BODY_BYTES: usize = 1024;
const BATCH: usize = 16;
/// 12.5 MiB of bodies: past the 8 MiB of recent entries and the 1 MiB window.
const BATCHES: usize = 800;
const SENDERS: usize = 4;

fn tweak(c: &mut raftmq_node::config::NodeConfig) {
    c.log.segment_bytes = 4 << 20;
    c.log.log_cache_bytes = 1 << 20;
    c.metrics_addr = Some("127.0.0.1:0".parse().expect("addr"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_far_behind_the_page_cache_window_read_every_message() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], tweak).await?;
    let leader = cluster.wait_leader().await?;
    let lagging = leader % 3 + 1;
    let reader = 6 - leader - lagging;
    cluster.kill(lagging).await;
    let client = cluster.client(Duration::from_secs(10))?;
    send_all(&client).await?;

    // A consumer from the start of every queue, on the follower that kept up.
    let queues = cluster
        .node(reader)
        .store()
        .topic(TOPIC)
        .expect("topic")
        .read_queue_count;
    let mut grpc = cluster.grpc(reader).await?;
    let pulled: Vec<Vec<u8>> = read_all(&mut grpc, TOPIC, queues)
        .await?
        .into_iter()
        .map(|(_, _, _, body)| body)
        .collect();
    check_bodies(pulled, "pulled from the follower");
    let cold = cluster.node(reader).store().log().cold_chunk_reads();
    assert!(cold > 0, "the pull read around the page cache");
    let counted = metric(cluster.node(reader), "raftmq_log_cold_chunk_reads_total");
    // (A chunk read ahead may finish in between.)
    assert!(
        counted >= cold as f64,
        "/metrics counts the chunk reads: {counted} < {cold}"
    );

    // The follower that was down catches up from the leader's log, far behind.
    cluster.restart(lagging).await?;
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let known = cluster.node(lagging).store().topic(TOPIC).is_some();
        let n = match known {
            true => cluster.stored_messages(lagging, TOPIC).len(),
            false => 0,
        };
        if n == BATCHES * BATCH {
            break;
        }
        anyhow::ensure!(Instant::now() < end, "caught up {n} messages only");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let caught_up = cluster.stored_messages(lagging, TOPIC);
    check_bodies(
        caught_up
            .into_iter()
            .map(|m| m.message.body.to_vec())
            .collect(),
        "stored by the follower that caught up",
    );
    let leader = cluster.wait_leader().await?;
    let cold = cluster.node(leader).store().log().cold_chunk_reads();
    assert!(
        cold > 0,
        "the catch-up read the leader's log around the page cache"
    );
    cluster.shutdown().await
}

/// Sends [`BATCHES`] batches from [`SENDERS`] tasks, each batch again until acknowledged
/// (a duplicate would fail [`check_bodies`]: none is expected without faults).
async fn send_all(client: &Client) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for b in (s..BATCHES).step_by(SENDERS) {
                let messages: Vec<Message> = (0..BATCH)
                    .map(|i| Message {
                        topic: TOPIC.into(),
                        body: body(b * BATCH + i).into(),
                        ..Message::default()
                    })
                    .collect();
                client.send_batch(messages).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Message `n`'s body: `n`, then bytes that differ per message.
fn body(n: usize) -> Vec<u8> {
    let mut x = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut b = (n as u64).to_le_bytes().to_vec();
    b.extend((8..BODY_BYTES).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    b
}

/// `bodies` are every message's body once.
fn check_bodies(bodies: Vec<Vec<u8>>, what: &str) {
    let mut seen = vec![false; BATCHES * BATCH];
    for b in &bodies {
        let n = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as usize;
        assert!(
            n < seen.len() && !seen[n],
            "{what}: message {n} unknown or twice"
        );
        assert!(*b == body(n), "{what}: message {n} differs");
        seen[n] = true;
    }
    assert_eq!(bodies.len(), seen.len(), "{what}: every message");
}
