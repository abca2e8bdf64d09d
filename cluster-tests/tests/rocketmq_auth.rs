//! The official RocketMQ Rust client (crate `rocketmq` 5.0.0) against an authenticated
//! cluster: with a producer user's access key (`set_access_key` / `set_secret_key`) it sends
//! through a follower, with a consumer user's it receives and acks; a wrong secret key, a
//! topic outside the producer's patterns and a group outside the consumer's are refused.

use std::time::Duration;

use cluster_tests::auth::TestAuth;
use cluster_tests::cluster::TestCluster;
use cluster_tests::rocketmq::signed_option;
use raftmq_client::proto as pb;
use raftmq_node::config::FlushPolicy;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

const T: Duration = Duration::from_secs(5);

fn message(topic: &str, body: &str) -> impl rocketmq::model::message::Message {
    MessageBuilder::builder()
        .set_topic(topic)
        .set_tag("t")
        .set_body(body.as_bytes().to_vec())
        .build()
        .expect("message")
}

async fn started_producer(
    addr: &str,
    topics: Vec<&str>,
    ak: &str,
    sk: &str,
) -> Result<Producer, String> {
    let mut opt = ProducerOption::default();
    opt.set_topics(topics);
    let mut p = Producer::new(opt, signed_option(addr, ak, sk)).map_err(|e| e.to_string())?;
    p.start().await.map_err(|e| e.to_string())?;
    Ok(p)
}

async fn started_consumer(
    addr: &str,
    group: &str,
    ak: &str,
    sk: &str,
) -> Result<SimpleConsumer, String> {
    let mut opt = SimpleConsumerOption::default();
    opt.set_topics(vec!["orders"]);
    opt.set_consumer_group(group);
    let mut c = SimpleConsumer::new(opt, signed_option(addr, ak, sk)).map_err(|e| e.to_string())?;
    c.start().await.map_err(|e| e.to_string())?;
    Ok(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn official_rust_client_with_access_keys() -> anyhow::Result<()> {
    let auth = TestAuth::new()?;
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| auth.apply(c)).await?;
    let (_, follower) = cluster.leader_and_follower().await?;
    let addr = cluster.rocketmq_addr(follower).expect("rocketmq listener");
    let admin = cluster.client_as(T, Some(auth.admin.clone()))?;
    for t in ["orders", "audit"] {
        admin
            .create_topic(pb::TopicConfig {
                name: t.into(),
                queue_count: 2,
                perm: 0,
            })
            .await?;
    }
    let prod = admin
        .create_user("shop", "producer", vec!["orders".into()], vec![])
        .await?;
    let cons = admin
        .create_user(
            "reader",
            "consumer",
            vec!["orders".into()],
            vec!["g1".into()],
        )
        .await?;
    let (pak, psk) = (prod.user.expect("user").access_key, prod.secret_key);
    let (cak, csk) = (cons.user.expect("user").access_key, cons.secret_key);

    // A wrong secret key: refused (at start, or at the first send).
    let bad = match started_producer(&addr, vec!["orders"], &pak, "wrong").await {
        Err(e) => e,
        Ok(p) => p
            .send(message("orders", "x"))
            .await
            .expect_err("wrong key sends")
            .to_string(),
    };
    assert!(
        bad.contains("bad signature") || bad.to_lowercase().contains("unauthorized"),
        "{bad}"
    );

    let p = started_producer(&addr, vec!["orders"], &pak, &psk)
        .await
        .map_err(anyhow::Error::msg)?;
    for i in 0..5 {
        p.send(message("orders", &format!("m{i}"))).await?;
    }
    let denied = p
        .send(message("audit", "no"))
        .await
        .expect_err("topic outside the patterns");
    assert!(denied.to_string().contains("may not"), "{denied}");

    let c = started_consumer(&addr, "g1", &cak, &csk)
        .await
        .map_err(anyhow::Error::msg)?;
    let filter = FilterExpression::new(FilterType::Tag, "*");
    let mut got = Vec::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while got.len() < 5 && tokio::time::Instant::now() < end {
        for m in c.receive("orders", &filter).await? {
            got.push(String::from_utf8_lossy(m.body()).to_string());
            c.ack(&m).await?;
        }
    }
    got.sort();
    assert_eq!(got, ["m0", "m1", "m2", "m3", "m4"]);

    // A group outside the consumer's patterns.
    let other = match started_consumer(&addr, "g2", &cak, &csk).await {
        Err(e) => e,
        Ok(c) => c
            .receive("orders", &filter)
            .await
            .expect_err("group g2")
            .to_string(),
    };
    assert!(
        other.contains("may not") || other.to_lowercase().contains("forbidden"),
        "{other}"
    );
    cluster.shutdown().await
}
