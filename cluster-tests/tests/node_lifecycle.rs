//! Node lifecycle: retention-driven purge, a learner joining after the purge (snapshot
//! install) and promoted to voter, the disk-full guard, `/metrics` over HTTP, and the binary's
//! exit codes (bad config: 2; SIGTERM: graceful, 0), a fatal Raft error, a stopped node's
//! open connections, and who flushes inline.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::metrics::http_get;
use cluster_tests::process::node_binary;
use cluster_tests::raw::msg;
use cluster_tests::raw::read_all;
use cluster_tests::raw::GrpcClient;
use cluster_tests::raw::ReadMessage;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_proto::v1 as pb;
use tonic::Code;

/// The 20 ms `async` flush interval these tests always ran with (the harness default is 50).
fn flush_every_20ms(c: &mut NodeConfig) {
    c.log.flush_interval_ms = 20;
}

/// [`flush_every_20ms`] with the default disk ratios (clean 0.75, reject 0.90), which the
/// harness turns off; the test pretends the usage, so the host's disk does not matter.
fn default_disk_ratios(c: &mut NodeConfig) {
    flush_every_20ms(c);
    let d = raftmq_node::config::StoreConfig::default();
    c.store.disk_clean_ratio = d.disk_clean_ratio;
    c.store.disk_reject_ratio = d.disk_reject_ratio;
}

async fn fill(c: &mut GrpcClient, n: usize) -> u64 {
    let mut last = 0;
    for b in 0..n {
        let batch = (0..16)
            .map(|i| msg("ret", format!("{b}-{i}-{}", "x".repeat(1000)).as_bytes()))
            .collect();
        let r = c
            .send_batch(pb::SendBatchRequest { messages: batch })
            .await
            .expect("batch")
            .into_inner();
        last = r.results[0].log_id.as_ref().map_or(0, |l| l.index);
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_then_learner_joins_by_snapshot() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync], default_disk_ratios)
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let n1 = cluster.node(1);
    n1.store().set_disk_usage_override(Some(0.1));
    let mut c = cluster.grpc(1).await.expect("connect");
    fill(&mut c, 20).await;

    // Disk above the reject ratio: sends refused, nothing proposed.
    n1.store().set_disk_usage_override(Some(0.95));
    let e = c
        .send(pb::SendRequest {
            message: Some(msg("ret", b"full")),
        })
        .await
        .expect_err("disk full");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(raftmq_proto::error_detail(&e).is_some_and(|d| d.not_applied));

    // Above the clean ratio: retention deletes the oldest segments.
    n1.store().checkpoint().expect("checkpoint");
    n1.store().set_disk_usage_override(Some(0.8));
    let mut passes = 0;
    while raftmq_node::retention::retention_pass(n1.core())
        .await
        .expect("pass")
    {
        passes += 1;
        n1.store().checkpoint().expect("checkpoint");
        if passes == 2 {
            break;
        }
    }
    n1.store().set_disk_usage_override(Some(0.1));
    assert!(passes >= 1, "nothing deleted");
    let min = n1.store().watermarks().log.min_phys_offset;
    assert!(min.get() > 0, "min phys {min}");
    let r = c
        .pull(pb::PullRequest {
            topic: "ret".into(),
            queue_id: 0,
            offset: 0,
            ..Default::default()
        })
        .await
        .expect("pull")
        .into_inner();
    assert_eq!(r.status, pb::PullStatus::OffsetTooSmall as i32, "{r:?}");

    // A new node joins as learner (only a snapshot can bring it up), then becomes a voter.
    let joiner = cluster
        .add_node_with(FlushPolicy::Async, 1, |cfg| {
            flush_every_20ms(cfg);
            cfg.metrics_addr = Some("127.0.0.1:0".parse().expect("addr"));
        })
        .await
        .expect("joiner starts");
    assert_eq!(joiner, 2);
    let (n1, n2) = (cluster.node(1), cluster.node(2));
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        // The learner is in the membership and that membership is committed (applied), so
        // the promotion is not refused as a second change in progress.
        let (learners, committed): (Vec<u64>, bool) = n1.core().with_metrics(|m| {
            let learners = m.membership_config.membership().learner_ids().collect();
            let committed = m.last_applied >= *m.membership_config.log_id();
            (learners, committed)
        });
        if learners.contains(&2) && committed {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "learner not added");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = c
        .change_membership(pb::ChangeMembershipRequest {
            add_voters: vec![2],
            ..Default::default()
        })
        .await
        .expect("promote")
        .into_inner();
    assert_eq!(reply.voters, vec![1, 2]);
    let last = fill(&mut c, 1).await;
    loop {
        if n2.store().watermarks().applied.map(|l| l.index) >= Some(last) {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "joiner did not catch up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut c2 = cluster_tests::raw::connect(&n2.addrs().client.to_string(), None)
        .await
        .expect("connect n2");
    let key = |v: Vec<ReadMessage>| -> Vec<(i32, u64, u64)> {
        v.into_iter().map(|(q, o, id, _)| (q, o, id)).collect()
    };
    let (v1, v2) = (
        key(read_all(&mut c, "ret", 4).await.expect("read all")),
        key(read_all(&mut c2, "ret", 4).await.expect("read all")),
    );
    let only1: Vec<_> = v1.iter().filter(|x| !v2.contains(x)).collect();
    // The joiner holds every message the leader retains, at the same queue offsets and ids
    // (it may retain more: the snapshot was built before the leader deleted its segments).
    assert!(
        only1.is_empty(),
        "{} vs {}: only on n1 {only1:?}",
        v1.len(),
        v2.len()
    );

    let text = http_get(n2.addrs().metrics.expect("metrics on"), "/metrics");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("raftmq_applied_index"), "{text}");
    cluster.stop(2).await.expect("n2 down");
    cluster.shutdown().await.expect("clean shutdown");
}

