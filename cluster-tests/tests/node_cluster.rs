//! Three nodes in one process: replication, reads from every node, forwarding, leader
//! transfer, quorum loss, restart catch-up, mixed flush policies.

use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::cluster::SEND_TIMEOUT_MS;
use cluster_tests::raw::msg;
use cluster_tests::raw::read_all;
use cluster_tests::raw::stream_sends;
use cluster_tests::raw::GrpcClient;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::send_stream_reply::Outcome;
use raftmq_proto::FORWARDED_BY_KEY;
use tonic::Code;

const MIXED: [FlushPolicy; 3] = [FlushPolicy::Sync, FlushPolicy::Async, FlushPolicy::Sync];

/// The 20 ms `async` flush interval these tests always ran with (the harness default is 50).
fn flush_every_20ms(c: &mut NodeConfig) {
    c.log.flush_interval_ms = 20;
}

fn follower_of(leader: u64) -> u64 {
    leader % 3 + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicate_forward_transfer_and_read_everywhere() {
    let cluster = TestCluster::start(&MIXED, flush_every_20ms)
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let client = raftmq_client::Client::connect(&cluster.seeds(), Default::default())
        .await
        .expect("client");

    // Through the client library (follows the leader).
    let mut acked = Vec::new();
    for i in 0..20u32 {
        let mut m = msg("orders", format!("m{i}").as_bytes());
        m.keys = vec![format!("k{i}")];
        acked.push(client.send(m).await.expect("send"));
    }
    let batch: Vec<pb::Message> = (0..10)
        .map(|i| msg("orders", format!("b{i}").as_bytes()))
        .collect();
    acked.extend(client.send_batch(batch).await.expect("batch"));
    assert_eq!(acked.len(), 30);
    assert!(acked
        .iter()
        .all(|r| r.log_id.is_some() && r.msg_id == r.phys_offset));

    // Raw call to a follower: forwarded once to the leader.
    let follower = follower_of(leader);
    let mut raw = cluster.grpc(follower).await.expect("connect");
    let r = raw
        .send(pb::SendRequest {
            message: Some(msg("orders", b"via-follower")),
        })
        .await
        .expect("forwarded send")
        .into_inner();
    acked.push(r.result.expect("result"));
    // An already forwarded call is not forwarded again.
    let mut req = tonic::Request::new(pb::SendRequest {
        message: Some(msg("orders", b"twice")),
    });
    req.metadata_mut()
        .insert(FORWARDED_BY_KEY, "9".parse().expect("header"));
    let err = raw.send(req).await.expect_err("not forwarded twice");
    assert_eq!(err.code(), Code::Unavailable);
    let d = raftmq_proto::error_detail(&err).expect("detail");
    assert!(d.not_applied && d.leader_id == Some(leader), "{d:?}");

    // A client that only knows a follower: its send is forwarded, and the answer names the
    // leader, so its next sends go there directly.
    let via_follower =
        raftmq_client::Client::new(&[cluster.client_addr(follower)], Default::default())
            .expect("client");
    acked.push(
        via_follower
            .send(msg("orders", b"hint"))
            .await
            .expect("forwarded"),
    );
    assert_eq!(
        via_follower.leader_hint(),
        Some(cluster.client_addr(leader)),
        "the forwarded answer names the leader"
    );

    // SendStream to a follower: every message answered on its own, by seq (each forwarded);
    // a bad one fails alone.
    let reqs = [(7, "orders", b"s1"), (8, "", b"s-"), (9, "orders", b"s2")].map(|(seq, t, b)| {
        pb::SendStreamRequest {
            seq,
            message: Some(msg(t, b)),
            batch: None,
        }
    });
    let mut got = stream_sends(&mut raw, reqs.to_vec()).await;
    for seq in [7, 9] {
        match got.remove(&seq) {
            Some(Outcome::Result(r)) => acked.push(r),
            o => panic!("seq {seq}: {o:?}"),
        }
    }
    match got.remove(&8) {
        Some(Outcome::Error(e)) => {
            assert_eq!(e.code, Code::InvalidArgument as i32, "{e:?}");
            assert!(e.detail.is_some_and(|d| d.not_applied));
        }
        o => panic!("seq 8: {o:?}"),
    }

    // SendStream to the leader: messages of a topic that arrive together share an entry;
    // a bad one is answered alone and the others keep their own answers.
    let mut lead = cluster.grpc(leader).await.expect("connect");
    let mut reqs: Vec<pb::SendStreamRequest> = (1..=6)
        .map(|seq| pb::SendStreamRequest {
            seq,
            message: Some(msg("orders", format!("g{seq}").as_bytes())),
            batch: None,
        })
        .collect();
    let mut bad_queue = msg("orders", b"q99");
    bad_queue.queue_id = Some(99);
    reqs.push(pb::SendStreamRequest {
        seq: 7,
        message: Some(bad_queue),
        batch: None,
    });
    reqs.push(pb::SendStreamRequest {
        seq: 8,
        message: Some(msg("", b"no topic")),
        batch: None,
    });
    for seq in [9, 10] {
        reqs.push(pb::SendStreamRequest {
            seq,
            message: Some(msg("audit", b"a")),
            batch: None,
        });
    }
    let mut got = stream_sends(&mut lead, reqs).await;
    for seq in (1..=6).chain([9, 10]) {
        match got.remove(&seq) {
            Some(Outcome::Result(r)) if seq <= 6 => acked.push(r),
            Some(Outcome::Result(_)) => {}
            o => panic!("seq {seq}: {o:?}"),
        }
    }
    for seq in [7, 8] {
        match got.remove(&seq) {
            Some(Outcome::Error(e)) => assert_eq!(e.code, Code::InvalidArgument as i32, "{e:?}"),
            o => panic!("seq {seq}: {o:?}"),
        }
    }
    // Good messages only: they arrive together (as a rule; retried in case the transport
    // split them) and share one entry.
    let mut grouped = false;
    for round in 0..3u64 {
        let reqs = (1..=6)
            .map(|i| pb::SendStreamRequest {
                seq: round * 10 + i,
                message: Some(msg("orders", b"together")),
                batch: None,
            })
            .collect();
        let got = stream_sends(&mut lead, reqs).await;
        let mut entries = std::collections::HashSet::new();
        for (seq, o) in got {
            match o {
                Outcome::Result(r) => {
                    entries.insert(r.log_id.as_ref().map(|l| l.index));
                    acked.push(r);
                }
                o => panic!("seq {seq}: {o:?}"),
            }
        }
        if entries.len() < 6 {
            grouped = true;
            break;
        }
    }
    assert!(grouped, "six messages sent together never shared an entry");

    // Identical queues on every node.
    let last = acked
        .iter()
        .filter_map(|r| r.log_id.as_ref())
        .map(|l| l.index)
        .max()
        .expect("ids");
    cluster
        .wait_applied(last)
        .await
        .expect("applied everywhere");
    let mut views = Vec::new();
    for id in 1..=3 {
        let mut c = cluster.grpc(id).await.expect("connect");
        views.push(read_all(&mut c, "orders", 4).await.expect("read all"));
        let q = c
            .query_by_id(pb::QueryByIdRequest {
                msg_id: acked[0].msg_id,
            })
            .await
            .expect("by id")
            .into_inner();
        assert_eq!(
            q.message.and_then(|m| m.message).map(|m| m.body.to_vec()),
            Some(b"m0".to_vec())
        );
        let k = c
            .query_by_key(pb::QueryByKeyRequest {
                topic: "orders".into(),
                key: "k3".into(),
                ..Default::default()
            })
            .await
            .expect("by key")
            .into_inner();
        assert_eq!(k.messages.len(), 1);
    }
    assert_eq!(views[0].len(), acked.len());
    assert_eq!(views[0], views[1]);
    assert_eq!(views[0], views[2]);
    for a in &acked {
        assert!(views[0]
            .iter()
            .any(|(q, o, id, _)| *q == a.queue_id && *o == a.queue_offset && *id == a.msg_id));
    }

    // Leader transfer to a chosen node, then sends keep working through the same client.
    let target = follower_of(leader);
    let new_leader = client
        .transfer_leader(Some(target))
        .await
        .expect("transfer");
    assert_eq!(new_leader, target);
    assert_eq!(cluster.wait_leader().await.expect("a leader"), target);
    client
        .send(msg("orders", b"after-transfer"))
        .await
        .expect("send after transfer");

    // Cluster status from a follower lists everyone with watermarks.
    let st = client
        .cluster_status_from(&cluster.client_addr(follower_of(target)))
        .await
        .expect("status");
    assert_eq!(st.members.len(), 3);
    assert_eq!(st.leader_id, Some(target));
    for m in &st.members {
        let w = m.watermarks.as_ref().expect("watermarks");
        assert!(w.committed_index.is_some(), "{m:?}");
        assert!(m.replication_lag.is_some(), "{m:?}");
    }
    let text = cluster
        .node(target)
        .core()
        .metrics
        .render(cluster.node(target).core());
    assert!(text.contains("raftmq_committed_index"), "{text}");
    assert!(
        text.contains("raftmq_send_latency_seconds_bucket"),
        "{text}"
    );

    // Transfer without a target: to the most caught-up other voter.
    let auto = client.transfer_leader(None).await.expect("auto transfer");
    assert_ne!(auto, target);
    let target = cluster.wait_leader().await.expect("a leader");
    assert_eq!(target, auto);

    // Graceful stop of the leader hands leadership over; the client keeps sending.
    let mut cluster = cluster;
    let started = Instant::now();
    cluster.stop(target).await.expect("clean shutdown");
    let next = cluster.wait_leader().await.expect("a leader");
    assert_ne!(next, target);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    client
        .send(msg("orders", b"after-stop"))
        .await
        .expect("send after leader stop");
    cluster.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_loss_and_restart_catch_up() {
    let mut cluster = TestCluster::start(&MIXED, flush_every_20ms)
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(leader).await.expect("connect");
    let send = |c: &mut GrpcClient, body: &'static [u8]| {
        let mut c = c.clone();
        async move {
            c.send(pb::SendRequest {
                message: Some(msg("q", body)),
            })
            .await
        }
    };
    send(&mut c, b"before").await.expect("3 up");

    // One follower down (crash): sends still succeed.
    let f1 = follower_of(leader);
    let f2 = follower_of(f1);
    cluster.kill(f1).await;
    for _ in 0..5 {
        send(&mut c, b"one-down").await.expect("2 of 3 up");
    }
    let st = c
        .cluster_status(pb::ClusterStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    let down = st.members.iter().find(|m| m.node_id == f1).expect("listed");
    assert_eq!(down.role, pb::Role::Unreachable as i32, "{down:?}");
    assert!(!down.error.is_empty());
    assert!(down.replication_lag.is_some_and(|l| l >= 5), "{down:?}");

    // Two down: UNAVAILABLE within the bound, known not applied.
    cluster.stop(f2).await.expect("clean shutdown");
    // Past the quorum-freshness window (4 heartbeats): the leader knows it has no quorum.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = Instant::now();
    let err = send(&mut c, b"no-quorum").await.expect_err("no quorum");
    let took = start.elapsed();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        took < Duration::from_millis(SEND_TIMEOUT_MS + 1000),
        "{took:?}"
    );
    let d = raftmq_proto::error_detail(&err).expect("detail");
    assert!(d.not_applied, "{d:?}");

    // Both come back (same data dirs); the crashed one catches up.
    cluster.restart(f1).await.expect("node restarts");
    cluster.restart(f2).await.expect("node restarts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(leader).await.expect("connect");
    let r = send(&mut c, b"after")
        .await
        .expect("quorum back")
        .into_inner();
    let last = r
        .result
        .and_then(|r| r.log_id)
        .map(|l| l.index)
        .expect("log id");
    cluster
        .wait_applied(last)
        .await
        .expect("applied everywhere");
    let mut views = Vec::new();
    for id in 1..=3 {
        let mut c = cluster.grpc(id).await.expect("connect");
        views.push(read_all(&mut c, "q", 4).await.expect("read all"));
    }
    assert_eq!(views[0].len(), 7, "{:?}", views[0]);
    assert_eq!(views[0], views[1]);
    assert_eq!(views[0], views[2]);
    assert!(views[0].iter().all(|(_, _, _, b)| b != b"no-quorum"));
    cluster.shutdown().await.expect("clean shutdown");
}
