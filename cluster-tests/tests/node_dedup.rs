//! Exactly-once sends across a leader kill: a resend of the same identity (raftmq client:
//! producer id + sequence; official RocketMQ Rust client: its client message id) after the
//! leader that stored it was killed is answered with the original result, and every node's
//! queue holds the message once.

use std::collections::HashMap;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::rocketmq::producer;
use raftmq_client::proto::Message;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::rocketmq::v2::messaging_service_client::MessagingServiceClient;

/// Bodies of every stored message of `topic` on node `id`, with how often each is stored.
fn stored_bodies(c: &TestCluster, id: u64, topic: &str) -> HashMap<Vec<u8>, usize> {
    let mut out = HashMap::new();
    for m in c.stored_messages(id, topic) {
        *out.entry(m.message.body.to_vec()).or_default() += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raftmq_client_resend_after_a_leader_kill_gets_the_original_result() {
    const TOPIC: &str = "dedup";
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let client = cluster.client(Duration::from_secs(5)).expect("client");
    let msg = |body: &str| Message {
        topic: TOPIC.into(),
        body: body.as_bytes().to_vec().into(),
        ..Message::default()
    };
    let single = client.identify(msg("single"));
    let batch: Vec<Message> = (0..3)
        .map(|i| client.identify(msg(&format!("batch-{i}"))))
        .collect();
    let first = client.send(single.clone()).await.expect("first send");
    let first_batch = client.send_batch(batch.clone()).await.expect("first batch");
    assert!(!first.duplicate && first_batch.iter().all(|r| !r.duplicate));

    // The leader that stored them dies; the same identities are sent to the new one.
    cluster.kill(leader).await;
    let again = client.send(single).await.expect("resend after the kill");
    let again_batch = client.send_batch(batch).await.expect("batch resend");
    assert!(again.duplicate, "answered from the dedup window: {again:?}");
    let original = |r: &raftmq_client::proto::SendResult| raftmq_client::proto::SendResult {
        duplicate: true,
        ..*r
    };
    assert_eq!(
        again,
        original(&first),
        "the original result, log id included"
    );
    assert_eq!(
        again_batch,
        first_batch.iter().map(original).collect::<Vec<_>>()
    );
    // A fresh message still gets stored.
    let fresh = client.send(msg("fresh")).await.expect("fresh send");
    assert!(!fresh.duplicate);
    // Half an identity, or the identity as fields and as a property: refused, nothing stored.
    let half = Message {
        producer_id: "p".into(),
        ..msg("half")
    };
    let mut twice = client.identify(msg("twice"));
    twice
        .properties
        .insert(raftmq_client::SEQUENCE_PROPERTY.into(), "9".into());
    for (bad, says) in [(half, "go together"), (twice, "given twice")] {
        let e = client.send(bad).await.expect_err("refused");
        assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }

    cluster.restart(leader).await.expect("old leader restarts");
    cluster
        .wait_converged(Duration::from_secs(30))
        .await
        .expect("converged");
    for id in cluster.ids() {
        let got = stored_bodies(&cluster, id, TOPIC);
        assert_eq!(got.len(), 5, "node {id}: {got:?}");
        assert!(
            got.values().all(|&n| n == 1),
            "node {id} stored a copy: {got:?}"
        );
        // The client sent the identity as fields; the record holds it as the properties.
        for m in cluster.stored_messages(id, TOPIC) {
            let p = &m.message.properties;
            assert_eq!(p[raftmq_client::PRODUCER_ID_PROPERTY], client.producer_id());
            assert!(
                p[raftmq_client::SEQUENCE_PROPERTY].parse::<u64>().is_ok(),
                "{p:?}"
            );
        }
    }
    cluster.shutdown().await.expect("shutdown");
}

/// A raw RocketMQ message with client message id `id`.
fn raw_message(topic: &str, id: &str, body: String) -> rmq::Message {
    rmq::Message {
        topic: Some(rmq::Resource {
            resource_namespace: String::new(),
            name: topic.into(),
        }),
        user_properties: HashMap::new(),
        system_properties: Some(rmq::SystemProperties {
            message_id: id.into(),
            message_type: rmq::MessageType::Normal as i32,
            ..Default::default()
        }),
        body: body.into_bytes().into(),
    }
}

/// A RocketMQ message with a fixed client message id, as the official client's own retry
/// sends it (the id is the message's, not the attempt's).
struct Resend {
    id: String,
    body: Vec<u8>,
}

impl rocketmq::model::message::Message for Resend {
    fn take_message_id(&mut self) -> String {
        self.id.clone()
    }
    fn take_topic(&mut self) -> String {
        "rmq-dedup".into()
    }
    fn take_body(&mut self) -> Vec<u8> {
        self.body.clone()
    }
    fn take_tag(&mut self) -> Option<String> {
        None
    }
    fn take_keys(&mut self) -> Vec<String> {
        Vec::new()
    }
    fn take_properties(&mut self) -> HashMap<String, String> {
        HashMap::new()
    }
    fn take_message_group(&mut self) -> Option<String> {
        None
    }
    fn take_delivery_timestamp(&mut self) -> Option<i64> {
        None
    }
    fn transaction_enabled(&mut self) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rocketmq_client_resend_of_a_message_id_is_stored_once() {
    const TOPIC: &str = "rmq-dedup";
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("a leader");
    let addr = cluster.rocketmq_addr(follower).expect("RocketMQ port");
    let p = producer(&addr, TOPIC).await;
    let resend = |id: &str, body: &str| Resend {
        id: id.into(),
        body: body.as_bytes().to_vec(),
    };
    let ids = ["7F0000010001000000000001", "7F0000010001000000000002"];
    for (i, id) in ids.iter().enumerate() {
        let r = p.send(resend(id, &format!("m{i}"))).await.expect("send");
        assert_eq!(r.message_id(), *id);
    }
    // The raw protocol shows the queue offsets the official client does not.
    let mut raw = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let raw_batch = || rmq::SendMessageRequest {
        messages: (0..2)
            .map(|i| {
                raw_message(
                    TOPIC,
                    &format!("7F00000100020000000000{i:02}"),
                    format!("raw-{i}"),
                )
            })
            .collect(),
    };
    let first = raw
        .send_message(raw_batch())
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        first.status.as_ref().map(|s| s.code),
        Some(rmq::Code::Ok as i32)
    );
    cluster.kill(leader).await;
    let again = raw
        .send_message(raw_batch())
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        again, first,
        "a resend is answered as the first send was, offsets included"
    );
    // Resent through the follower, which forwards to the new leader.
    for (i, id) in ids.iter().enumerate() {
        let r = p
            .send(resend(id, &format!("m{i}")))
            .await
            .expect("resend after the kill");
        assert_eq!(r.message_id(), *id, "answered as the first send was");
    }
    p.send(resend("7F0000010001000000000003", "m2"))
        .await
        .expect("a new id is stored");
    p.shutdown().await.expect("producer shutdown");

    cluster.restart(leader).await.expect("old leader restarts");
    cluster
        .wait_converged(Duration::from_secs(30))
        .await
        .expect("converged");
    for id in cluster.ids() {
        let got = stored_bodies(&cluster, id, TOPIC);
        assert_eq!(got.len(), 5, "node {id}: {got:?}");
        assert!(
            got.values().all(|&n| n == 1),
            "node {id} stored a copy: {got:?}"
        );
    }
    cluster.shutdown().await.expect("shutdown");
}
