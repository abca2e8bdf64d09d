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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_pre_votes_at_once_and_a_follower_holds_the_send() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], lan_timings)
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let mut c = cluster.grpc(follower).await.expect("connect");
    c.send(pb::SendRequest {
        message: Some(msg("fo", b"before")),
    })
    .await
    .expect("send before the kill");

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
    assert!(r.into_inner().result.is_some());
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

    let got = read_all(&mut c, "fo", 4).await.expect("read back");
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.3.as_slice()).collect();
    assert!(bodies.contains(&b"before".as_slice()) && bodies.contains(&b"during".as_slice()));
    cluster.shutdown().await.expect("shutdown");
}
