//! The load generator of `raftmq bench` and `raftmq bench suite`: producers with a window of
//! sends in flight ([`produce`]) and pullers of every queue of a topic ([`consume`]), each
//! returning one [`BenchSummary`].

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use indicatif::ProgressBar;
use indicatif::ProgressStyle;
use raftmq_client::proto::ErrorReason;
use raftmq_client::proto::Message;
use raftmq_client::proto::PullRequest;
use raftmq_client::proto::PullStatus;
use raftmq_client::Client;
use raftmq_client::ClientError;

use super::BenchSummary;
use super::Latencies;
use crate::clock::now_ms;

/// What [`produce`] sends.
#[derive(Clone, Debug)]
pub struct ProduceLoad {
    /// Producers (one client connection each).
    pub producers: usize,
    /// Sends in flight per producer.
    pub in_flight: usize,
    /// Body size, bytes.
    pub size: usize,
    /// Messages per SendBatch (1 = plain Send).
    pub batch: usize,
    /// Run this long (None: until `count`).
    pub duration: Option<Duration>,
    /// Send this many messages (None: until `duration`).
    pub count: Option<u64>,
    /// Topic.
    pub topic: String,
}

/// What [`consume`] pulls.
#[derive(Clone, Debug)]
pub struct PullLoad {
    /// Client address of the node pulled from.
    pub addr: String,
    /// Topic.
    pub topic: String,
    /// Messages per pull.
    pub batch: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many messages.
    pub count: Option<u64>,
}

/// A printable body of `size` bytes that names its sequence number (`msg-<seq>-xxx...`).
pub fn filler(size: usize, seq: u64) -> Vec<u8> {
    // Written in place (the load generator makes one per message), the number by `itoa`:
    // `write!` through `io::Write` took 7.5% of the load generator's samples at batch-32.
    let mut body = Vec::with_capacity(size.max(32));
    body.extend_from_slice(b"msg-");
    body.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    body.push(b'-');
    body.truncate(size);
    body.resize(size, b'x');
    body
}

/// Short name of an error, for the errors-by-kind table: a refusal with the reason the node
/// attached, if any (a full disk and a missing topic both come as codes that say less).
pub fn error_kind(e: &ClientError) -> String {
    match e {
        ClientError::Rejected { code, detail, .. } => {
            let kind = format!("rejected {code:?}").to_lowercase();
            let reason = detail
                .as_ref()
                .and_then(|d| ErrorReason::try_from(d.reason).ok())
                .filter(|r| *r != ErrorReason::Unspecified);
            match reason {
                Some(r) => format!("{kind} ({})", reason_name(r)),
                None => kind,
            }
        }
        ClientError::UnknownOutcome { .. } => "unknown outcome".into(),
        ClientError::Unavailable { .. } => "unavailable".into(),
        ClientError::InvalidArgument(_) => "invalid argument".into(),
    }
}

