//! `cargo bench -p raftmq-raft-log`: append throughput of the log under both flush policies,
//! next to raw write+fdatasync (for `sync`) and raw page-cache writes (for `async`) of the
//! same bytes on the same disk. Prints a markdown table. Not a test: no assertions.
//!
//! Environment: `RAFTLOG_BENCH_DIR` (default: a temp dir), `RAFTLOG_BENCH_SECS` (per run,
//! default 1), `RAFTLOG_BENCH_POLICY` (`sync` or `async`: run only that policy),
//! `RAFTLOG_BENCH_MAPPED` (`1`: store into the mapping, `0`: pwrite, the default),
//! `RAFTLOG_BENCH_SIZE` / `RAFTLOG_BENCH_APPENDERS` (run only that entry size / appender count).
//! `RAFTLOG_BENCH_MODE=direct`: every appender calls `append_entries` itself, one entry per
//! call, under a lock; by default appenders hand entries to one writer task that appends what
//! is queued as one batch with one callback, as openraft's RaftCore drives the log.
//! Each configuration runs 3 times alternating with its raw baseline; medians are printed.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Payload;

const SIZES: [usize; 3] = [128, 1024, 16 * 1024];
const APPENDERS: [usize; 2] = [1, 64];
const SEGMENT_BYTES: u64 = 128 << 20;
const ROUNDS: usize = 3;
/// Most entries the writer task appends in one call (openraft's batches are bounded too).
const MAX_BATCH: usize = 64;

#[derive(Clone, Copy)]
struct Figure {
    appends: u64,
    bytes: u64,
    secs: f64,
}

impl Figure {
    fn per_sec(&self) -> f64 {
        self.appends as f64 / self.secs
    }
    fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
}

fn entry(index: u64, payload: &[u8]) -> LogEntry {
    LogEntry {
        log_id: LogId::new_term_index(1, index),
        payload: Payload::Normal(AppPayload::from(payload.to_vec())),
    }
}

async fn bench_log(
    dir: &Path,
    flush: FlushPolicy,
    size: usize,
    appenders: usize,
    budget: Duration,
) -> Figure {
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        flush,
        flush_interval_ms: 200,
        ..LogConfig::default()
    };
    let store: LogStore<()> = match std::env::var("RAFTLOG_BENCH_MAPPED").ok() {
        // Force one segment write method (the default follows the flush policy).
        Some(m) => {
            let env = raftmq_raft_log::env::FsEnv {
                mapped_writes: m == "1",
                ..raftmq_raft_log::env::FsEnv::default()
            };
            LogStore::open_with_env(dir, config, Arc::new(env)).expect("open log")
        }
        None => LogStore::open(dir, config).expect("open log"),
    };
    // Steady state: the segment after the first is preallocated before timing starts (later
    // preallocations during the run are part of the measured cost).
    let next = dir.join("commitlog").join(format!("{SEGMENT_BYTES:020}"));
    while !next.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let payload = Arc::new(vec![0x5au8; size]);
    let start = Instant::now();
    let deadline = start + budget;
    let mut tasks = Vec::new();
    if std::env::var("RAFTLOG_BENCH_MODE").is_ok_and(|m| m == "direct") {
        // Every appender calls `append_entries` itself, one entry at a time, under a lock
        // that keeps indexes contiguous.
        let next = Arc::new(parking_lot::Mutex::new(1u64));
        for _ in 0..appenders {
            let (store, next, payload) = (store.clone(), next.clone(), payload.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    {
                        let mut idx = next.lock();
                        let cb = Box::new(move |r: std::io::Result<()>| drop(tx.send(r)));
                        store
                            .append_entries(vec![entry(*idx, &payload)], cb)
                            .expect("append");
                        *idx += 1;
                    }
                    rx.await.expect("callback").expect("flushed");
                    n += 1;
                }
                n
            }));
        }
    } else {
        // As openraft drives the log: appenders hand their payloads to one writer task (the
        // RaftCore), which appends whatever is queued as one batch with one callback.
        type Done = tokio::sync::oneshot::Sender<std::io::Result<()>>;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Vec<u8>, Done)>();
        let writer_store = store.clone();
        tokio::spawn(async move {
            let mut next = 1u64;
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
                let mut entries = Vec::with_capacity(batch.len());
                let mut dones = Vec::with_capacity(batch.len());
                for (p, done) in batch {
                    entries.push(LogEntry {
                        log_id: LogId::new_term_index(1, next),
                        payload: Payload::Normal(AppPayload::from(p)),
                    });
                    dones.push(done);
                    next += 1;
                }
                let cb = Box::new(move |r: std::io::Result<()>| {
                    for d in dones {
                        let r = match &r {
                            Ok(()) => Ok(()),
                            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                        };
                        let _ = d.send(r);
                    }
                });
                writer_store.append_entries(entries, cb).expect("append");
            }
        });
        for _ in 0..appenders {
            let (tx, payload) = (tx.clone(), payload.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let (done, rx) = tokio::sync::oneshot::channel();
                    tx.send((payload.to_vec(), done)).expect("writer runs");
                    rx.await.expect("callback").expect("flushed");
                    n += 1;
                }
                n
            }));
        }
    }
    let mut appends = 0;
    for t in tasks {
        appends += t.await.expect("task");
    }
    let secs = start.elapsed().as_secs_f64();
    store.close().expect("close");
    Figure {
        appends,
        bytes: appends * size as u64,
        secs,
    }
}

