//! FIFO delivery with the official Apache RocketMQ 5 Rust client (crate `rocketmq` 5.0.0,
//! unchanged) against a three-node raftmq cluster whose nodes list the group in
//! `rocketmq-fifo-groups`, everything through a follower: one message group's messages come
//! strictly in send order with batch size 1; while one is unacked a receive gets nothing; an
//! unacked one comes back (attempt 2) before the next; the queue lock is replicated, so the
//! same holds across a leader kill. Telemetry tells the group's client `fifo = true` and
//! another group's `fifo = false`.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::rocketmq::v2 as rmq;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use rocketmq::model::message::MessageView;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

const TOPIC: &str = "rmq-fifo";
const GROUP: &str = "g-fifo";
const MESSAGE_GROUP: &str = "order-42";
const COUNT: usize = 6;
/// Longer than the client's long poll, so a receive while one is unacked ends empty.
const INVISIBLE: Duration = Duration::from_secs(4);

async fn producer(addr: &str) -> Producer {
    cluster_tests::rocketmq::producer(addr, TOPIC).await
}

async fn consumer(addr: &str) -> SimpleConsumer {
    cluster_tests::rocketmq::simple_consumer(addr, TOPIC, GROUP).await
}

/// Creates `TOPIC` with 4 queues and waits until `follower` knows it.
async fn topic(cluster: &TestCluster, leader: u64, follower: u64) {
    let mut admin = cluster.grpc(leader).await.expect("admin");
    admin
        .create_topic(raftmq_proto::v1::CreateTopicRequest {
            config: Some(raftmq_proto::v1::TopicConfig {
                name: TOPIC.into(),
                queue_count: 4,
                ..Default::default()
            }),
        })
        .await
        .expect("create topic");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while cluster.node(follower).store().topic(TOPIC).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "topic never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next message (batch size 1), retrying empty polls and errors of an election until
/// `within`; panics if none comes.
async fn next(c: &SimpleConsumer, within: Duration) -> MessageView {
    let expr = FilterExpression::new(FilterType::Tag, "*");
    let deadline = tokio::time::Instant::now() + within;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no message within {within:?}"
        );
        match c.receive_with(TOPIC, &expr, 1, INVISIBLE).await {
            Ok(got) => {
                assert!(got.len() <= 1, "batch size 1, got {}", got.len());
                if let Some(m) = got.into_iter().next() {
                    return m;
                }
            }
            Err(e) => {
                // The election after a kill: no leader to forward to yet.
                eprintln!("receive during the election: {e:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A receive (batch 8) that must end empty: the group's queue is locked.
async fn nothing(c: &SimpleConsumer, why: &str) {
    let expr = FilterExpression::new(FilterType::Tag, "*");
    let got = c
        .receive_with(TOPIC, &expr, 8, INVISIBLE)
        .await
        .expect("receive");
    let bodies: Vec<_> = got
        .iter()
        .map(|m| String::from_utf8_lossy(m.body()).into_owned())
        .collect();
    assert!(bodies.is_empty(), "{why}: got {bodies:?}");
}

fn expect(m: &MessageView, i: usize, attempt: i32) {
    assert_eq!(
        (
            String::from_utf8_lossy(m.body()).as_ref(),
            m.delivery_attempt()
        ),
        (format!("m-{i}").as_str(), attempt),
        "out of order"
    );
    assert_eq!(m.message_group(), Some(MESSAGE_GROUP));
}

/// The `fifo` flag Telemetry answers for a simple consumer of `group`.
async fn telemetry_fifo(addr: &str, group: &str) -> Option<bool> {
    let settings = rmq::Settings {
        client_type: Some(rmq::ClientType::SimpleConsumer as i32),
        pub_sub: Some(rmq::settings::PubSub::Subscription(rmq::Subscription {
            group: Some(rmq::Resource {
                resource_namespace: String::new(),
                name: group.into(),
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let s = cluster_tests::rocketmq::telemetry_answer(addr, settings, Duration::from_secs(2)).await;
    let Some(rmq::settings::PubSub::Subscription(sub)) = s.pub_sub else {
        panic!("no subscription settings: {s:?}");
    };
    sub.fifo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_group_gets_a_message_group_in_order_across_a_leader_kill() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        c.rocketmq_fifo_groups = vec![GROUP.into()];
    })
    .await
    .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    topic(&cluster, leader, follower).await;
    let addr = cluster.rocketmq_addr(follower).expect("RocketMQ port");
    assert_eq!(telemetry_fifo(&addr, GROUP).await, Some(true));
    assert_eq!(telemetry_fifo(&addr, "g-plain").await, Some(false));

    let p = producer(&addr).await;
    for i in 0..COUNT {
        let m = MessageBuilder::fifo_message_builder(
            TOPIC,
            format!("m-{i}").into_bytes(),
            MESSAGE_GROUP,
        )
        .build()
        .expect("message");
        p.send(m).await.expect("FIFO send through a follower");
    }
    let c = consumer(&addr).await;
    let within = Duration::from_secs(20);

    // 0, unacked: nothing else while it is invisible, then 0 again (attempt 2), not 1.
    let m = next(&c, within).await;
    expect(&m, 0, 1);
    nothing(&c, "a receive while m-0 is unacked").await;
    let m = next(&c, within).await;
    expect(&m, 0, 2);
    c.ack(&m).await.expect("ack m-0");
    // 1 and 2 in order, each only after the previous ack.
    for i in 1..3 {
        let m = next(&c, within).await;
        expect(&m, i, 1);
        c.ack(&m).await.expect("ack");
    }
    // 3 unacked, then kill the leader: the lock is replicated, 3 comes back before 4.
    let m = next(&c, within).await;
    expect(&m, 3, 1);
    cluster.kill(leader).await;
    let m = next(&c, Duration::from_secs(40)).await;
    expect(&m, 3, 2);
    c.ack(&m).await.expect("ack m-3 on the new leader");
    for i in 4..COUNT {
        let m = next(&c, within).await;
        expect(&m, i, 1);
        c.ack(&m).await.expect("ack");
    }
    nothing(&c, "all acked").await;
    p.shutdown().await.expect("producer shutdown");
    cluster.shutdown().await.expect("shutdown");
}
