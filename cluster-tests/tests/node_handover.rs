//! Graceful stop of the leader: it hands leadership over before it stops. A write that reaches
//! it meanwhile is answered NOT_LEADER naming the new leader (so a client goes there at once,
//! without a backoff), never SHUTTING_DOWN; producers lose nothing acknowledged, and the next
//! acknowledged send comes from the new leader.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::raw::GrpcClient;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::ErrorReason;

/// What the raw sender saw from the stopping leader.
#[derive(Debug, Default)]
struct Seen {
    acked: usize,
    /// NOT_LEADER answers naming a node, with its address.
    redirected: Vec<(Option<u64>, String)>,
    /// NOT_LEADER answers naming none (resendable, but the client must guess).
    unhinted: usize,
    /// SHUTTING_DOWN answers (the client would back off and guess).
    shutting_down: usize,
    /// Any other refusal: (code, reason, message).
    other: Vec<String>,
}

/// Sends to the node of `raw` one message after another until `done` or the server is gone.
async fn send_until(mut raw: GrpcClient, k: u32, done: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut i = 0u64;
    while !done.load(Ordering::Relaxed) {
        i += 1;
        let body = format!("raw-{k}-{i}");
        let r = raw
            .send(pb::SendRequest {
                message: Some(msg("handover-raw", body.as_bytes())),
            })
            .await;
        match r {
            Ok(_) => seen.acked += 1,
            Err(s) => match raftmq_proto::error_detail(&s) {
                Some(d) if d.reason == ErrorReason::NotLeader as i32 && d.not_applied => {
                    if d.leader_addr.is_empty() {
                        seen.unhinted += 1
                    } else {
                        seen.redirected.push((d.leader_id, d.leader_addr.clone()))
                    }
                }
                Some(d) if d.reason == ErrorReason::ShuttingDown as i32 => seen.shutting_down += 1,
                // No detail: not an answer of the service but the server going away
                // (connection refused, reset, or an h2 error as it closes): this sender is done.
                None => break,
                d => seen
                    .other
                    .push(format!("{:?} {d:?} {}", s.code(), s.message())),
            },
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopping_leader_hands_over_and_redirects_writes() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {}).await?;
    let old = cluster.wait_leader().await?;
    let run = Run::start(&cluster, ProducerOptions::default())?;
    run.producers
        .wait_more_acked(30, Duration::from_secs(20))
        .await?;

    // Raw clients (no retries, no leader following) keep sending to the old leader. Its links
    // to the others are slowed, so the hand-over takes long enough for sends to arrive during it.
    let done = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for k in 0..4 {
        let raw = cluster.grpc(old).await?;
        senders.push(tokio::spawn(send_until(raw, k, done.clone())));
    }
    for other in cluster.ids().into_iter().filter(|&i| i != old) {
        cluster
            .faults
            .delay((old, other), Duration::from_millis(40));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stopping = Instant::now();
    cluster.stop(old).await?;
    let stop_took = stopping.elapsed();
    done.store(true, Ordering::Relaxed);
    cluster.heal();
    let mut seen = Seen::default();
    for s in senders {
        let one = s.await?;
        seen.acked += one.acked;
        seen.redirected.extend(one.redirected);
        seen.unhinted += one.unhinted;
        seen.shutting_down += one.shutting_down;
        seen.other.extend(one.other);
    }
    let others: Vec<u64> = cluster.ids().into_iter().filter(|&i| i != old).collect();
    let new = cluster
        .wait_leader_among(&others, Duration::from_secs(10))
        .await?;
    eprintln!(
        "leader {old} stopped in {} ms, new leader {new}: {seen:?}",
        stop_took.as_millis()
    );

    assert!(seen.acked > 0, "the raw sender never got through: {seen:?}");
    assert_eq!(seen.shutting_down, 0, "{seen:?}");
    assert!(seen.other.is_empty(), "{seen:?}");
    assert!(
        !seen.redirected.is_empty(),
        "no write was redirected: {seen:?}"
    );
    // Each redirect names another node at its own address: the new leader, or (if the first
    // transfer target did not win its election) that target; the last one names the leader.
    for (id, addr) in &seen.redirected {
        let id = id.expect("a redirect names a node");
        assert!(id != old && *addr == cluster.client_addr(id), "{seen:?}");
    }
    let last = seen.redirected.last().expect("checked above");
    assert_eq!(
        *last,
        (Some(new), cluster.client_addr(new)),
        "the last redirect names the new leader: {seen:?}"
    );
    run.producers
        .wait_more_acked(30, Duration::from_secs(20))
        .await?;
    cluster.restart(old).await?;
    cluster.wait_converged(Duration::from_secs(20)).await?;
    let out = run.finish(&cluster).await?;
    out.assert_pass(60);
    cluster.shutdown().await
}
