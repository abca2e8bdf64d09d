//! Produce and consume throughput through the RocketMQ port with the official Rust client
//! (crate `rocketmq` 5.0.0), to set next to `raftmq bench` (raftmq's own API) on the same
//! cluster. Prints one JSON line per phase.
//!
//! `cargo run --release -p cluster-tests --example rocketmq_bench -- <host:port> [messages]
//! [producers] [body-bytes] [consumers] [clients]` (defaults 2000, 8, 1024, 4, 1); the topic
//! is fresh per run. `producers` sending tasks, each one send in flight, share `clients`
//! client instances (each its own connection, as separate producer processes would have).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use rocketmq::conf::ClientOption;
use rocketmq::conf::LoggingFormat;
use rocketmq::conf::ProducerOption;
use rocketmq::conf::SimpleConsumerOption;
use rocketmq::model::common::FilterExpression;
use rocketmq::model::common::FilterType;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;
use rocketmq::SimpleConsumer;

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn client(addr: &str) -> ClientOption {
    let mut c = ClientOption::default();
    c.set_access_url(addr);
    c.set_enable_tls(false);
    c.set_timeout(Duration::from_secs(10));
    c.set_long_polling_timeout(Duration::from_secs(2));
    c
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let addr: String = arg(1, "127.0.0.1:9401".to_string());
    let messages: usize = arg(2, 2000);
    let producers: usize = arg(3, 8);
    let size: usize = arg(4, 1024);
    let consumers: usize = arg(5, 4);
    let clients: usize = arg::<usize>(6, 1).max(1);
    let topic = format!("rmqbench{}", std::process::id());

    let mut instances = Vec::new();
    for _ in 0..clients {
        let mut opt = ProducerOption::default();
        opt.set_topics(vec![topic.clone()]);
        opt.set_logging_format(LoggingFormat::Terminal);
        let mut p = Producer::new(opt, client(&addr)).expect("producer");
        p.start().await.expect("producer starts");
        instances.push(Arc::new(p));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let body = vec![b'x'; size];
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..producers {
        let p = instances[i % clients].clone();
        let (next, body, topic) = (next.clone(), body.clone(), topic.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < messages {
                let m = MessageBuilder::builder()
                    .set_topic(topic.clone())
                    .set_body(body.clone())
                    .build()
                    .expect("message");
                let t = Instant::now();
                p.send(m).await.expect("send");
                lat.push(t.elapsed().as_micros());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("producer task"));
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    println!(
        "{{\"kind\":\"rocketmq-produce\",\"messages\":{},\"producers\":{producers},\"clients\":{clients},\"body_bytes\":{size},\"elapsed_s\":{secs:.3},\"messages_per_s\":{:.1},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
        lat.len(),
        lat.len() as f64 / secs,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0)
    );

    let got = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..consumers {
        let (got, topic, addr) = (got.clone(), topic.clone(), addr.clone());
        tasks.push(tokio::spawn(async move {
            let mut opt = SimpleConsumerOption::default();
            opt.set_topics(vec![topic.clone()]);
            opt.set_consumer_group(format!("{topic}-g"));
            opt.set_logging_format(LoggingFormat::Terminal);
            let mut c = SimpleConsumer::new(opt, client(&addr)).expect("consumer");
            c.start().await.expect("consumer starts");
            let expr = FilterExpression::new(FilterType::Tag, "*");
            while got.load(Ordering::Relaxed) < messages {
                let batch = c
                    .receive_with(topic.clone(), &expr, 32, Duration::from_secs(30))
                    .await
                    .expect("receive");
                for m in batch {
                    c.ack(&m).await.expect("ack");
                    got.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("consumer task");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"kind\":\"rocketmq-consume\",\"messages\":{},\"consumers\":{consumers},\"elapsed_s\":{secs:.3},\"messages_per_s\":{:.1}}}",
        got.load(Ordering::Relaxed),
        got.load(Ordering::Relaxed) as f64 / secs
    );
}
