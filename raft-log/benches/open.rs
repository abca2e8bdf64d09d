//! `cargo bench -p raftmq-raft-log --bench open`: time to open a flushed log of a given size,
//! with the raft index taken below the durable flush checkpoint (the normal open) against a
//! full scan checking every record's CRC (`repair-truncate-corruption`, which is also what
//! every open did before issue 13), each with a warm page cache and a cold one (the segment
//! and index files dropped from the page cache with `posix_fadvise(DONTNEED)` first, which
//! touches only these files). Prints a markdown table of medians. Not a test: no assertions.
//!
//! Environment: `RAFTLOG_BENCH_DIR` (default: a temp dir), `RAFTLOG_OPEN_MIB` (log size,
//! default 1024), `RAFTLOG_OPEN_SEGMENT_MIB` (default 128), `RAFTLOG_OPEN_ENTRY_BYTES`
//! (default 1024), `RAFTLOG_OPEN_ROUNDS` (default 3).

use std::path::Path;
use std::time::Instant;

use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Payload;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(segment_bytes: u64, full_scan: bool) -> LogConfig {
    LogConfig {
        segment_bytes,
        flush: FlushPolicy::Async,
        flush_interval_ms: 1000,
        repair_truncate_corruption: full_scan,
        ..LogConfig::default()
    }
}

/// Writes `total` bytes of `entry_bytes` entries and closes the log (flushed).
fn build(dir: &Path, segment_bytes: u64, total: u64, entry_bytes: usize) -> u64 {
    let store: LogStore<()> = LogStore::open(dir, config(segment_bytes, false)).expect("open log");
    let payload = vec![0x5au8; entry_bytes];
    let mut index = 0;
    while store.watermarks().appended_phys_end.get() < total {
        let batch = (index + 1..=index + 256)
            .map(|i| LogEntry {
                log_id: LogId::new_term_index(1, i),
                payload: Payload::Normal(AppPayload::from(payload.clone())),
            })
            .collect();
        store
            .append_entries(batch, Box::new(|_| {}))
            .expect("append");
        index += 256;
    }
    store.close().expect("close");
    index
}

/// Drops the log's files from the page cache (they are clean after close).
fn drop_cache(dir: &Path) {
    for sub in ["commitlog", "raft-index"] {
        for e in std::fs::read_dir(dir.join(sub)).expect("list") {
            let f = std::fs::File::open(e.expect("entry").path()).expect("open file");
            use std::os::fd::AsRawFd;
            // SAFETY: a plain syscall on the open descriptor owned by `f`.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0, "posix_fadvise");
        }
    }
}

/// Opens the log once and returns the milliseconds open took.
fn open_ms(dir: &Path, segment_bytes: u64, full_scan: bool, cold: bool, last: u64) -> f64 {
    if cold {
        drop_cache(dir);
    }
    let t = Instant::now();
    let store: LogStore<()> =
        LogStore::open(dir, config(segment_bytes, full_scan)).expect("reopen log");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let appended = store.watermarks().appended.map(|l| l.index);
    assert_eq!(appended, Some(last), "the reopened log is whole");
    store.close().expect("close");
    drop(store);
    // sled releases its lock asynchronously (see Meta::open).
    std::thread::sleep(std::time::Duration::from_millis(50));
    ms
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mib = env_u64("RAFTLOG_OPEN_MIB", 1024);
    let segment_bytes = env_u64("RAFTLOG_OPEN_SEGMENT_MIB", 128) << 20;
    let entry_bytes = env_u64("RAFTLOG_OPEN_ENTRY_BYTES", 1024) as usize;
    let rounds = env_u64("RAFTLOG_OPEN_ROUNDS", 3).max(1);
    let tmp = match std::env::var("RAFTLOG_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d),
        Err(_) => tempfile::tempdir(),
    }
    .expect("temp dir");
    let dir = tmp.path().join("log");
    let t = Instant::now();
    let last = build(&dir, segment_bytes, mib << 20, entry_bytes);
    println!(
        "log: {mib} MiB in {} MiB segments, {last} entries of {entry_bytes} B, written in {:.1} s\n",
        segment_bytes >> 20,
        t.elapsed().as_secs_f64()
    );
    println!("| open | page cache | open ms (median of {rounds}) |");
    println!("|---|---|---|");
    for (name, full_scan) in [
        ("raft index + scan past checkpoint", false),
        ("full scan (before)", true),
    ] {
        for cold in [false, true] {
            let v = (0..rounds)
                .map(|_| open_ms(&dir, segment_bytes, full_scan, cold, last))
                .collect();
            let cache = if cold { "cold" } else { "warm" };
            println!("| {name} | {cache} | {:.0} |", median(v));
        }
    }
}
