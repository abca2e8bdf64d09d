//! Dispatch (apply) and pull throughput of the state machine over the real CommitLog (prints
//! figures; no timed assertions).
//!
//! `cargo bench -p raftmq-store --bench dispatch`
//!
//! The last case gives every message an identity (producer id + sequence, as
//! `raftmq_client` sends them) in entries stamped with the default dedup window, so apply also
//! looks each one up in the window, remembers it and, once the window is full, evicts one.
//!
//! Dispatch: entries of 32 messages (one key each) are appended to the log first, then
//! applied one by one on this thread (`StateMachine::apply_entry`: parse, ConsumeQueue unit,
//! index put per key). Pull: reading a queue end to end with `Store::pull` (32 messages per
//! call), from a warm page cache and after dropping the files from it (reopen +
//! `posix_fadvise(DONTNEED)`; pages the reopened log keeps mapped may stay resident, so the
//! cold figure is an upper bound).

use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Payload;
use raftmq_store::command::Command;
use raftmq_store::command::CommandView;
use raftmq_store::dedup::DedupParams;
use raftmq_store::dedup::PRODUCER_ID_PROPERTY;
use raftmq_store::dedup::SEQUENCE_PROPERTY;
use raftmq_store::message::Message;
use raftmq_store::topic::TopicConfig;
use raftmq_store::LogStore;
use raftmq_store::PullRequest;
use raftmq_store::StateMachine;
use raftmq_store::Store;
use raftmq_store::StoreConfig;

const PER_ENTRY: usize = 32;
/// `dedup-max-entries`' default: the steady state evicts one send per message.
const DEDUP_MAX_ENTRIES: u32 = 100_000;
const PRODUCER: &str = "4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a";

fn open(dir: &Path) -> (LogStore, Store, StateMachine) {
    let cfg = LogConfig {
        segment_bytes: 256 << 20,
        flush: FlushPolicy::Async,
        flush_interval_ms: 200,
        ..LogConfig::default()
    };
    let log = LogStore::open(dir, cfg).expect("log");
    let (store, sm) = raftmq_store::open(dir, StoreConfig::default(), log.clone()).expect("store");
    (log, store, sm)
}

fn append(log: &LogStore, entries: Vec<LogEntry>) {
    for chunk in entries.chunks(64) {
        log.append_entries(chunk.to_vec(), Box::new(|_| {}))
            .expect("append");
    }
    log.flush().expect("flush");
}

fn entries(body: usize, queues: u32, total: usize, identified: bool) -> Vec<LogEntry> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < total {
        let ms: Vec<Message> = (0..PER_ENTRY)
            .map(|j| {
                let n = i + j;
                let mut m =
                    Message::new("bench", QueueId::new(n as u32 % queues), vec![b'x'; body]);
                m.tags = if n.is_multiple_of(2) {
                    "even".into()
                } else {
                    "odd".into()
                };
                m.keys = vec![format!("key-{n}")];
                m.store_timestamp_ms = 1_700_000_000_000 + n as u64;
                m.born_host = "10.0.0.1:5000".into();
                if identified {
                    let id = [
                        (PRODUCER_ID_PROPERTY, PRODUCER),
                        (SEQUENCE_PROPERTY, &n.to_string()),
                    ];
                    m.properties = id.map(|(k, v)| (k.to_string(), v.to_string())).into();
                }
                m
            })
            .collect();
        let dedup = identified.then_some(DedupParams {
            window_ms: 300_000,
            max_entries: DEDUP_MAX_ENTRIES,
        });
        let batch = Command::SendBatch {
            messages: ms,
            auto_create_queues: None,
            dedup,
        };
        out.push(LogEntry {
            log_id: LogId::new_term_index(1, 1 + out.len() as u64),
            payload: Payload::Normal(batch.encode().expect("encode")),
        });
        i += PER_ENTRY;
    }
    out
}

