//! Scenario 5: simulated power loss (crash, then every CommitLog byte past the node's last
//! flushed position is lost, with a torn partial record left at the end).
//!
//! The flush-policy table of DESIGN.md / README.md is what is checked:
//! - power loss of one `sync` node: no acknowledged loss;
//! - power loss of two `async` nodes at once (the third `sync`): acknowledged messages may be
//!   lost, but only those acknowledged within one flush interval before the loss — this is the
//!   **documented `async` behaviour**, not a bug;
//! - power loss of two nodes at once with every node `sync`: nothing lost.

use std::time::Duration;

use cluster_tests::check::Outcome as AttemptOutcome;
use cluster_tests::cluster::TestCluster;
use cluster_tests::cluster::FLUSH_INTERVAL_MS;
use cluster_tests::power::cut_to_flushed;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;

/// Bytes of the first unflushed record left behind as a torn write.
const TORN_BYTES: u64 = 30;

/// Crashes `ids` one after the other, cuts each CommitLog back to its flushed end, restarts
/// them. Returns the run time (µs) just before the first crash.
async fn power_loss(cluster: &mut TestCluster, run: &Run, ids: &[u64]) -> anyhow::Result<u64> {
    let at_us = run.clock.now_us();
    let mut ends = Vec::new();
    for &id in ids {
        ends.push(cluster.kill_reporting_flushed(id).await);
    }
    for (&id, &end) in ids.iter().zip(&ends) {
        let cut = cut_to_flushed(&cluster.data_dir(id), end, TORN_BYTES)?;
        tracing::info!(node = id, ?cut, "power cut");
    }
    for &id in ids {
        cluster.restart(id).await?;
    }
    Ok(at_us)
}

cluster_tests::plain_and_secure! {
    async fn power_loss_of_one_sync_node_loses_nothing(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(50, Duration::from_secs(20))
            .await?;
        // A follower, then the leader.
        let leader = cluster.wait_leader().await?;
        let follower = leader % 3 + 1;
        power_loss(&mut cluster, &run, &[follower]).await?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        let leader = cluster.wait_leader().await?;
        power_loss(&mut cluster, &run, &[leader]).await?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(130);
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    async fn power_loss_of_two_sync_nodes_at_once_loses_nothing(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(60, Duration::from_secs(20))
            .await?;
        let leader = cluster.wait_leader().await?;
        let follower = leader % 3 + 1;
        power_loss(&mut cluster, &run, &[leader, follower]).await?;
        cluster.wait_leader().await?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        out.assert_pass(100);
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    /// Nodes 1 and 2 (`async`) lose their unflushed tails at once; node 3 (`sync`) holds every
    /// committed entry. Both recovered nodes know their committed index lies past their log end
    /// (the lost-commit floor), so neither votes for a candidate below it: they cannot elect each
    /// other and overwrite what node 3 committed; node 3 is elected and re-replicates. Loss is
    /// therefore allowed (the documented async bound) but none is expected here.
    async fn power_loss_of_two_async_nodes_loses_at_most_one_flush_interval(security) -> anyhow::Result<()> {
        let flush = [FlushPolicy::Async, FlushPolicy::Async, FlushPolicy::Sync];
        let mut cluster = TestCluster::start_as(security, &flush, |_| {}).await?;
        cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(80, Duration::from_secs(20))
            .await?;
        let at_us = power_loss(&mut cluster, &run, &[1, 2]).await?;
        cluster.wait_leader().await?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        let r = &out.report;
        // Everything but loss must hold as usual.
        assert!(
            r.never_sent.is_empty()
                && r.duplicates.unexplained.is_empty()
                && r.reordered.is_empty()
                && r.gaps.is_empty()
                && r.divergences.is_empty()
                && r.ack_mismatches.is_empty(),
            "{r}"
        );
        // Loss is allowed only within one flush interval (plus scheduling slack on a loaded
        // 2-core machine) before the power cut: the documented async behaviour.
        let slack_us = 500_000;
        let window_start = at_us.saturating_sub(FLUSH_INTERVAL_MS * 1000 + slack_us);
        let acked = out.history.acked();
        let mut lost_total = 0;
        for l in &r.lost {
            for tag in l.prefix.iter().chain(&l.middle).chain(&l.suffix) {
                lost_total += 1;
                let a = acked[tag];
                assert!(matches!(a.outcome, AttemptOutcome::Acked { .. }));
                assert!(
                    a.finished_us >= window_start,
                    "{tag} acknowledged at {} us was lost, but the power cut was at {at_us} us: \
                     older than one flush interval ({FLUSH_INTERVAL_MS} ms): {r}",
                    a.finished_us
                );
            }
        }
        tracing::info!(
            lost_total,
            "async power loss: acknowledged messages lost within the window"
        );
        assert!(r.acked >= 100, "{r}");
        cluster.shutdown().await
    }
}

cluster_tests::plain_and_secure! {
    /// An `async` follower writes its committed id behind, and its apply waits for that id
    /// before it makes entries visible: so after a power loss the recovered log, or else the
    /// lost-commit floor, still reaches the last entry it applied (what a reader could see
    /// there). Checked on the cut data dir itself, before the node rejoins and catches up.
    async fn an_async_followers_floor_covers_what_it_applied(security) -> anyhow::Result<()> {
        let mut cluster = TestCluster::start_as(security, &[FlushPolicy::Async; 3], |_| {}).await?;
        let leader = cluster.wait_leader().await?;
        let follower = leader % 3 + 1;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(80, Duration::from_secs(20))
            .await?;
        let store = cluster.node(follower).store().clone();
        let flushed = cluster.kill_reporting_flushed(follower).await;
        let applied = store.watermarks().applied.expect("the follower applied entries");
        drop(store);
        let dir = cluster.data_dir(follower);
        cut_to_flushed(&dir, flushed, TORN_BYTES)?;
        let cfg = cluster.configs[follower as usize - 1].log.clone();
        let log = raftmq_store::LogStore::open(&dir, cfg)?;
        let end = log.watermarks().appended.map_or(0, |l| l.index);
        let floor = log.lost_commit_floor().map_or(0, |l| l.index);
        assert!(
            end.max(floor) >= applied.index,
            "applied {} before the power loss, but the log ends at {end} and the floor is {floor}",
            applied.index
        );
        drop(log);
        cluster.restart(follower).await?;
        run.producers
            .wait_more_acked(40, Duration::from_secs(20))
            .await?;
        let out = run.finish(&cluster).await?;
        assert!(out.report.divergences.is_empty(), "{}", out.report);
        cluster.shutdown().await
    }
}
