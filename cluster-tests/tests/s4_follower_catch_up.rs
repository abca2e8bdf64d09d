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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follower_down_for_many_writes_catches_up() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {}).await?;
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

/// BUG (reported; intermittent, about 1 run in 3 to 6 on a loaded 2-core machine): the
/// returning follower's snapshot install fails with `corruption in
/// <data>/snapshots/incoming/incoming-*.snap at offset 1728: crc 0x00077c6c, computed ...`
/// (store `snapshot/install.rs`), which is fatal for its RaftCore ("raft stopped on a fatal
/// error"), so it never catches up (`not converged ... [(follower, Some(33))]`). Once it
/// also ended with 57 retained messages (one segment's worth) missing on the follower.
/// Suspect: the snapshot the leader streams (prefix from `snapshots/`, segment bytes read
/// from the CommitLog at send time) is rewritten by retention (`trim_current`) or read
/// inconsistently; in any case a bad snapshot from a peer should be refused and re-requested,
/// not stop Raft. Run with `-- --ignored` (loop it) to reproduce.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "bug: intermittent corrupt snapshot on catch-up after retention stops the follower's Raft"]
async fn follower_behind_the_purge_point_gets_every_retained_message() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        c.file_reserved_hours = 1;
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
    // Retained = at or above the leader's min offset of its queue.
    let leader_read = replicas
        .iter()
        .find(|r| r.node == leader)
        .expect("leader read");
    // Every checker over the full history, except loss: only messages the leader retains
    // must be everywhere (each node runs its own retention, so others may keep more).
    let retained = retained_history(&history, &leader_read.ranges);
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
