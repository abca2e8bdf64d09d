//! Fast failover with the default (LAN) Raft timings: when the leader dies, its followers see
//! its replication stream break and pre-vote as soon as its lease ends
//! (`raftmq_leader_lost_pre_votes`), a new leader is elected, and a send that reached a
//! follower meanwhile waits there for the new leader instead of failing. How long it takes is
//! printed, not asserted (a benchmark's job: `raftmq failover-test` reports recovery times).

use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::raw::read_all;
use cluster_tests::raw::GrpcClient;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_proto::v1 as pb;

/// The node's defaults for the Raft timings (the harness slows them down for noisy machines).
fn lan_timings(c: &mut NodeConfig) {
    let d = NodeConfig::default();
    c.heartbeat_ms = d.heartbeat_ms;
    c.election_timeout_min_ms = d.election_timeout_min_ms;
    c.election_timeout_max_ms = d.election_timeout_max_ms;
}

/// A sync cluster with `tweak`, its leader, a client of one of its followers, and one send
/// through that follower (`topic`, body "before") acknowledged.
async fn with_follower_client(
    tweak: impl Fn(&mut NodeConfig),
    topic: &str,
) -> (TestCluster, u64, GrpcClient) {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], tweak)
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let mut c = cluster.grpc(follower).await.expect("connect");
    c.send(pb::SendRequest {
        message: Some(msg(topic, b"before")),
    })
    .await
    .expect("send before the failure");
    (cluster, leader, c)
}

/// The Raft log index of an acknowledged send.
fn acked_index(reply: pb::SendReply) -> u64 {
    let result = reply.result.expect("a send result");
    result.log_id.expect("the result names its log id").index
}

/// Node `id` keeps leading but refuses every write, as a stopping node does.
fn refuse_writes(cluster: &TestCluster, id: u64) {
    use std::sync::atomic::Ordering;
    cluster
        .node(id)
        .core()
        .shutting_down
        .store(true, Ordering::Release);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_pre_votes_at_once_and_a_follower_holds_the_send() {
    let (mut cluster, leader, mut c) = with_follower_client(lan_timings, "fo").await;

    let killed_at = Instant::now();
    cluster.kill(leader).await;
    // At once, through the follower: it waits for the new leader within the send timeout.
    let r = c
        .send(pb::SendRequest {
            message: Some(msg("fo", b"during")),
        })
        .await
        .expect("a send during the failover is held, not failed");
    let acked_after = killed_at.elapsed();
    let during_index = acked_index(r.into_inner());
    let up: Vec<u64> = cluster.ids().into_iter().filter(|&i| i != leader).collect();
    let new = cluster
        .wait_leader_among(&up, Duration::from_secs(10))
        .await
        .expect("a new leader");
    assert_ne!(new, leader);
    let pre_votes: u64 = up
        .iter()
        .map(|&i| cluster.node(i).core().metrics.leader_lost_pre_votes.get())
        .sum();
    assert!(
        pre_votes >= 1,
        "no follower pre-voted when the leader's stream broke"
    );
    println!("failover: send acknowledged {acked_after:?} after the kill; new leader {new}");

    // The ack means a quorum stored it; the client's follower learns the commit on the new
    // leader's next append, so the read waits for that, as a consumer's next pull would.
    cluster.wait_applied(during_index).await.expect("applied");
    let got = read_all(&mut c, "fo", 4).await.expect("read back");
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.3.as_slice()).collect();
    assert!(bodies.contains(&b"before".as_slice()) && bodies.contains(&b"during".as_slice()));
    cluster.shutdown().await.expect("shutdown");
}

/// A leader that is stopping (killed here, or a graceful stop with no voter to hand over to)
/// still answers on the connections it has, refusing a forwarded send with SHUTTING_DOWN
/// (`not_applied`). The follower holds the send and forwards it to the next leader, as it
/// does when it cannot connect; before, it passed the refusal on to the client at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_forwards_again_when_its_leader_refuses_because_it_is_stopping() {
    // Room for the refusals, the kill and an election with the harness's slow timings.
    let (mut cluster, leader, mut c) =
        with_follower_client(|c| c.send_timeout_ms = 6000, "st").await;
    refuse_writes(&cluster, leader);
    let mut held = c.clone();
    let during = tokio::spawn(async move {
        held.send(pb::SendRequest {
            message: Some(msg("st", b"during")),
        })
        .await
    });
    // Long enough for several refused forwards; well inside the send timeout.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!during.is_finished(), "the follower passed the refusal on");
    cluster.kill(leader).await;

    let r = during
        .await
        .expect("send task")
        .expect("the send goes to the new leader");
    let during_index = acked_index(r.into_inner());
    cluster.wait_applied(during_index).await.expect("applied");
    let got = read_all(&mut c, "st", 4).await.expect("read back");
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.3.as_slice()).collect();
    assert_eq!(bodies, [b"before".as_slice(), b"during".as_slice()]);
    cluster.shutdown().await.expect("shutdown");
}

/// When the refusing leader stays the only one known until the send timeout, the client gets
/// its refusal (SHUTTING_DOWN, `not_applied`: safe to resend), after the timeout, not at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_outlasting_the_send_timeout_reaches_the_client_as_it_was() {
    use raftmq_proto::v1::ErrorReason;

    let (cluster, leader, mut c) = with_follower_client(|c| c.send_timeout_ms = 800, "st").await;
    refuse_writes(&cluster, leader);
    let started = Instant::now();
    let err = c
        .send(pb::SendRequest {
            message: Some(msg("st", b"refused")),
        })
        .await
        .expect_err("the only leader refuses");
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert_eq!(err.code(), tonic::Code::Unavailable);
    let d = raftmq_proto::error_detail(&err).expect("detail");
    assert_eq!(d.reason, ErrorReason::ShuttingDown as i32);
    assert!(d.not_applied);
    cluster.shutdown().await.expect("shutdown");
}