fn reason_name(r: ErrorReason) -> &'static str {
    match r {
        ErrorReason::Unspecified => "unspecified",
        ErrorReason::NotLeader => "not the leader",
        ErrorReason::NoQuorum => "no quorum",
        ErrorReason::ForwardFailed => "forward to the leader failed",
        ErrorReason::DiskFull => "disk usage above the nodes' disk-reject-ratio",
        ErrorReason::ShuttingDown => "node shutting down",
        ErrorReason::TopicNotFound => "topic not found",
        ErrorReason::InvalidArgument => "invalid argument",
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

fn bar(quiet: bool, len: u64, what: &str) -> ProgressBar {
    if quiet {
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

/// A task's failed operations by error kind.
type WorkerResult = BTreeMap<String, u64>;

/// A latency recorder shared by several tasks: a recorder per task (256 send slots at 4 x 64,
/// each histogram about 250 KiB) made each sample a cache miss, 7% of the load generator's
/// CPU.
type Recorder = Arc<Mutex<Latencies>>;

/// One send window slot of a producer; the slots of one producer share its recorder.
async fn produce_worker(
    client: Client,
    a: Arc<ProduceLoad>,
    p: Arc<Progress>,
    deadline: Option<Instant>,
    lat: Recorder,
) -> WorkerResult {
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
        // A batch is born at once: one clock read for all of it.
        let born = now_ms();
        let messages: Vec<Message> = (0..n)
            .map(|i| Message {
                topic: a.topic.clone(),
                body: filler(a.size, first + i).into(),
                born_timestamp_ms: born,
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
                lock(&lat).record(t0.elapsed());
                p.messages.fetch_add(n, Ordering::Relaxed);
                p.bytes.fetch_add(n * a.size as u64, Ordering::Relaxed);
            }
            Err(e) => {
                *errors.entry(error_kind(&e)).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    errors
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sends `load` to the cluster behind `seeds` (each producer learns the leader first) and
/// returns the figures; `quiet` hides the progress bar. Without `duration` and `count` it
/// runs 30 s.
///
/// On a multi-thread runtime of one worker (`raftmq --threads 1`, the default) the producers
/// run on tokio's current-thread scheduler, in a thread of their own. That one worker runs a
/// task woken by the running task next (its LIFO slot), so each connection's task wrote
/// each send as soon as a producer queued it; in order, the sends that one batch
/// of answers released leave in one write (1 x 64 single sends: 41-46 messages per Raft
/// entry against 26-28, 1.0-1.28 x the rate). Only the producers: a puller waits for its
/// answer before its next request, which the LIFO slot sends at once (`bench consume` pulled
/// 30% less on the current-thread scheduler).
pub async fn produce(
    seeds: &[String],
    load: ProduceLoad,
    quiet: bool,
) -> anyhow::Result<BenchSummary> {
    let rt = tokio::runtime::Handle::current();
    let lone_worker = rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        && rt.metrics().num_workers() == 1;
    if !lone_worker {
        return produce_here(seeds, load, quiet).await;
    }
    let seeds = seeds.to_vec();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench-produce".into())
        .spawn(move || {
            let res = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(produce_here(&seeds, load, quiet)));
            // The receiver is gone only if the command was dropped meanwhile.
            let _ = tx.send(res);
        })?;
    rx.await
        .map_err(|_| anyhow::anyhow!("the producers' thread ended without a result"))?
}

async fn produce_here(
    seeds: &[String],
    load: ProduceLoad,
    quiet: bool,
) -> anyhow::Result<BenchSummary> {
    anyhow::ensure!(
        load.producers > 0 && load.in_flight > 0,
        "--producers and --in-flight must be > 0"
    );
    let duration = match (load.duration, load.count) {
        (None, None) => Some(Duration::from_secs(30)),
        (d, _) => d,
    };
    let p = Arc::new(Progress::default());
    let pb = match load.count {
        Some(c) => bar(quiet, c, "messages"),
        None => bar(quiet, duration.map_or(0, |d| d.as_millis() as u64), "ms"),
    };
    let tick = ticker(pb, p.clone(), load.count.is_some());
    let mut clients = Vec::new();
    for _ in 0..load.producers {
        // Learn the leader first: a follower forwards every send (an extra hop), and a write
        // it answered does not tell the client who leads.
        clients.push(
            Client::connect(
                seeds,
                crate::credentials::signed(crate::client_tls::options()),
            )
            .await?,
        );
    }
    let a = Arc::new(load);
    let start = Instant::now();
    let deadline = duration.map(|d| start + d);
    let mut tasks = tokio::task::JoinSet::new();
    let mut recorders = Vec::new();
    for client in clients {
        let lat = Recorder::default();
        recorders.push(lat.clone());
        for _ in 0..a.in_flight {
            tasks.spawn(produce_worker(
                client.clone(),
                a.clone(),
                p.clone(),
                deadline,
                lat.clone(),
            ));
        }
    }
    let summary = finish(tasks, &recorders, &p, start, "produce").await?;
    p.stop.store(true, Ordering::Relaxed);
    tick.await?;
    Ok(summary)
}

async fn finish(
    mut tasks: tokio::task::JoinSet<WorkerResult>,
    recorders: &[Recorder],
    p: &Progress,
    start: Instant,
    kind: &str,
) -> anyhow::Result<BenchSummary> {
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        for (k, n) in r? {
            *errors.entry(k).or_default() += n;
        }
    }
    let mut lat = Latencies::new();
    for r in recorders {
        lat.merge(&lock(r));
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

/// One queue to pull.
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

async fn consume_worker(t: PullTask, p: Arc<Progress>, lat: Recorder) -> WorkerResult {
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
    let mut errors = BTreeMap::new();
    let mut offset = start;
    loop {
        let over = count.is_some_and(|c| p.messages.load(Ordering::Relaxed) >= c);
        if over || deadline.is_some_and(|d| Instant::now() >= d) {
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
                lock(&lat).record(t0.elapsed());
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
    errors
}

/// Pulls every queue of `load.topic` from `load.addr`, from its min offset to its end (or the
/// duration / count), and returns the figures; `quiet` hides the progress bar.
pub async fn consume(load: PullLoad, quiet: bool) -> anyhow::Result<BenchSummary> {
    let addr = load.addr.clone();
    let client = Client::new(
        std::slice::from_ref(&addr),
        crate::credentials::signed(crate::client_tls::options()),
    )?;
    let topics = client.list_topics().await?;
    let info = topics
        .iter()
        .find(|t| t.config.as_ref().is_some_and(|c| c.name == load.topic))
        .ok_or_else(|| anyhow::anyhow!("no topic {:?} on {addr}", load.topic))?;
    let total: u64 = info
        .queues
        .iter()
        .map(|q| q.max_offset - q.min_offset)
        .sum();
    let p = Arc::new(Progress::default());
    let pb = bar(quiet, load.count.unwrap_or(total).min(total), "messages");
    let tick = ticker(pb, p.clone(), true);
    let start = Instant::now();
    let deadline = load.duration.map(|d| start + d);
    let mut tasks = tokio::task::JoinSet::new();
    let lat = Recorder::default();
    for q in &info.queues {
        let t = PullTask {
            client: client.clone(),
            addr: addr.clone(),
            topic: load.topic.clone(),
            queue: q.queue_id,
            start: q.min_offset,
            batch: load.batch,
            deadline,
            count: load.count,
        };
        tasks.spawn(consume_worker(t, p.clone(), lat.clone()));
    }
    let summary = finish(tasks, &[lat], &p, start, "consume").await?;
    p.stop.store(true, Ordering::Relaxed);
    tick.await?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use raftmq_client::proto::ErrorDetail;
    use tonic::Code;

    use super::*;

    fn rejected(code: Code, reason: Option<ErrorReason>) -> ClientError {
        ClientError::Rejected {
            addr: "127.0.0.1:9201".into(),
            code,
            message: "refused".into(),
            detail: reason.map(|r| ErrorDetail {
                reason: r as i32,
                ..ErrorDetail::default()
            }),
        }
    }

    #[test]
    fn a_refusal_names_the_reason_the_node_gave() {
        let full = rejected(Code::ResourceExhausted, Some(ErrorReason::DiskFull));
        assert_eq!(
            error_kind(&full),
            "rejected resourceexhausted (disk usage above the nodes' disk-reject-ratio)"
        );
        let plain = rejected(Code::ResourceExhausted, Some(ErrorReason::Unspecified));
        assert_eq!(error_kind(&plain), "rejected resourceexhausted");
        assert_eq!(
            error_kind(&rejected(Code::NotFound, None)),
            "rejected notfound"
        );
    }
}
