//! Bounded resources on a single-node cluster: each limit answers a clear status naming its
//! setting (or clamps), and the node keeps serving.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::v1 as pb;
use raftmq_store::types::QueueId;
use tonic::Code;

fn topic(name: &str, queues: u32) -> pb::CreateTopicRequest {
    pb::CreateTopicRequest {
        config: Some(pb::TopicConfig {
            name: name.into(),
            queue_count: queues,
            perm: 0,
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_pull_max_bytes_still_returns_the_messages() {
    let cluster = TestCluster::start(&[FlushPolicy::Async], |c| {
        c.store.max_pull_messages = 1024;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster
        .grpc(1)
        .await
        .expect("connect")
        .max_decoding_message_size(64 << 20);
    c.create_topic(topic("big", 1)).await.expect("create");
    // 300 x 15 KiB = 4.4 MiB: more than grpc-max-message-bytes (4 MiB) in one queue.
    let body = vec![7u8; 15 << 10];
    for _ in 0..300 {
        c.send(pb::SendRequest {
            message: Some(msg("big", &body)),
        })
        .await
        .expect("send");
    }
    let mut offset = 0;
    let mut pulls = 0;
    while offset < 300 {
        let r = c
            .pull(pb::PullRequest {
                topic: "big".into(),
                queue_id: 0,
                offset,
                max_count: 1024,
                max_bytes: u32::MAX,
                ..Default::default()
            })
            .await
            .expect("a huge max_bytes is clamped, not an answer over the gRPC limit")
            .into_inner();
        assert!(!r.messages.is_empty(), "pull at {offset} returned nothing");
        assert!(
            r.messages.len() < 300,
            "one answer cannot carry all of them"
        );
        offset = r.next_offset;
        pulls += 1;
    }
    assert!(pulls >= 2, "{pulls}");
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_offsets_for_unknown_topics_and_queues_are_refused() {
    let cluster = TestCluster::start(&[FlushPolicy::Async], |_| {})
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    c.create_topic(topic("known", 2)).await.expect("create");
    let commit = |topic: String, queue_id: i32| pb::CommitOffsetRequest {
        group: "g".into(),
        topic,
        queue_id,
        offset: 5,
    };
    let applied_before = cluster.node(1).store().watermarks().applied;
    for i in 0..1000u64 {
        // Pseudo-random names, as a client inventing them would.
        let name = format!("t{:x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let e = c
            .commit_offset(commit(name, (i % 7) as i32))
            .await
            .expect_err("unknown topic");
        assert_eq!(e.code(), Code::NotFound, "{e:?}");
    }
    let e = c
        .commit_offset(commit("known".into(), 2))
        .await
        .expect_err("queue 2 of a 2-queue topic");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    // Nothing was proposed for them: the offset table cannot have grown.
    assert_eq!(cluster.node(1).store().watermarks().applied, applied_before);
    for i in 0..1000u64 {
        let name = format!("t{:x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let q = QueueId::new((i % 7) as u32);
        assert_eq!(cluster.node(1).store().fetch_offset("g", &name, q), None);
    }
    c.commit_offset(commit("known".into(), 1))
        .await
        .expect("a real queue still commits");
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_beyond_max_topics_are_refused() {
    let cluster = TestCluster::start(&[FlushPolicy::Async], |c| {
        c.store.limits.max_topics = 3;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    for name in ["a", "b", "c"] {
        c.create_topic(topic(name, 1)).await.expect("create");
    }
    let e = c
        .create_topic(topic("d", 1))
        .await
        .expect_err("a fourth topic");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max-topics"), "{e:?}");
    let e = c
        .send(pb::SendRequest {
            message: Some(msg("auto", b"x")),
        })
        .await
        .expect_err("auto-create of a fourth topic");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max-topics"), "{e:?}");
    c.send(pb::SendRequest {
        message: Some(msg("a", b"x")),
    })
    .await
    .expect("existing topics still take sends");
    assert_eq!(cluster.node(1).store().topic_count(), 3);
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_past_the_cap_answer_at_once() {
    let cluster = TestCluster::start(&[FlushPolicy::Async], |c| {
        c.max_long_poll_waiters = 2;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    c.create_topic(topic("lp", 1)).await.expect("create");
    let poll = pb::PullRequest {
        topic: "lp".into(),
        queue_id: 0,
        offset: 0,
        long_poll_timeout_ms: 30_000,
        ..Default::default()
    };
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let mut c = c.clone();
        let p = poll.clone();
        waiters.push(tokio::spawn(async move { c.pull(p).await }));
    }
    let core = cluster.node(1).core().clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while core.long_polls.waiting() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the two polls never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Without the cap it would wait (and end OK, NO_NEW_MSG): an error is the answer at once.
    let e = c.pull(poll.clone()).await.expect_err("a third waiter");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max-long-poll-waiters"), "{e:?}");
    let now = pb::PullRequest {
        long_poll_timeout_ms: 0,
        ..poll.clone()
    };
    c.pull(now).await.expect("a pull that does not wait passes");
    c.send(pb::SendRequest {
        message: Some(msg("lp", b"wake")),
    })
    .await
    .expect("send");
    for w in waiters {
        let r = w.await.expect("task").expect("the waiters get the message");
        assert_eq!(r.into_inner().messages.len(), 1);
    }
    assert_eq!(core.long_polls.waiting(), 0, "slots given back");
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_groups_beyond_max_groups_are_refused() {
    let cluster = TestCluster::start(&[FlushPolicy::Async], |c| {
        c.store.limits.max_groups = 2;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    c.create_topic(topic("t", 1)).await.expect("create");
    let commit = |group: &str| pb::CommitOffsetRequest {
        group: group.into(),
        topic: "t".into(),
        queue_id: 0,
        offset: 0,
    };
    for g in ["g1", "g2"] {
        c.commit_offset(commit(g)).await.expect("room for it");
    }
    let e = c
        .commit_offset(commit("g3"))
        .await
        .expect_err("a third group");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max-groups"), "{e:?}");
    c.commit_offset(commit("g1"))
        .await
        .expect("a known group still commits");
    cluster.shutdown().await.expect("shutdown");
}
