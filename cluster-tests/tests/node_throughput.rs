//! A rough throughput probe (ignored by default; not a timed assertion): one connection to
//! the leader of a three-node `sync` cluster, 64 sends of 1 KiB in flight, for 3 seconds.
//! Run with `cargo test --release -p cluster-tests --test node_throughput -- --ignored --nocapture`.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::v1 as pb;

#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn sixty_four_in_flight_one_kib() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        // The 20 ms `async` flush interval this probe always ran with (harness default: 50).
        c.log.flush_interval_ms = 20;
        c.log.segment_bytes = 64 << 20;
        c.store.limits.max_message_bytes = 64 << 10;
        c.store.limits.max_batch_bytes = 1 << 20;
        c.store.consume_queue.units_per_file = 300_000;
        c.store.index.slots_per_file = 500_000;
        c.store.index.max_units_per_file = 2_000_000;
    })
    .await
    .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let client = cluster.grpc(leader).await.expect("connect");
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(3);
    let body = vec![b'x'; 1024];
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let mut c = client.clone();
        let done = done.clone();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                c.send(pb::SendRequest {
                    message: Some(msg("bench", &body)),
                })
                .await
                .expect("send");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    for t in tasks {
        t.await.expect("task");
    }
    let n = done.load(Ordering::Relaxed);
    println!(
        "{n} quorum-acked sends in {:?}: {:.0} msg/s",
        start.elapsed(),
        n as f64 / start.elapsed().as_secs_f64()
    );
    cluster.shutdown().await.expect("clean shutdown");
}
