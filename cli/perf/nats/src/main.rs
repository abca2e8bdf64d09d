//! JetStream R3 publish benchmark, the peer side of `raftmq bench suite`'s targets 1 to 3:
//!
//! ```text
//! natsbench SEED_URL PRODUCERS IN_FLIGHT SECONDS
//! ```
//!
//! Recreates the stream `BENCH` (subject `bench`, three replicas, file storage: JetStream's
//! defaults otherwise, so no fsync per message), then `PRODUCERS` connections each keep
//! `IN_FLIGHT` 1 KiB publishes waiting for their acks for `SECONDS`. With `NATS_LEADER_URLS`
//! (`name=url,...`) the producers connect to the stream leader's server, as the suite's client
//! connects to the raftmq leader. Prints one line: rate, p50, p99 (publish to ack).

use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use async_nats::jetstream;
use async_nats::jetstream::stream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use hdrhistogram::Histogram;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, seed, producers, in_flight, secs] = args.as_slice() else {
        anyhow::bail!("usage: natsbench SEED_URL PRODUCERS IN_FLIGHT SECONDS");
    };
    let producers: usize = producers.parse().context("PRODUCERS")?;
    let in_flight: usize = in_flight.parse().context("IN_FLIGHT")?;
    let secs: u64 = secs.parse().context("SECONDS")?;
    let js = jetstream::new(async_nats::connect(seed).await?);
    let _ = js.delete_stream("BENCH").await;
    let mut st = js
        .create_stream(stream::Config {
            name: "BENCH".into(),
            subjects: vec!["bench".into()],
            num_replicas: 3,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await?;
    let info = st.info().await?;
    let leader = info.cluster.as_ref().and_then(|c| c.leader.clone());
    let url = std::env::var("NATS_LEADER_URLS")
        .ok()
        .zip(leader)
        .and_then(|(map, leader)| {
            map.split(',')
                .filter_map(|kv| kv.split_once('='))
                .find(|(name, _)| *name == leader)
                .map(|(_, url)| url.to_string())
        })
        .unwrap_or_else(|| seed.clone());
    let body = bytes::Bytes::from(vec![b'x'; 1024]);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..producers {
        let (url, body) = (url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let js = jetstream::new(async_nats::connect(&url).await?);
            let mut latency = Histogram::<u64>::new(3)?;
            let mut pending = FuturesUnordered::new();
            let mut acked = 0u64;
            loop {
                while pending.len() < in_flight && Instant::now() < deadline {
                    let sent = Instant::now();
                    let ack = js.publish("bench", body.clone()).await?;
                    pending.push(async move { ack.await.map(|_| sent) });
                }
                let Some(done) = pending.next().await else {
                    break;
                };
                latency.record(done?.elapsed().as_micros() as u64)?;
                acked += 1;
            }
            anyhow::Ok((acked, latency))
        }));
    }
    let mut total = 0;
    let mut latency = Histogram::<u64>::new(3)?;
    for t in tasks {
        let (acked, h) = t.await??;
        total += acked;
        latency.add(h)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{:.0} msg/s p50 {:.2} ms p99 {:.2} ms ({total} acks, {producers} x {in_flight})",
        total as f64 / elapsed,
        latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency.value_at_quantile(0.99) as f64 / 1000.0,
    );
    Ok(())
}
