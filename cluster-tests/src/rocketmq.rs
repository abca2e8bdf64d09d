//! RocketMQ 5 clients for the tests: the official Rust client (crate `rocketmq` 5.0.0) set
//! up against one node's RocketMQ address, and a raw Telemetry round trip.

use std::time::Duration;

use futures::StreamExt;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::rocketmq::v2::messaging_service_client::MessagingServiceClient;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

/// Client options for `addr`: no TLS, 10 s requests, 2 s long polls.
pub fn client_option(addr: &str) -> ClientOption {
    let mut client = ClientOption::default();
    client.set_access_url(addr);
    client.set_enable_tls(false);
    client.set_timeout(Duration::from_secs(10));
    client.set_long_polling_timeout(Duration::from_secs(2));
    client
}

/// [`client_option`] signing with an access key and secret key (authenticated clusters).
pub fn signed_option(addr: &str, access_key: &str, secret_key: &str) -> ClientOption {
    let mut c = client_option(addr);
    c.set_access_key(access_key);
    c.set_secret_key(secret_key);
    c
}

/// A started producer of `topic`.
pub async fn producer(addr: &str, topic: &str) -> Producer {
    let mut opt = ProducerOption::default();
    opt.set_topics(vec![topic]);
    let mut p = Producer::new(opt, client_option(addr)).expect("producer");
    p.start()
        .await
        .expect("producer starts (route + telemetry)");
    p
}

/// A started simple consumer of `topic` in `group`.
pub async fn simple_consumer(addr: &str, topic: &str, group: &str) -> SimpleConsumer {
    let mut opt = SimpleConsumerOption::default();
    opt.set_topics(vec![topic]);
    opt.set_consumer_group(group);
    let mut c = SimpleConsumer::new(opt, client_option(addr)).expect("consumer");
    c.start().await.expect("consumer starts");
    c
}

/// Sends `settings` over a Telemetry stream to `addr` and returns the settings it answers
/// with, which must come within `within`.
pub async fn telemetry_answer(
    addr: &str,
    settings: rmq::Settings,
    within: Duration,
) -> rmq::Settings {
    let mut c = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(rmq::TelemetryCommand {
        status: None,
        command: Some(rmq::telemetry_command::Command::Settings(settings)),
    })
    .await
    .expect("queue settings");
    let outbound =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut answers = c.telemetry(outbound).await.expect("telemetry").into_inner();
    let first = tokio::time::timeout(within, answers.next())
        .await
        .expect("settings answered in time")
        .expect("an answer")
        .expect("not an error");
    drop(tx);
    match first.command {
        Some(rmq::telemetry_command::Command::Settings(s)) => s,
        other => panic!("not settings: {other:?}"),
    }
}
