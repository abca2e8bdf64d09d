//! Pop consumption across a failover (issue 11): messages received on one leader are acked
//! on the next with the old receipt handles; an acked message is never delivered again, an
//! unacked one comes back after its deadline with attempt 2; every replica ends with the
//! same pop state. A learner that joins by snapshot after a purge gets the pop state.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::FlushPolicy;
use raftmq_client::proto as pb;
use raftmq_node::error::NodeError;
use raftmq_node::pipeline::consume;
use raftmq_node::pipeline::consume::AckOutcome;
use raftmq_node::pipeline::consume::ReceiptHandle;
use raftmq_node::pipeline::consume::ReceiveRequest;
use raftmq_store::types::QueueId;
use tokio::time::Instant;

const TOPIC: &str = "pop";
const GROUP: &str = "workers";
const INVISIBLE: Duration = Duration::from_secs(3);

fn request(max: u32) -> ReceiveRequest {
    ReceiveRequest {
        group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: QueueId::new(0),
        max_messages: max,
        invisible: INVISIBLE,
        filter: "*".into(),
        fifo: false,
    }
}

/// `f` on the current leader, retried while leadership settles (refusals that proposed
/// nothing, or outcomes a retry resolves: every pop call here is safe to repeat).
async fn on_leader<T, F, Fut>(cluster: &TestCluster, f: F) -> anyhow::Result<T>
where
    F: Fn(std::sync::Arc<raftmq_node::core::NodeCore>) -> Fut,
    Fut: std::future::Future<Output = Result<T, NodeError>>,
{
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let leader = cluster.wait_leader().await?;
        match f(cluster.node(leader).core().clone()).await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() < end && e.stored_nothing() && !is_final(&e) => {
                tracing::info!(error = %e, "retrying on the leader");
            }
            Err(e @ (NodeError::Timeout(_) | NodeError::OutcomeUnknown(_)))
                if Instant::now() < end =>
            {
                tracing::info!(error = %e, "retrying an unknown outcome");
            }
            Err(e) => anyhow::bail!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_final(e: &NodeError) -> bool {
    matches!(
        e,
        NodeError::InvalidArgument(_)
            | NodeError::InvalidReceiptHandle(_)
            | NodeError::TopicNotFound(_)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pop_state_survives_failover() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {}).await?;
    cluster.wait_leader().await?;
    let client = cluster.client(Duration::from_secs(3))?;
    client
        .create_topic(pb::TopicConfig {
            name: TOPIC.into(),
            queue_count: 1,
            ..Default::default()
        })
        .await?;
    for i in 0..3 {
        let m = pb::Message {
            topic: TOPIC.into(),
            body: format!("m{i}").into_bytes().into(),
            ..Default::default()
        };
        client.send(m).await?;
    }

    // Receive all three on the first leader; keep only the wire form of the handles.
    let leader = cluster.wait_leader().await?;
    let got = consume::receive(cluster.node(leader).core(), &request(10)).await?;
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().all(|m| m.attempt == 1));
    assert_eq!(got[2].message.body, &b"m2"[..]);
    let wire: Vec<String> = got.iter().map(|m| m.receipt.encode()).collect();
    let deadline_ms = got[2].receipt.invisible_until_ms;

    // Crash that leader; ack the first two on the next one with the old handles.
    cluster.kill(leader).await;
    let next = cluster.wait_leader().await?;
    assert_ne!(next, leader);
    let handles: Vec<ReceiptHandle> = wire[..2]
        .iter()
        .map(|s| ReceiptHandle::decode(s))
        .collect::<Result<_, _>>()?;
    let acked = on_leader(&cluster, |core| {
        let handles = handles.clone();
        async move { consume::ack(&core, GROUP, TOPIC, &handles).await }
    })
    .await?;
    for r in &acked {
        // An unknown outcome retried may find the first attempt applied.
        assert!(
            matches!(r, Ok(AckOutcome::Acked | AckOutcome::AlreadyAcked)),
            "{acked:?}"
        );
    }
    let again = on_leader(&cluster, |core| {
        let handles = handles.clone();
        async move { consume::ack(&core, GROUP, TOPIC, &handles).await }
    })
    .await?;
    assert!(
        again
            .iter()
            .all(|r| matches!(r, Ok(AckOutcome::AlreadyAcked))),
        "retried ack is harmless: {again:?}"
    );

    // The unacked one comes back after its deadline, with attempt 2; the acked ones never.
    let redelivered = on_leader(&cluster, |core| async move {
        let until = Instant::now() + INVISIBLE + Duration::from_secs(5);
        consume::receive_long_poll(&core, &request(10), until).await
    })
    .await?;
    let now_ms = raftmq_node::pipeline::now_ms();
    assert!(now_ms >= deadline_ms, "not before the deadline");
    assert_eq!(redelivered.len(), 1, "{redelivered:?}");
    assert_eq!(
        redelivered[0].receipt.queue_offset,
        got[2].receipt.queue_offset
    );
    assert_eq!(redelivered[0].attempt, 2);
    assert_eq!(redelivered[0].message.body, &b"m2"[..]);
    // Its first handle is stale now.
    let stale = ReceiptHandle::decode(&wire[2])?;
    let r = on_leader(&cluster, |core| {
        let stale = stale.clone();
        async move { consume::ack(&core, GROUP, TOPIC, &[stale]).await }
    })
    .await?;
    assert!(
        matches!(r[..], [Err(NodeError::InvalidReceiptHandle(_))]),
        "{r:?}"
    );
    let fresh = redelivered[0].receipt.clone();
    let r = on_leader(&cluster, |core| {
        let fresh = fresh.clone();
        async move { consume::ack(&core, GROUP, TOPIC, &[fresh]).await }
    })
    .await?;
    assert!(matches!(r[..], [Ok(AckOutcome::Acked)]), "{r:?}");
    let nothing = on_leader(&cluster, |core| async move {
        let until = Instant::now() + Duration::from_millis(500);
        consume::receive_long_poll(&core, &request(10), until).await
    })
    .await?;
    assert!(nothing.is_empty(), "{nothing:?}");

    // The crashed node comes back and ends with the same pop state and progress.
    cluster.restart(leader).await?;
    cluster.wait_converged(Duration::from_secs(20)).await?;
    let q = QueueId::new(0);
    let states: Vec<_> = cluster
        .ids()
        .iter()
        .map(|&id| {
            let s = cluster.node(id).store();
            (
                s.receive_state(GROUP, TOPIC, q),
                s.fetch_offset(GROUP, TOPIC, q),
            )
        })
        .collect();
    assert!(states.windows(2).all(|w| w[0] == w[1]), "{states:?}");
    let (state, progress) = &states[0];
    let state = state.as_ref().expect("pop state");
    assert!(state.inflight.is_empty(), "{state:?}");
    assert_eq!(progress.map(|o| o.get()), Some(3));
    for id in cluster.ids() {
        cluster.node(id).store().validate()?;
    }
    cluster.shutdown().await
}