#[test]
fn binary_exit_codes() {
    let bin = node_binary().expect("the raftmq-node binary");
    let out = std::process::Command::new(&bin)
        .args(["--heartbeat-ms", "5000"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("heartbeat-ms"));

    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("n1");
    let mut child = std::process::Command::new(&bin)
        .args(["--data-dir", data.to_str().expect("utf-8")])
        .args([
            "--raft-listen-addr",
            "127.0.0.1:0",
            "--client-listen-addr",
            "127.0.0.1:0",
        ])
        // No fixed default port: a local cluster (`raftmq cluster up`) may hold them.
        .args([
            "--no-metrics",
            "--no-rocketmq",
            "--segment-bytes",
            "65536",
            "--max-batch-bytes",
            "16384",
        ])
        .args([
            "--max-message-bytes",
            "4096",
            "--grpc-max-message-bytes",
            "2097152",
        ])
        .args(["--cq-units-per-file", "64", "--index-slots-per-file", "64"])
        .args(["--index-units-per-file", "64"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let abort = data.join("abort");
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while !abort.exists() {
        assert!(std::time::Instant::now() < end, "node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(std::time::Instant::now() < end, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        !abort.exists(),
        "abort marker cleared by the graceful shutdown"
    );
}

/// A fatal Raft error (here: the CommitLog closed under a running node, so the next append
/// fails) is seen by `failed` (what the binary exits 1 on) and the node refuses writes. Both
/// follow openraft's server metrics, which do not change on such a stop: they end when the
/// core drops its senders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fatal_raft_error_fails_the_node_and_refuses_writes() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync], flush_every_20ms)
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    let send = |body: &'static [u8]| pb::SendRequest {
        message: Some(msg("fatal", body)),
    };
    c.send(send(b"before"))
        .await
        .expect("a send before the error");

    let n1 = cluster.node(1);
    n1.log().close().expect("close the log");
    // The next append fails; openraft stops on it.
    let e = c
        .send(send(b"after"))
        .await
        .expect_err("no log to append to");
    assert_ne!(e.code(), Code::Ok);
    let why = tokio::time::timeout(Duration::from_secs(10), n1.failed())
        .await
        .expect("failed() resolves once raft stopped");
    assert!(!why.is_empty(), "names the error");
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while !n1.core().is_shutting_down() {
        assert!(tokio::time::Instant::now() < end, "writes still admitted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let e = c.send(send(b"later")).await.expect_err("refused");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    cluster.kill(1).await;
}

/// A client that keeps a SendStream open does not keep a stopped node alive: `kill` and
/// `shutdown` return with the node's log released (`kill` waits for that: under load,
/// requests' handlers still held it when it returned, and `s1_kill_leader` then found the
/// meta db locked), the log opens again in this process, and the client's stream ends.
#[tokio::test]
async fn a_client_with_an_open_stream_does_not_keep_a_stopped_node_alive() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], flush_every_20ms)
        .await
        .expect("cluster starts");
    for (kill, stop) in [(true, "kill"), (false, "shutdown")] {
        let id = cluster.wait_leader().await.expect("a leader");
        let mut c = cluster.grpc(id).await.expect("connect");
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let send = |seq| pb::SendStreamRequest {
            seq,
            message: Some(msg("held", b"open")),
            batch: None,
        };
        tx.unbounded_send(send(1)).expect("queued");
        let mut answers = c.send_stream(rx).await.expect("stream").into_inner();
        let first = answers.message().await.expect("an answer").expect("one");
        assert_eq!(first.seq, 1, "{first:?}");
        // The stream stays open (tx lives) while the node stops.
        let released = cluster.node(id).log().released_probe();
        if kill {
            cluster.kill(id).await;
        } else {
            cluster.stop(id).await.expect("graceful stop");
        }
        assert!(
            released(),
            "after {stop}: something still holds node {id}'s log"
        );
        cluster
            .reopen_log(id)
            .unwrap_or_else(|e| panic!("node {id} after {stop}: the log is free: {e:#}"));
        let end = tokio::time::timeout(Duration::from_secs(10), answers.message())
            .await
            .expect("the stream ends");
        assert!(!matches!(end, Ok(Some(_))), "after {stop}: {end:?}");
        drop(tx);
        cluster.restart(id).await.expect("restarts");
    }
    cluster.shutdown().await.expect("shutdown");
}

/// A follower flushes a quiet append on openraft's core (inline, two thread hand-offs fewer
/// than the flusher thread's path); a leader never does, because replication starts only
/// once its append returns. The role-change watcher switches it, so after a failover the
/// new leader stops and a follower goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_flush_quiet_appends_inline_and_leaders_do_not() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], flush_every_20ms)
        .await
        .expect("cluster starts");
    let inline = |cluster: &TestCluster| -> Vec<(u64, u64)> {
        let ids = cluster.ids().into_iter().filter(|&id| cluster.is_up(id));
        ids.map(|id| (id, cluster.node(id).log().inline_flushes()))
            .collect()
    };
    let mut alive = vec![1, 2, 3];
    for round in 0..2 {
        let leader = cluster.wait_leader().await.expect("a leader");
        // The watcher sees the new role within a few ms; the election's own entry may
        // have been appended before it did.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = inline(&cluster);
        let mut c = cluster.grpc(leader).await.expect("connect");
        // Quiet sends until every follower flushed 5 of them inline. An fdatasync slower
        // than 20 ms (a busy CI disk) turns inline flushing off for 1 s, so the sends span
        // a few seconds rather than stopping after 10.
        let mut after = before.clone();
        for i in 0..150 {
            let body = format!("round {round} send {i}");
            c.send(pb::SendRequest {
                message: Some(msg("inline", body.as_bytes())),
            })
            .await
            .expect("acked");
            tokio::time::sleep(Duration::from_millis(20)).await;
            after = inline(&cluster);
            let followers_done = before
                .iter()
                .zip(&after)
                .all(|((id, b), (_, a))| *id == leader || a - b >= 5);
            if i >= 9 && followers_done {
                break;
            }
        }
        for ((id, b), (_, a)) in before.iter().zip(&after) {
            match *id == leader {
                true => assert_eq!(a, b, "round {round}: leader {id} flushed inline"),
                false => assert!(a - b >= 5, "round {round}: follower {id}: {b} -> {a}"),
            }
        }
        if round == 0 {
            cluster.kill(leader).await;
            alive.retain(|&id| id != leader);
        }
    }
    for id in alive {
        cluster.kill(id).await;
    }
}
