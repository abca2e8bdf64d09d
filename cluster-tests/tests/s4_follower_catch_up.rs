//! Scenario 4: a follower is down for a long run of writes, then comes back and catches up.
//! Second case: while it was down, retention on the others expired and deleted the segments
//! it missed (the purge point passed its log), so it must be brought back by a snapshot and
//! still end up with every retained message.

use std::collections::BTreeMap;
use std::time::Duration;

use cluster_tests::check::check_all;
use cluster_tests::check::lost;
use cluster_tests::check::History;
use cluster_tests::check::Outcome as AttemptOutcome;
use cluster_tests::cluster::TestCluster;
use cluster_tests::reader::read_all;
use cluster_tests::retention::now_ms;
use cluster_tests::retention::purge_at;
use cluster_tests::scenario::Run;
use cluster_tests::scenario::QUEUES;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;

/// ~1 KiB messages: 64 KiB segments hold ~55 of them.
fn opts() -> ProducerOptions {
    ProducerOptions {
        pad: 1000,
        pause: Duration::from_millis(1),
        ..ProducerOptions::default()
    }
}

cluster_tests::plain_and_secure! {
    async fn follower_down_for_many_writes_catches_up(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        let leader = cluster.wait_leader().await?;
        let run = Run::start(&cluster, opts())?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        let follower = leader % 3 + 1;
        cluster.kill(follower).await;
        run.producers
            .wait_more_acked(400, Duration::from_secs(60))
            .await?;
        cluster.restart(follower).await?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(450);
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    /// Once intermittent (issue 3): retention trimmed the stored snapshot by copying the live
    /// ConsumeQueues to their end, past the units its manifest named, so the follower's install
    /// failed on the prefix CRC and stopped its Raft. See `store/tests/snapshot_race.rs`.
    async fn follower_behind_the_purge_point_gets_every_retained_message(security) -> anyhow::Result<()> {
        catch_up_past_the_purge_point(security, false).await
    }
}

cluster_tests::plain_and_secure! {
    /// The first snapshot the follower receives is corrupted on the wire: it refuses it (its
    /// Raft keeps running), the leader sends again, and the fresh one installs.
    async fn follower_refuses_a_corrupted_snapshot_then_installs_a_fresh_one(security) -> anyhow::Result<()> {
        catch_up_past_the_purge_point(security, true).await
    }
}

async fn catch_up_past_the_purge_point(
    security: cluster_tests::Security,
    corrupt_first_snapshot: bool,
) -> anyhow::Result<()> {
    let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |c| {
        c.store.file_reserved_hours = 1;
    })
    .await?;
    let leader = cluster.wait_leader().await?;
    let run = Run::start(&cluster, opts())?;
    run.producers
        .wait_more_acked(30, Duration::from_secs(20))
        .await?;
    let follower = leader % 3 + 1;
    cluster.kill(follower).await;
    run.producers
        .wait_more_acked(400, Duration::from_secs(60))
        .await?;
    // Two hours later for retention: every segment below the checkpoint expires.
    let mut purged = false;
    for id in cluster.ids().into_iter().filter(|&i| cluster.is_up(i)) {
        purged |= purge_at(cluster.node(id), now_ms() + 2 * 3_600_000).await?;
    }
    assert!(purged, "retention deleted nothing");
    let leader = cluster.wait_leader().await?;
    let first = cluster.node(leader).log().watermarks().first_index;
    tracing::info!(?first, "leader log start after retention");
    if corrupt_first_snapshot {
        for from in cluster.ids().into_iter().filter(|&i| i != follower) {
            cluster.faults.corrupt_snapshots((from, follower), 1);
        }
    }
    cluster.restart(follower).await?;
    run.producers
        .wait_more_acked(30, Duration::from_secs(30))
        .await?;
    let history = run.producers.stop().await;
    cluster.wait_converged(Duration::from_secs(60)).await?;
    let samples = run.sampler.stop().await;
    let nodes: Vec<(u64, String)> = cluster
        .ids()
        .into_iter()
        .map(|i| (i, cluster.client_addr(i)))
        .collect();
    let replicas = read_all(&run.client, &nodes, &run.topic, QUEUES).await?;
    let leader_read = replicas
        .iter()
        .find(|r| r.node == leader)
        .expect("leader read");
    // Each node runs retention at its own checkpoint, so the nodes that stayed up may have
    // deleted different numbers of segments (one more on the node that applied further).
    // Every checker over the full history, except loss: the messages at or above the highest
    // min offset of their queue over all nodes must be everywhere.
    let mut kept_by_all: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for (&q, &range) in replicas.iter().flat_map(|r| r.ranges.iter()) {
        let e = kept_by_all.entry(q).or_insert(range);
        e.0 = e.0.max(range.0);
    }
    let retained = retained_history(&history, &kept_by_all);
    let mut report = check_all(&history, &replicas, &samples);
    report.lost = lost(&retained, &replicas);
    let ranges: Vec<_> = replicas.iter().map(|r| (r.node, &r.ranges)).collect();
    assert!(report.is_pass(), "{report}\nranges: {ranges:?}");
    assert!(
        leader_read.ranges.values().any(|&(min, _)| min > 0),
        "nothing was purged: {:?}",
        leader_read.ranges
    );
    assert!(report.acked >= 100, "{report}");
    // And the returning follower got every message its snapshot's sender retained: it lacks
    // nothing that some node which stayed up still holds.
    let follower_read = replicas
        .iter()
        .find(|r| r.node == follower)
        .expect("follower read");
    for (q, &(min, _)) in &follower_read.ranges {
        let others = replicas
            .iter()
            .filter(|r| r.node != follower)
            .filter_map(|r| r.ranges.get(q).map(|&(m, _)| m))
            .max();
        assert!(
            others.is_some_and(|o| min <= o),
            "follower queue {q} starts at {min}, past every other node: {ranges:?}"
        );
    }
    if corrupt_first_snapshot {
        assert!(
            cluster.faults.snapshots_corrupted() >= 1,
            "no snapshot was corrupted: the refusal path did not run"
        );
    }
    cluster.shutdown().await
}

/// The attempts of messages not removed by retention: a message acknowledged below its
/// queue's min offset is dropped with all its attempts.
fn retained_history(history: &History, ranges: &BTreeMap<u32, (u64, u64)>) -> History {
    let purged: std::collections::BTreeSet<_> = history
        .attempts
        .iter()
        .filter_map(|a| match a.outcome {
            AttemptOutcome::Acked {
                queue_id,
                queue_offset,
                ..
            } if ranges
                .get(&queue_id)
                .is_some_and(|&(min, _)| queue_offset < min) =>
            {
                Some(a.tag)
            }
            _ => None,
        })
        .collect();
    History {
        attempts: history
            .attempts
            .iter()
            .filter(|a| !purged.contains(&a.tag))
            .copied()
            .collect(),
    }
}