/// A learner that can only join by snapshot (the log is purged) ends with the leader's pop
/// state, and both go on identically.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learner_joining_by_snapshot_has_the_pop_state() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync], |_| {}).await?;
    cluster.wait_leader().await?;
    let client = cluster.client(Duration::from_secs(3))?;
    client
        .create_topic(pb::TopicConfig {
            name: TOPIC.into(),
            queue_count: 1,
            ..Default::default()
        })
        .await?;
    for b in 0..20 {
        let batch = (0..16)
            .map(|i| pb::Message {
                topic: TOPIC.into(),
                body: format!("{b}-{i}-{}", "x".repeat(1000)).into_bytes().into(),
                ..Default::default()
            })
            .collect();
        client.send_batch(batch).await?;
    }
    let core = cluster.node(1).core().clone();
    let got = consume::receive(&core, &request(4)).await?;
    assert_eq!(got.len(), 4);
    consume::ack(&core, GROUP, TOPIC, &[got[1].receipt.clone()]).await?;
    // Expire every closed segment: the log is purged, a joiner needs the snapshot.
    let far = cluster_tests::retention::now_ms() + 100 * 3_600_000;
    assert!(cluster_tests::retention::purge_at(cluster.node(1), far).await?);
    let q = QueueId::new(0);
    let min = core.store.queue_offsets(TOPIC, q).0;
    assert!(min.get() > 4, "queue min {min}");
    // Receive past the new minimum: in flight below it are forgotten.
    let later = consume::receive(&core, &request(2)).await?;
    assert_eq!(later[0].receipt.queue_offset, min, "{later:?}");

    let joiner = cluster.add_node(FlushPolicy::Sync, 1).await?;
    let want = core.store.receive_state(GROUP, TOPIC, q);
    assert!(want.is_some());
    let applied = core.store.watermarks().applied.map(|l| l.index);
    let n2 = cluster.node(joiner).store().clone();
    let end = Instant::now() + Duration::from_secs(20);
    while n2.watermarks().applied.map(|l| l.index) < applied {
        anyhow::ensure!(Instant::now() < end, "joiner did not catch up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        n2.watermarks().log.min_phys_offset.get() > 0,
        "joined by snapshot, not by replaying the log"
    );
    assert_eq!(n2.receive_state(GROUP, TOPIC, q), want);
    assert_eq!(
        n2.fetch_offset(GROUP, TOPIC, q),
        core.store.fetch_offset(GROUP, TOPIC, q)
    );
    // Both apply the next pop entries alike.
    let acked = consume::ack(&core, GROUP, TOPIC, &[later[0].receipt.clone()]).await?;
    assert!(matches!(acked[..], [Ok(AckOutcome::Acked)]), "{acked:?}");
    let applied = core.store.watermarks().applied.map(|l| l.index);
    while n2.watermarks().applied.map(|l| l.index) < applied {
        anyhow::ensure!(Instant::now() < end, "joiner did not apply the ack");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        n2.receive_state(GROUP, TOPIC, q),
        core.store.receive_state(GROUP, TOPIC, q)
    );
    n2.validate()?;
    cluster.shutdown().await
}
