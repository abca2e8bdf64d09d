//! Disk full on a follower (issue 13 §4): a 3-node cluster with the disk guard on and a
//! pretended usage. A follower above `disk-reject-ratio` refuses appends (never crashes, keeps
//! what it had), sends go on with the other two; when a majority is full the leader refuses
//! sends with DISK_FULL (nothing proposed); once usage drops the follower catches up to lag 0
//! by itself, without another send and without a restart.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::metrics::metric;
use cluster_tests::raw::msg;
use cluster_tests::raw::GrpcClient;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_node::NodeHandle;
use raftmq_proto::v1 as pb;
use tokio::time::Instant;
use tonic::Code;

/// Usage below every ratio.
const EMPTY: f64 = 0.10;
/// Usage above the default reject ratio (0.90).
const FULL: f64 = 0.95;

/// The default disk ratios (the harness turns them off); the tests pretend the usage.
fn disk_guard_on(c: &mut NodeConfig) {
    let d = raftmq_node::config::StoreConfig::default();
    c.store.disk_clean_ratio = d.disk_clean_ratio;
    c.store.disk_reject_ratio = d.disk_reject_ratio;
    c.metrics_addr = Some("127.0.0.1:0".parse().expect("addr"));
}

/// `ClusterStatus` as node `via` answers it: (node id, disk_full, disk_usage) per member.
async fn disk_column(c: &mut GrpcClient) -> Vec<(u64, bool, Option<f64>)> {
    let r = c
        .cluster_status(pb::ClusterStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    let mut v: Vec<_> = (r.members.iter())
        .map(|m| (m.node_id, m.disk_full, m.disk_usage))
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// Sends `n` batches of 8 messages of 1 KiB; returns the log index of the last.
async fn send_batches(c: &mut GrpcClient, n: usize) -> u64 {
    let mut last = 0;
    for b in 0..n {
        let batch = (0..8)
            .map(|i| msg("disk", format!("{b}-{i}-{}", "x".repeat(1000)).as_bytes()))
            .collect();
        let r = c
            .send_batch(pb::SendBatchRequest { messages: batch })
            .await
            .expect("batch stored")
            .into_inner();
        last = r.results[0].log_id.as_ref().map_or(0, |l| l.index);
    }
    last
}

fn appended(n: &NodeHandle) -> u64 {
    n.store().watermarks().log.appended.map_or(0, |l| l.index)
}

fn applied(n: &NodeHandle) -> u64 {
    n.store().watermarks().applied.map_or(0, |l| l.index)
}

/// Waits (generously: the machine is shared) until `cond` holds.
async fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < end, "{what} within {secs} s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node is up and a follower: its Raft core did not stop on a storage error.
fn assert_running_follower(n: &NodeHandle) {
    n.core().with_metrics(|m| {
        assert!(m.running_state.is_ok(), "{:?}", m.running_state);
        assert_eq!(m.state, openraft::ServerState::Follower);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_follower_refuses_appends_and_catches_up_by_itself() {
    let s = FlushPolicy::Sync;
    let cluster = TestCluster::start(&[s, s, s], disk_guard_on)
        .await
        .expect("cluster starts");
    for id in cluster.ids() {
        cluster
            .node(id)
            .store()
            .set_disk_usage_override(Some(EMPTY));
    }
    let (leader, full) = cluster.leader_and_follower().await.expect("a leader");
    let other = (cluster.ids().into_iter())
        .find(|&i| i != leader && i != full)
        .expect("a third node");
    let mut c = cluster.grpc(leader).await.expect("connect");
    let first = send_batches(&mut c, 5).await;
    cluster.wait_applied(first).await.expect("all applied");

    // One follower above the reject ratio: it takes no more entries, the other two commit.
    let f = cluster.node(full);
    f.store().set_disk_usage_override(Some(FULL));
    let kept = appended(f);
    let last = send_batches(&mut c, 20).await;
    let o = cluster.node(other);
    wait_for("the other follower applies", 20, || applied(o) >= last).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(appended(f), kept, "a full follower appended entries");
    assert!(applied(f) <= kept);
    assert_running_follower(f);
    let status = disk_column(&mut c).await;
    assert!(status.contains(&(full, true, Some(FULL))), "{status:?}");
    assert!(status.contains(&(other, false, Some(EMPTY))), "{status:?}");
    assert_eq!(metric(f, "raftmq_disk_full"), 1.0);
    assert!(metric(f, "raftmq_appends_refused_disk_full_total") >= 1.0);
    assert_eq!(metric(o, "raftmq_disk_full"), 0.0);

    // Both followers full: no majority has room; once the leader has heard, sends are refused
    // with DISK_FULL and nothing is proposed (no wait for a commit that cannot come).
    o.store().set_disk_usage_override(Some(FULL));
    let l = cluster.node(leader);
    let before = appended(l);
    let end = Instant::now() + Duration::from_secs(20);
    let refusal = loop {
        let r = c
            .send(pb::SendRequest {
                message: Some(msg("disk", b"no room")),
            })
            .await;
        match r {
            Err(e) if e.code() == Code::ResourceExhausted => break e,
            // Before the leader learns of the second full disk: proposed, then no commit.
            Err(e) if e.code() == Code::DeadlineExceeded => {}
            other => panic!("a send with two full followers: {other:?}"),
        }
        assert!(
            Instant::now() < end,
            "sends never refused for a full majority"
        );
    };
    let detail = raftmq_proto::error_detail(&refusal).expect("error detail");
    assert!(detail.not_applied, "{refusal:?}");
    assert!(
        refusal.message().contains("no majority has room"),
        "{refusal:?}"
    );
    let proposed = appended(l);
    for _ in 0..3 {
        let e = c
            .send(pb::SendRequest {
                message: Some(msg("disk", b"no room")),
            })
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    }
    assert_eq!(appended(l), proposed, "a refused send was proposed");
    assert!(proposed >= before);
    o.store().set_disk_usage_override(Some(EMPTY));
    assert_running_follower(f);
    assert_running_follower(o);

    // Space returns: the follower catches up with no further send, no restart.
    f.store().set_disk_usage_override(Some(EMPTY));
    wait_for("the follower catches up to lag 0", 30, || {
        appended(f) >= appended(l) && applied(f) >= last
    })
    .await;
    // The leader's own view of the follower (openraft's matched index, the LAG column of
    // `cluster status`) reaches the end of its log too, with no send to nudge it.
    wait_for("the leader sees the follower at its last index", 30, || {
        l.core().with_metrics(|m| {
            let end = m.last_log_index.unwrap_or(0);
            let matched = m.replication.as_ref().and_then(|r| r.get(&full).cloned());
            matched.flatten().is_some_and(|id| id.index >= end)
        })
    })
    .await;
    assert_running_follower(f);
    assert_eq!(metric(f, "raftmq_disk_full"), 0.0);
    let end = Instant::now() + Duration::from_secs(10);
    while disk_column(&mut c).await.iter().any(|m| m.1) {
        assert!(Instant::now() < end, "status still reports a full disk");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The leader hears of the room at its next poll of the voters; a send refused meanwhile
    // stored nothing.
    let end = Instant::now() + Duration::from_secs(10);
    let last = loop {
        let r = c
            .send(pb::SendRequest {
                message: Some(msg("disk", b"room again")),
            })
            .await;
        match r {
            Ok(r) => {
                break r
                    .into_inner()
                    .result
                    .and_then(|a| a.log_id)
                    .map_or(0, |l| l.index)
            }
            Err(e) if e.code() == Code::ResourceExhausted => {
                assert!(Instant::now() < end, "sends still refused: {e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("send after space returned: {e:?}"),
        }
    };
    cluster.wait_applied(last).await.expect("all applied");
    cluster.shutdown().await.expect("clean shutdown");
}
