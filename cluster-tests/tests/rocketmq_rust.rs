//! The official Apache RocketMQ 5 Rust client (crate `rocketmq` 5.0.0, unchanged) against a
//! three-node raftmq cluster through the RocketMQ port: it produces through a follower (which
//! forwards to the leader), across a leader kill, and every acknowledged message is stored
//! once on every node with its client message id, tag, keys and properties. Plus the raw
//! protocol answers a client library never shows: route shape, telemetry settings and the
//! status codes of bad requests.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::rocketmq::producer;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::rocketmq::v2::messaging_service_client::MessagingServiceClient;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

const TOPIC: &str = "rmq-orders";

fn rocketmq_addr(c: &TestCluster, id: u64) -> String {
    c.rocketmq_addr(id)
        .expect("the harness gives every node a RocketMQ port")
}

/// What a stored message kept: tag, keys, properties, body.
type Kept = (String, Vec<String>, BTreeMap<String, String>, Vec<u8>);

/// Every stored message of `topic` on node `id`, by client message id.
fn stored(c: &TestCluster, id: u64, topic: &str) -> HashMap<String, Kept> {
    let mut out = HashMap::new();
    for m in c.stored_messages(id, topic) {
        let m = m.message;
        let id = m
            .properties
            .get("UNIQ_KEY")
            .cloned()
            .expect("client message id stored");
        assert!(
            out.insert(id.clone(), (m.tags, m.keys, m.properties, m.body.to_vec()))
                .is_none(),
            "message {id} stored twice on node {id}"
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_client_produces_through_a_follower_and_across_a_leader_kill() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let p = producer(&rocketmq_addr(&cluster, follower), TOPIC).await;

    let mut acked: HashMap<String, String> = HashMap::new();
    for i in 0..20u32 {
        let body = format!("order-{i}");
        let m = MessageBuilder::builder()
            .set_topic(TOPIC)
            .set_tag(if i.is_multiple_of(2) { "even" } else { "odd" })
            .set_keys(vec![format!("key-{i}")])
            .set_properties(HashMap::from([("n", i.to_string())]))
            .set_body(body.clone().into_bytes())
            .build()
            .expect("message");
        let r = p.send(m).await.expect("send through a follower");
        acked.insert(r.message_id().to_string(), body);
    }
    // A batch: one entry, one receipt per message.
    let batch: Vec<_> = (0..5)
        .map(|i| {
            MessageBuilder::builder()
                .set_topic(TOPIC)
                .set_body(format!("batch-{i}").into_bytes())
                .build()
                .expect("message")
        })
        .collect();
    let receipts = p.batch_send(batch).await.expect("batch send");
    assert_eq!(receipts.len(), 5);
    for (i, r) in receipts.iter().enumerate() {
        acked.insert(r.message_id().to_string(), format!("batch-{i}"));
    }

    // Kill the leader: the follower forwards to the new one; the client sees nothing.
    cluster.kill(leader).await;
    for i in 0..10 {
        let body = format!("after-kill-{i}");
        let m = MessageBuilder::builder()
            .set_topic(TOPIC)
            .set_body(body.clone().into_bytes())
            .build()
            .expect("message");
        let r = p.send(m).await.expect("send after the leader kill");
        acked.insert(r.message_id().to_string(), body);
    }
    p.shutdown().await.expect("producer shutdown");

    cluster.restart(leader).await.expect("old leader restarts");
    cluster
        .wait_converged(Duration::from_secs(20))
        .await
        .expect("converged");
    for id in cluster.ids() {
        let got = stored(&cluster, id, TOPIC);
        assert_eq!(
            got.len(),
            acked.len(),
            "node {id}: every acked message once"
        );
        for (mid, body) in &acked {
            let (tag, keys, props, b) = got
                .get(mid)
                .unwrap_or_else(|| panic!("node {id} lacks {mid}"));
            assert_eq!(b, body.as_bytes());
            if let Some(n) = body.strip_prefix("order-") {
                let n: u32 = n.parse().unwrap();
                assert_eq!(tag, if n.is_multiple_of(2) { "even" } else { "odd" });
                assert_eq!(keys, &vec![format!("key-{n}")]);
                assert_eq!(props.get("n"), Some(&n.to_string()));
            }
        }
    }
    cluster.shutdown().await.expect("shutdown");
}

async fn consumer(addr: &str, topic: &str, group: &str) -> SimpleConsumer {
    cluster_tests::rocketmq::simple_consumer(addr, topic, group).await
}

/// Sends `n` messages with bodies `<prefix>-<i>`; returns their client message ids.
async fn produce(p: &Producer, topic: &str, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let m = MessageBuilder::builder()
            .set_topic(topic)
            .set_tag("t")
            .set_body(format!("{prefix}-{i}").into_bytes())
            .build()
            .expect("message");
        ids.push(p.send(m).await.expect("send").message_id().to_string());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_simple_consumer_receives_and_acks_across_a_leader_kill() {
    const TOPIC: &str = "rmq-consume";
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let addr = rocketmq_addr(&cluster, follower);
    let p = producer(&addr, TOPIC).await;
    let sent: std::collections::HashSet<String> =
        produce(&p, TOPIC, "m", 30).await.into_iter().collect();
    let c = consumer(&addr, TOPIC, "g-simple").await;
    let expr = FilterExpression::new(FilterType::Tag, "*");

    let mut acked: std::collections::HashSet<String> = Default::default();
    let mut held = Vec::new();
    let mut killed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while acked.len() < sent.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "acked {} of {}",
            acked.len(),
            sent.len()
        );
        let got = match c
            .receive_with(TOPIC, &expr, 4, Duration::from_secs(2))
            .await
        {
            Ok(g) => g,
            Err(e) => panic!("receive failed: {e:?}"),
        };
        for m in got {
            let id = m.message_id().to_string();
            assert!(sent.contains(&id), "received {id}, never sent");
            assert!(!acked.contains(&id), "acked message {id} delivered again");
            // Hold the first two unacked: they must come back with attempt 2.
            if held.len() < 2 && m.delivery_attempt() == 1 {
                held.push(id);
                continue;
            }
            if held.contains(&id) {
                assert!(
                    m.delivery_attempt() >= 2,
                    "{id} redelivered with attempt {}",
                    m.delivery_attempt()
                );
            }
            c.ack(&m).await.expect("ack");
            acked.insert(id);
        }
        if !killed && acked.len() >= 10 {
            // Acks and deadlines are replicated: the new leader knows them.
            cluster.kill(leader).await;
            killed = true;
        }
    }
    assert!(killed);
    assert_eq!(acked, sent);
    // Nothing more to receive: every message is acked.
    let rest = c
        .receive_with(TOPIC, &expr, 32, Duration::from_secs(2))
        .await
        .expect("receive");
    assert!(
        rest.is_empty(),
        "{} acked messages delivered again",
        rest.len()
    );
    cluster.shutdown().await.expect("shutdown");
}

fn resource(name: &str) -> Option<rmq::Resource> {
    Some(rmq::Resource {
        resource_namespace: String::new(),
        name: name.into(),
    })
}

fn raw_message(topic: &str, id: &str, body: Vec<u8>) -> rmq::Message {
    rmq::Message {
        topic: resource(topic),
        user_properties: HashMap::new(),
        system_properties: Some(rmq::SystemProperties {
            message_id: id.into(),
            message_type: rmq::MessageType::Normal as i32,
            ..Default::default()
        }),
        body: body.into(),
    }
}

fn code(s: &Option<rmq::Status>) -> rmq::Code {
    rmq::Code::try_from(s.as_ref().expect("a status").code).expect("a known code")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_protocol_routes_settings_and_refusals() {
    let no_auto_create = |c: &mut NodeConfig| c.topic_auto_create = false;
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], no_auto_create)
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let addr = rocketmq_addr(&cluster, follower);
    let mut c = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");

    // Unknown topic, auto-create off: TOPIC_NOT_FOUND, never OK with zero queues.
    let r = c
        .query_route(rmq::QueryRouteRequest {
            topic: resource("nope"),
            endpoints: None,
        })
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(&r.status), rmq::Code::TopicNotFound);
    assert!(r.message_queues.is_empty());

    // A created topic: its queues, served by the node asked.
    let mut admin = cluster.grpc(leader).await.expect("admin");
    admin
        .create_topic(raftmq_proto::v1::CreateTopicRequest {
            config: Some(raftmq_proto::v1::TopicConfig {
                name: "routed".into(),
                queue_count: 3,
                ..Default::default()
            }),
        })
        .await
        .expect("create topic");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let r = loop {
        let r = c
            .query_route(rmq::QueryRouteRequest {
                topic: resource("routed"),
                endpoints: None,
            })
            .await
            .expect("gRPC OK")
            .into_inner();
        if code(&r.status) == rmq::Code::Ok || tokio::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(code(&r.status), rmq::Code::Ok, "{r:?}");
    assert_eq!(r.message_queues.len(), 3);
    for (i, q) in r.message_queues.iter().enumerate() {
        assert_eq!(q.id, i as i32);
        assert_eq!(q.permission, rmq::Permission::ReadWrite as i32);
        let b = q.broker.as_ref().expect("broker");
        assert_eq!(b.id, 0);
        assert_eq!(b.name, cluster.node(follower).config().cluster_id);
        let e = b.endpoints.as_ref().expect("endpoints");
        assert_eq!(e.scheme, rmq::AddressScheme::IPv4 as i32);
        assert_eq!(
            format!("{}:{}", e.addresses[0].host, e.addresses[0].port),
            addr
        );
        assert!(q
            .accept_message_types
            .contains(&(rmq::MessageType::Normal as i32)));
    }

    // Telemetry: the producer's settings come back within a second, with the body limit.
    let settings = rmq::Settings {
        client_type: Some(rmq::ClientType::Producer as i32),
        pub_sub: Some(rmq::settings::PubSub::Publishing(rmq::Publishing {
            topics: vec![rmq::Resource {
                resource_namespace: String::new(),
                name: "routed".into(),
            }],
            max_body_size: 0,
            validate_message_type: true,
        })),
        ..Default::default()
    };
    let s =
        cluster_tests::rocketmq::telemetry_answer(&addr, settings, Duration::from_secs(1)).await;
    let Some(rmq::settings::PubSub::Publishing(p)) = s.pub_sub else {
        panic!("no publishing settings: {s:?}");
    };
    let limit = cluster
        .node(follower)
        .config()
        .store
        .limits
        .max_message_bytes;
    assert_eq!(p.max_body_size as u64, u64::from(limit));
    assert!(s.backoff_policy.is_some());

    // Bad sends: precise codes, nothing stored, the node keeps serving.
    let send = |msgs: Vec<rmq::Message>| {
        let mut c = c.clone();
        async move {
            c.send_message(rmq::SendMessageRequest { messages: msgs })
                .await
                .expect("gRPC OK")
                .into_inner()
        }
    };
    assert_eq!(code(&send(vec![]).await.status), rmq::Code::BadRequest);
    let big = vec![0u8; limit as usize + 1];
    let r = send(vec![raw_message("routed", "ID1", big)]).await;
    assert_eq!(code(&r.status), rmq::Code::MessageBodyTooLarge);
    assert_eq!(code(&r.entries[0].status), rmq::Code::MessageBodyTooLarge);
    let r = send(vec![raw_message("routed", "", b"x".to_vec())]).await;
    assert_eq!(code(&r.status), rmq::Code::IllegalMessageId);
    let r = send(vec![raw_message("nope", "ID2", b"x".to_vec())]).await;
    assert_eq!(code(&r.status), rmq::Code::TopicNotFound, "{r:?}");
    // A good one: OK, the client's id echoed, a queue offset.
    let r = send(vec![raw_message("routed", "ID3", b"ok".to_vec())]).await;
    assert_eq!(code(&r.status), rmq::Code::Ok, "{r:?}");
    assert_eq!(r.entries[0].message_id, "ID3");
    assert_eq!(r.entries[0].offset, 0);
    let hb = c
        .heartbeat(rmq::HeartbeatRequest {
            group: None,
            client_type: rmq::ClientType::Producer as i32,
        })
        .await
        .expect("heartbeat")
        .into_inner();
    assert_eq!(code(&hb.status), rmq::Code::Ok);
    cluster.shutdown().await.expect("shutdown");
}
