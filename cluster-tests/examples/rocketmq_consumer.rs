//! The README's RocketMQ consumer: the official Rust client's SimpleConsumer (crate `rocketmq`
//! 5.0.0) receives and acks what `orders` holds for group `order-readers`. Run:
//! `cargo run -p cluster-tests --example rocketmq_consumer`.

use std::time::Duration;

use rocketmq::conf::{ClientOption, SimpleConsumerOption};
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::SimpleConsumer;

#[tokio::main]
async fn main() {
    let mut consumer_option = SimpleConsumerOption::default();
    consumer_option.set_topics(vec!["orders"]);
    consumer_option.set_consumer_group("order-readers");
    let mut client_option = ClientOption::default();
    client_option.set_access_url("127.0.0.1:9401");
    client_option.set_enable_tls(false);
    client_option.set_long_polling_timeout(Duration::from_secs(5));
    let mut consumer = SimpleConsumer::new(consumer_option, client_option).unwrap();
    consumer.start().await.unwrap();
    let filter = FilterExpression::new(FilterType::Tag, "*");
    for message in consumer.receive("orders", &filter).await.unwrap() {
        let body = String::from_utf8_lossy(message.body());
        println!(
            "{} (attempt {}): {body}",
            message.message_id(),
            message.delivery_attempt()
        );
        consumer.ack(&message).await.unwrap();
    }
    consumer.shutdown().await.unwrap();
}