/// Raw baseline: sequential writes of `size` bytes; `sync_every` writes share one fdatasync
/// (0 = never sync: page cache only).
/// `prealloc`: write into a file allocated up front (as the log's segments are) instead of
/// growing it.
fn bench_raw(
    dir: &Path,
    size: usize,
    sync_every: usize,
    budget: Duration,
    prealloc: bool,
) -> Figure {
    let path = dir.join("raw.dat");
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .expect("open raw");
    if prealloc {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an open descriptor.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 4 << 30) };
        assert_eq!(rc, 0, "fallocate");
        f.sync_all().expect("fsync");
    }
    let buf = vec![0x5au8; size];
    let start = Instant::now();
    let mut appends = 0u64;
    while start.elapsed() < budget {
        let batch = sync_every.max(1);
        for _ in 0..batch {
            f.write_all(&buf).expect("write");
        }
        if sync_every > 0 {
            f.sync_data().expect("fdatasync");
        }
        appends += batch as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Figure {
        appends,
        bytes: appends * size as u64,
        secs,
    }
}

fn median(mut v: Vec<Figure>) -> Figure {
    v.sort_by(|a, b| a.mb_per_sec().total_cmp(&b.mb_per_sec()));
    v[v.len() / 2]
}

fn fresh_dir(root: &Path, name: &str) -> std::path::PathBuf {
    let d = root.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("bench dir");
    d
}

fn main() {
    let secs: f64 = std::env::var("RAFTLOG_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let budget = Duration::from_secs_f64(secs);
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = std::env::var("RAFTLOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| tmp.path().to_path_buf());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "raft-log append benchmark: {secs}s per run, segment {} MiB, dir {}",
        SEGMENT_BYTES >> 20,
        root.display()
    );
    println!();
    println!("| policy | entry | appenders | log appends/s | log MB/s | raw appends/s | raw MB/s | log/raw | raw prealloc MB/s (log/raw) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let policies = [("sync", FlushPolicy::Sync), ("async", FlushPolicy::Async)];
    let only = std::env::var("RAFTLOG_BENCH_POLICY").ok();
    let only_size: Option<usize> = std::env::var("RAFTLOG_BENCH_SIZE")
        .ok()
        .and_then(|s| s.parse().ok());
    let only_appenders: Option<usize> = std::env::var("RAFTLOG_BENCH_APPENDERS")
        .ok()
        .and_then(|s| s.parse().ok());
    for (name, policy) in policies {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        for size in SIZES
            .into_iter()
            .filter(|s| only_size.is_none_or(|o| o == *s))
        {
            for appenders in APPENDERS
                .into_iter()
                .filter(|a| only_appenders.is_none_or(|o| o == *a))
            {
                // Log and raw runs alternate, ROUNDS times each; the median of each is shown.
                let (mut logs, mut raws, mut pres) = (Vec::new(), Vec::new(), Vec::new());
                let sync_every = if name == "sync" { appenders } else { 0 };
                for _ in 0..ROUNDS {
                    let dir = fresh_dir(&root, "log");
                    logs.push(rt.block_on(bench_log(&dir, policy, size, appenders, budget)));
                    let _ = std::fs::remove_dir_all(&dir);
                    raws.push(bench_raw(&root, size, sync_every, budget, false));
                    if name == "sync" {
                        pres.push(bench_raw(&root, size, sync_every, budget, true));
                    }
                }
                let (log, raw) = (median(logs), median(raws));
                let pre = if pres.is_empty() {
                    "-".to_string()
                } else {
                    let p = median(pres);
                    format!(
                        "{:.1} ({:.0}%)",
                        p.mb_per_sec(),
                        100.0 * log.mb_per_sec() / p.mb_per_sec()
                    )
                };
                println!(
                    "| {name} | {size} B | {appenders} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0}% | {pre} |",
                    log.per_sec(),
                    log.mb_per_sec(),
                    raw.per_sec(),
                    raw.mb_per_sec(),
                    100.0 * log.mb_per_sec() / raw.mb_per_sec()
                );
            }
        }
    }
    println!();
    println!("raw sync = sequential write (growing file) + one fdatasync per batch of <appenders> entries;");
    println!("raw prealloc = the same into a fallocated file (like the log's segments);");
    println!("raw async = plain page-cache writes, never flushed (the log's async policy fdatasyncs every 200 ms).");
}
