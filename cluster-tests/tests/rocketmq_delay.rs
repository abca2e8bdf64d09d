//! Delayed delivery with the official Apache RocketMQ 5 Rust client (crate `rocketmq` 5.0.0,
//! unchanged) against a three-node raftmq cluster, everything through a follower: normal
//! messages sent around a delayed one are received at once, the delayed one not before its
//! delivery time, with attempt 1, type DELAY's delivery timestamp and no internal property;
//! its parked state is replicated, so it survives a leader kill between send and delivery.
//! Then a lone delayed message (never parked before its time) and a refused 25 h delay.

use std::collections::HashSet;
use std::time::Duration;
use std::time::SystemTime;

use cluster_tests::cluster::TestCluster;
use raftmq_node::config::FlushPolicy;
use raftmq_store::types::QueueId;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

const TOPIC: &str = "rmq-delay";
const GROUP: &str = "g-delay";
/// Slack for clock rounding between the test's clock reading and the broker's.
const SLACK_MS: u64 = 1000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock after the epoch")
        .as_millis() as u64
}

async fn producer(addr: &str) -> Producer {
    cluster_tests::rocketmq::producer(addr, TOPIC).await
}

async fn consumer(addr: &str) -> SimpleConsumer {
    cluster_tests::rocketmq::simple_consumer(addr, TOPIC, GROUP).await
}

async fn send(p: &Producer, body: &str, deliver_s: Option<i64>) -> String {
    let mut b = MessageBuilder::builder()
        .set_topic(TOPIC)
        .set_tag("t")
        .set_body(body.as_bytes().to_vec());
    if let Some(s) = deliver_s {
        b = b.set_delivery_timestamp(s);
    }
    let m = b.build().expect("message");
    p.send(m)
        .await
        .expect("send through a follower")
        .message_id()
        .to_string()
}

/// Creates `TOPIC` with one queue (so the delayed message and the normal ones share it and
/// the normal ones' receive parks it) and waits until `follower` knows it.
async fn one_queue_topic(cluster: &TestCluster, leader: u64, follower: u64) {
    let mut admin = cluster.grpc(leader).await.expect("admin");
    admin
        .create_topic(raftmq_proto::v1::CreateTopicRequest {
            config: Some(raftmq_proto::v1::TopicConfig {
                name: TOPIC.into(),
                queue_count: 1,
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

/// Waits until `node`'s replicated pop state shows one message parked (attempt 0).
async fn wait_parked(cluster: &TestCluster, node: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = cluster
            .node(node)
            .store()
            .receive_state(GROUP, TOPIC, QueueId::new(0));
        if s.is_some_and(|s| s.inflight.values().filter(|f| f.attempt == 0).count() == 1) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {node} never saw the delayed message parked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delayed_message_arrives_at_its_time_across_a_leader_kill() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let follower = cluster
        .ids()
        .into_iter()
        .find(|&i| i != leader)
        .expect("a follower");
    one_queue_topic(&cluster, leader, follower).await;
    let addr = cluster.rocketmq_addr(follower).expect("RocketMQ port");
    let p = producer(&addr).await;
    let c = consumer(&addr).await;
    let expr = FilterExpression::new(FilterType::Tag, "*");

    // Whole seconds (the Rust client's unit), 3 to 4 s from now.
    let deliver_s = i64::try_from(now_ms() / 1000 + 4).expect("seconds fit");
    let deliver_ms = u64::try_from(deliver_s).expect("positive") * 1000;
    let mut normal: HashSet<String> = HashSet::new();
    normal.insert(send(&p, "before", None).await);
    let delayed = send(&p, "delayed", Some(deliver_s)).await;
    normal.insert(send(&p, "after-1", None).await);
    normal.insert(send(&p, "after-2", None).await);

    // The normal ones at once: the delayed one does not block them.
    let mut got_normal = HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got_normal.len() < normal.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "normal messages late"
        );
        let got = c
            .receive_with(TOPIC, &expr, 8, Duration::from_secs(30))
            .await
            .expect("receive");
        for m in got {
            let id = m.message_id().to_string();
            assert_ne!(id, delayed, "delayed message delivered before its time");
            assert!(normal.contains(&id), "received {id}, never sent");
            assert_eq!(m.delivery_attempt(), 1);
            c.ack(&m).await.expect("ack");
            got_normal.insert(id);
        }
    }
    assert!(
        now_ms() < deliver_ms,
        "the normal messages took until the delivery time; the test proves nothing"
    );
    // The receive parked it; the follower has that state too. Kill the leader before its time.
    wait_parked(&cluster, follower).await;
    cluster.kill(leader).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    let m = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "delayed message never delivered"
        );
        let got = match c
            .receive_with(TOPIC, &expr, 8, Duration::from_secs(30))
            .await
        {
            Ok(g) => g,
            Err(e) => {
                // The election after the kill: the follower has no leader to forward to yet.
                eprintln!("receive during the election: {e:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let at = now_ms();
        if let Some(m) = got.into_iter().next() {
            assert_eq!(m.message_id(), delayed, "only the delayed one is left");
            assert!(
                at + SLACK_MS >= deliver_ms,
                "delivered at {at}, {} ms before its time {deliver_ms}",
                deliver_ms - at
            );
            eprintln!(
                "delayed message received {} ms after its delivery time",
                at.saturating_sub(deliver_ms)
            );
            break m;
        }
    };
    assert_eq!(m.delivery_attempt(), 1, "parking is not a delivery");
    assert_eq!(m.delivery_timestamp(), Some(deliver_s));
    assert_eq!(m.body(), b"delayed");
    assert!(
        !m.properties().contains_key("TIMER_DELIVER_MS"),
        "internal property shown: {:?}",
        m.properties()
    );
    c.ack(&m).await.expect("ack");
    let rest = c
        .receive_with(TOPIC, &expr, 8, Duration::from_secs(30))
        .await
        .expect("receive");
    assert!(rest.is_empty(), "{} messages delivered again", rest.len());

    // A lone delayed message (nothing after it, so no receive parks it) on the new leader.
    let lone_s = i64::try_from(now_ms() / 1000 + 3).expect("seconds fit");
    let lone_ms = u64::try_from(lone_s).expect("positive") * 1000;
    let lone = send(&p, "lone", Some(lone_s)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let m = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "lone delayed message never delivered"
        );
        let got = c
            .receive_with(TOPIC, &expr, 8, Duration::from_secs(30))
            .await
            .expect("receive");
        let at = now_ms();
        if let Some(m) = got.into_iter().next() {
            assert!(
                at + SLACK_MS >= lone_ms,
                "lone delivered {} ms early",
                lone_ms - at
            );
            break m;
        }
    };
    assert_eq!((m.message_id(), m.delivery_attempt()), (lone.as_str(), 1));
    c.ack(&m).await.expect("ack");

    // Further out than the maximum delay (24 h): refused, nothing stored.
    let too_far = i64::try_from(now_ms() / 1000 + 25 * 3600).expect("seconds fit");
    let m = MessageBuilder::builder()
        .set_topic(TOPIC)
        .set_body(b"too far".to_vec())
        .set_delivery_timestamp(too_far)
        .build()
        .expect("message");
    let refused = p.send(m).await;
    let why = format!("{:?}", refused.expect_err("a 25 h delay is refused"));
    assert!(why.contains("ILLEGAL_DELIVERY_TIME"), "{why}");
    p.shutdown().await.expect("producer shutdown");
    cluster.shutdown().await.expect("shutdown");
}
