//! `raftmq bench produce|consume`: throughput and latency, with a progress bar while running
//! and the figures of [`crate::bench`] at the end.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use clap::Args;
use clap::Subcommand;
use indicatif::ProgressBar;
use indicatif::ProgressStyle;
use raftmq_client::proto::Message;
use raftmq_client::proto::PullRequest;
use raftmq_client::proto::PullStatus;
use raftmq_client::Client;
use raftmq_client::ClientError;

use super::send::filler;
use super::Global;
use crate::bench::BenchSummary;
use crate::bench::Latencies;
use crate::clock::now_ms;
use crate::clock::parse_duration;
use crate::output::print_json;

/// Bench commands.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Send as fast as the window allows.
    #[command(after_help = "Examples:
  raftmq bench produce --producers 4 --in-flight 16 --size 1024 --duration 30s
  raftmq bench produce --count 100000 --batch 32 --size 256 --json")]
    Produce(ProduceArgs),
    /// Pull a topic from one node from its min offsets.
    #[command(after_help = "Examples:
  raftmq bench consume --topic bench --node 2
  raftmq bench consume --topic bench --addr 127.0.0.1:9203 --duration 10s")]
    Consume(ConsumeBenchArgs),
}

/// `bench produce` options.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Producers (one client connection each).
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Sends in flight per producer.
    #[arg(long, default_value_t = 8)]
    pub in_flight: usize,
    /// Body size, bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Messages per SendBatch (1 = plain Send).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Run this long.
    #[arg(long, value_parser = parse_duration, conflicts_with = "count")]
    pub duration: Option<Duration>,
    /// Send this many messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// Topic.
    #[arg(long, default_value = "bench")]
    pub topic: String,
}

/// `bench consume` options.
#[derive(Debug, Args)]
pub struct ConsumeBenchArgs {
    /// Topic.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Node id to pull from (local cluster).
    #[arg(long, conflicts_with = "addr")]
    pub node: Option<u64>,
    /// Client address to pull from.
    #[arg(long)]
    pub addr: Option<String>,
    /// Messages per pull.
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// Stop after this long.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
}

/// Short name of an error, for the errors-by-kind table.
pub fn error_kind(e: &ClientError) -> String {
    match e {
        ClientError::Rejected { code, .. } => format!("rejected {code:?}").to_lowercase(),
        ClientError::UnknownOutcome { .. } => "unknown outcome".into(),
        ClientError::Unavailable { .. } => "unavailable".into(),
        ClientError::InvalidArgument(_) => "invalid argument".into(),
    }
}

/// Shared counters of a run.
#[derive(Default)]
struct Progress {
    messages: AtomicU64,
    bytes: AtomicU64,
    claimed: AtomicU64,
    stop: AtomicBool,
}

fn bar(json: bool, len: u64, what: &str) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {what} {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb
}