fn drop_cache(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            drop_cache(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            let _ = f.sync_all();
            // SAFETY: a valid open fd; advice only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

fn pull_all(store: &Store, queues: u32) -> (u64, u64) {
    let (mut msgs, mut bytes) = (0u64, 0u64);
    for q in 0..queues {
        let mut o = QueueOffset::ZERO;
        loop {
            let r = store
                .pull(&PullRequest {
                    topic: "bench".into(),
                    queue_id: QueueId::new(q),
                    offset: o,
                    max_count: 32,
                    max_bytes: u64::MAX,
                    tag_expr: "*".into(),
                })
                .expect("pull");
            if r.messages.is_empty() {
                break;
            }
            msgs += r.messages.len() as u64;
            bytes += r
                .messages
                .iter()
                .map(|m| u64::from(m.store_size))
                .sum::<u64>();
            o = r.next_offset;
        }
    }
    (msgs, bytes)
}

fn run(body: usize, queues: u32, total: usize, identified: bool) {
    let d = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| "/tmp".into()))
        .expect("tempdir");
    let (log, store, sm) = open(d.path());
    let create = LogEntry {
        log_id: LogId::new_term_index(1, 0),
        payload: Payload::Normal(
            Command::CreateTopic(TopicConfig::new("bench", queues))
                .encode()
                .expect("encode"),
        ),
    };
    let es = entries(body, queues, total, identified);
    if identified {
        parse(&es);
    }
    let mut all = vec![create];
    all.extend(es);
    append(&log, all.clone());
    // The first tenth creates the ConsumeQueue files and the IndexFile (fallocate + fsync):
    // timed apart from the steady state.
    let warm = all.len() / 10;
    let t = Instant::now();
    for e in &all[..warm] {
        sm.apply_entry(e).expect("apply");
    }
    let s0 = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for e in &all[warm..] {
        sm.apply_entry(e).expect("apply");
    }
    let s = t.elapsed().as_secs_f64();
    let n = (all.len() - warm) * PER_ENTRY;
    let n0 = (warm - 1) * PER_ENTRY;
    let label = if identified { ", identified" } else { "" };
    println!(
        "dispatch {body:>5} B x {queues:>2} queues{label}: {:>10.0} msgs/s steady ({n} msgs in {s:.3} s); \
         first {n0} msgs incl. file creation {:>10.0} msgs/s",
        n as f64 / s,
        n0 as f64 / s0
    );
    if identified || std::env::var("BENCH_DISPATCH_ONLY").is_ok() {
        return;
    }
    for label in ["warm", "warm"] {
        let t = Instant::now();
        let (m, b) = pull_all(&store, queues);
        let s = t.elapsed().as_secs_f64();
        println!(
            "pull     {body:>5} B x {queues:>2} queues ({label}): {:>10.0} msgs/s {:>8.1} MB/s",
            m as f64 / s,
            b as f64 / s / 1e6
        );
    }
    store.close().expect("close");
    log.close().expect("close");
    drop((store, sm, log));
    drop_cache(d.path());
    let (log, store, _sm) = open(d.path());
    // raft-log's open validates every record, which reads the log back into the cache:
    // advise it out again (pages still mapped stay resident, so "cold" is an upper bound).
    drop_cache(d.path());
    let t = Instant::now();
    let (m, b) = pull_all(&store, queues);
    let s = t.elapsed().as_secs_f64();
    println!(
        "pull     {body:>5} B x {queues:>2} queues (cold): {:>10.0} msgs/s {:>8.1} MB/s",
        m as f64 / s,
        b as f64 / s / 1e6
    );
    store.close().expect("close");
    log.close().expect("close");
}

/// Apply's parse of a logged entry alone (`CommandView::parse_logged`: the batch's layout and
/// every record's fields), over entries already in memory: all of them (most not in the CPU's
/// caches) and four of them again and again (128 messages, about 140 KB: in its L2 cache, as
/// a follower's entry is when apply takes it); the best of five passes each.
fn parse(entries: &[LogEntry]) {
    for (label, set, rounds) in [("cold", entries, 1), ("warm", &entries[..4], 2000)] {
        let mut best = f64::MAX;
        let mut n = 0usize;
        for _ in 0..5 {
            let t = Instant::now();
            n = 0;
            for e in std::iter::repeat_n(set, rounds).flatten() {
                let Payload::Normal(p) = &e.payload else {
                    continue;
                };
                match CommandView::parse_logged(&p.0).expect("parse") {
                    CommandView::SendBatch { messages, .. } => n += messages.len(),
                    _ => unreachable!("a batch"),
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "parse    1024 B, identified ({label}): {:>10.0} msgs/s ({:.0} ns a message, best of 5)",
            n as f64 / best,
            best * 1e9 / n as f64
        );
    }
}

fn main() {
    let total: usize = std::env::var("BENCH_MSGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    for (body, queues) in [(128, 1), (128, 16), (1024, 1), (1024, 16)] {
        run(body, queues, total, false);
    }
    run(1024, 16, total.max(2 * DEDUP_MAX_ENTRIES as usize), true);
}
