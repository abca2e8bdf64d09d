//! The README's RocketMQ producer: the official Rust client (crate `rocketmq` 5.0.0) sends one
//! message to a raftmq node (`raftmq cluster up` first). Run:
//! `cargo run -p cluster-tests --example rocketmq_producer`.

use rocketmq::conf::{ClientOption, ProducerOption};
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;

#[tokio::main]
async fn main() {
    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec!["orders"]);
    let mut client_option = ClientOption::default();
    client_option.set_access_url("127.0.0.1:9401");
    client_option.set_enable_tls(false);
    let mut producer = Producer::new(producer_option, client_option).unwrap();
    producer.start().await.unwrap();
    let message = MessageBuilder::builder()
        .set_topic("orders")
        .set_tag("paid")
        .set_keys(vec!["order-17"])
        .set_body(b"hello from RocketMQ".to_vec())
        .build()
        .unwrap();
    let receipt = producer.send(message).await.unwrap();
    println!("stored, message id {}", receipt.message_id());
    producer.shutdown().await.unwrap();
}