/// Drives the bar until `stop`: by messages (count) or by elapsed milliseconds (duration).
fn ticker(pb: ProgressBar, p: Arc<Progress>, by_count: bool) -> tokio::task::JoinHandle<()> {
    let start = Instant::now();
    tokio::spawn(async move {
        while !p.stop.load(Ordering::Relaxed) {
            let n = p.messages.load(Ordering::Relaxed);
            if by_count {
                pb.set_position(n);
            } else {
                pb.set_position(start.elapsed().as_millis() as u64);
                pb.set_message(format!("{n} messages"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pb.finish_and_clear();
    })
}

type WorkerResult = (Latencies, BTreeMap<String, u64>);

async fn produce_worker(
    client: Client,
    a: Arc<ProduceArgs>,
    p: Arc<Progress>,
    deadline: Option<Instant>,
) -> WorkerResult {
    let mut lat = Latencies::new();
    let mut errors = BTreeMap::new();
    let batch = a.batch.max(1) as u64;
    loop {
        if p.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let first = p.claimed.fetch_add(batch, Ordering::Relaxed);
        let n = match a.count {
            Some(c) if first >= c => break,
            Some(c) => batch.min(c - first),
            None => batch,
        };
        let messages: Vec<Message> = (0..n)
            .map(|i| Message {
                topic: a.topic.clone(),
                body: filler(a.size, first + i),
                born_timestamp_ms: now_ms(),
                ..Message::default()
            })
            .collect();
        let t0 = Instant::now();
        let res = if n == 1 {
            client
                .send(messages.into_iter().next().unwrap_or_default())
                .await
                .map(|_| ())
        } else {
            client.send_batch(messages).await.map(|_| ())
        };
        match res {
            Ok(()) => {
                lat.record(t0.elapsed());
                p.messages.fetch_add(n, Ordering::Relaxed);
                p.bytes.fetch_add(n * a.size as u64, Ordering::Relaxed);
            }
            Err(e) => {
                *errors.entry(error_kind(&e)).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    (lat, errors)
}

async fn produce(g: &Global, a: ProduceArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(
        a.producers > 0 && a.in_flight > 0,
        "--producers and --in-flight must be > 0"
    );
    let duration = match (a.duration, a.count) {
        (None, None) => Some(Duration::from_secs(30)),
        (d, _) => d,
    };
    let seeds = g.seeds()?;
    let p = Arc::new(Progress::default());
    let pb = match a.count {
        Some(c) => bar(g.json, c, "messages"),
        None => bar(g.json, duration.map_or(0, |d| d.as_millis() as u64), "ms"),
    };
    let tick = ticker(pb, p.clone(), a.count.is_some());
    let a = Arc::new(a);
    let start = Instant::now();
    let deadline = duration.map(|d| start + d);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..a.producers {
        // Learn the leader first: a follower forwards every send (an extra hop), and a write
        // it answered does not tell the client who leads.
        let client = Client::connect(&seeds, crate::client_tls::options()).await?;
        for _ in 0..a.in_flight {
            tasks.spawn(produce_worker(
                client.clone(),
                a.clone(),
                p.clone(),
                deadline,
            ));
        }
    }
    let summary = finish(tasks, &p, start, "produce").await?;
    p.stop.store(true, Ordering::Relaxed);
    tick.await?;
    show(g, &summary)
}

async fn finish(
    mut tasks: tokio::task::JoinSet<WorkerResult>,
    p: &Progress,
    start: Instant,
    kind: &str,
) -> anyhow::Result<BenchSummary> {
    let mut lat = Latencies::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        let (l, e) = r?;
        lat.merge(&l);
        for (k, n) in e {
            *errors.entry(k).or_default() += n;
        }
    }
    let mut s = BenchSummary::new(
        kind,
        p.messages.load(Ordering::Relaxed),
        p.bytes.load(Ordering::Relaxed),
        start.elapsed(),
        &lat,
    );
    s.errors = errors;
    Ok(s)
}

fn show(g: &Global, s: &BenchSummary) -> anyhow::Result<i32> {
    if g.json {
        print_json(s)?;
    } else {
        println!("{s}");
    }
    Ok(if s.messages == 0 { 1 } else { 0 })
}

/// One queue to pull in `bench consume`.
struct PullTask {
    client: Client,
    addr: String,
    topic: String,
    queue: i32,
    start: u64,
    batch: u32,
    deadline: Option<Instant>,
    count: Option<u64>,
}

async fn consume_worker(t: PullTask, p: Arc<Progress>) -> WorkerResult {
    let PullTask {
        client,
        addr,
        topic,
        queue,
        start,
        batch,
        deadline,
        count,
    } = t;
    let limits = (deadline, count);
    let mut lat = Latencies::new();
    let mut errors = BTreeMap::new();
    let mut offset = start;
    loop {
        let over = limits
            .1
            .is_some_and(|c| p.messages.load(Ordering::Relaxed) >= c);
        if over || limits.0.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let req = PullRequest {
            topic: topic.clone(),
            queue_id: queue,
            offset,
            max_count: batch,
            ..PullRequest::default()
        };
        let t0 = Instant::now();
        match client.pull_from(&addr, req).await {
            Ok(r) if r.status == PullStatus::Found as i32 => {
                lat.record(t0.elapsed());
                let bytes: usize = r
                    .messages
                    .iter()
                    .map(|m| m.message.as_ref().map_or(0, |m| m.body.len()))
                    .sum();
                p.messages
                    .fetch_add(r.messages.len() as u64, Ordering::Relaxed);
                p.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
                offset = r.next_offset;
            }
            Ok(r) if r.status == PullStatus::OffsetTooSmall as i32 => offset = r.min_offset,
            Ok(_) => break,
            Err(e) => {
                *errors.entry(error_kind(&e)).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    (lat, errors)
}

async fn consume(g: &Global, a: ConsumeBenchArgs) -> anyhow::Result<i32> {
    let addr = match (&a.addr, a.node) {
        (Some(addr), _) => addr.clone(),
        (None, Some(id)) => g.manifest()?.node(id)?.client_addr.clone(),
        (None, None) => g.seeds()?.first().cloned().unwrap_or_default(),
    };
    let client = Client::new(std::slice::from_ref(&addr), crate::client_tls::options())?;
    let topics = client.list_topics().await?;
    let info = topics
        .iter()
        .find(|t| t.config.as_ref().is_some_and(|c| c.name == a.topic))
        .ok_or_else(|| anyhow::anyhow!("no topic {:?} on {addr}", a.topic))?;
    let total: u64 = info
        .queues
        .iter()
        .map(|q| q.max_offset - q.min_offset)
        .sum();
    let p = Arc::new(Progress::default());
    let pb = bar(g.json, a.count.unwrap_or(total).min(total), "messages");
    let tick = ticker(pb, p.clone(), true);
    let start = Instant::now();
    let limits = (a.duration.map(|d| start + d), a.count);
    let mut tasks = tokio::task::JoinSet::new();
    for q in &info.queues {
        let t = PullTask {
            client: client.clone(),
            addr: addr.clone(),
            topic: a.topic.clone(),
            queue: q.queue_id,
            start: q.min_offset,
            batch: a.batch,
            deadline: limits.0,
            count: limits.1,
        };
        tasks.spawn(consume_worker(t, p.clone()));
    }
    let summary = finish(tasks, &p, start, "consume").await?;
    p.stop.store(true, Ordering::Relaxed);
    tick.await?;
    show(g, &summary)
}

/// Runs a bench command.
pub async fn run(g: &Global, cmd: BenchCmd) -> anyhow::Result<i32> {
    match cmd {
        BenchCmd::Produce(a) => produce(g, a).await,
        BenchCmd::Consume(a) => consume(g, a).await,
    }
}
