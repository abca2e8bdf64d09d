//! What open reads of a flushed log (issue 13): the bytes under the durable flush checkpoint
//! are vouched for by the raft index and not read again (counted through a wrapping [`Env`]),
//! while every segment's first record is still checked against the index, so a segment lost
//! or overwritten whole under the checkpoint fails open naming the file.

mod common;

use std::io;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::util::entry;
use common::util::ignore;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::env::Env;
use raftmq_raft_log::env::PlainFile;
use raftmq_raft_log::env::SegmentFile;
use raftmq_raft_log::error::LogError;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogIndex;

type Store = LogStore<TestConfig>;

const SEG: u64 = 64 << 10;
const SEGMENTS: u64 = 24;

/// A [`MemEnv`] that counts the bytes read from segment files.
#[derive(Clone)]
struct CountingEnv {
    inner: MemEnv,
    read: Arc<AtomicU64>,
}

struct CountingSegment {
    inner: Arc<dyn SegmentFile>,
    read: Arc<AtomicU64>,
}

impl SegmentFile for CountingSegment {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::SeqCst);
        self.inner.read_at(offset, buf)
    }
    fn sync_range(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.sync_range(offset, len)
    }
}

impl CountingEnv {
    fn wrap(&self, f: Arc<dyn SegmentFile>) -> Arc<dyn SegmentFile> {
        Arc::new(CountingSegment {
            inner: f,
            read: self.read.clone(),
        })
    }
}

impl Env for CountingEnv {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_segment(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>> {
        Ok(self.wrap(self.inner.create_segment(path, capacity)?))
    }
    fn open_segment(&self, path: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        Ok(self.wrap(self.inner.open_segment(path)?))
    }
    fn open_plain(&self, path: &Path) -> io::Result<Arc<dyn PlainFile>> {
        self.inner.open_plain(path)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    }
}

fn open(dir: &tempfile::TempDir, env: &CountingEnv, c: LogConfig) -> Result<Store, LogError> {
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone()))
}

/// A closed (flushed) log of [`SEGMENTS`] full segments plus a short last one, 1 KiB entries;
/// returns the last index.
fn many_segments() -> (tempfile::TempDir, CountingEnv, u64) {
    let dir = tempfile::tempdir().unwrap();
    let env = CountingEnv {
        inner: MemEnv::new(),
        read: Arc::default(),
    };
    let s = open(&dir, &env, config()).unwrap();
    let mut last = 0;
    while s.watermarks().appended_phys_end.get() < SEGMENTS * SEG + 1024 {
        s.append_entries(vec![entry(1, last + 1, 1000)], ignore())
            .unwrap();
        last += 1;
    }
    s.close().unwrap();
    drop(s);
    (dir, env, last)
}

/// Reopens and returns the segment bytes open read; checks that the log is whole.
fn reads_at_open(dir: &tempfile::TempDir, env: &CountingEnv, c: LogConfig, last: u64) -> u64 {
    env.read.store(0, Ordering::SeqCst);
    let s = open(dir, env, c).unwrap();
    let n = env.read.load(Ordering::SeqCst);
    assert_eq!(
        s.watermarks().appended,
        Some(LogId::new_term_index(1, last))
    );
    n
}

/// Issue 13: open of a flushed log of many segments reads a few headers per segment and the
/// tail past the checkpoint, not every byte; a repairing open (full scan) reads them all,
/// which shows the counter sees the scan.
#[test]
fn open_reads_little_below_the_checkpoint() {
    let (dir, env, last) = many_segments();
    let log_bytes = SEGMENTS * SEG;
    let full = reads_at_open(
        &dir,
        &env,
        LogConfig {
            repair_truncate_corruption: true,
            ..config()
        },
        last,
    );
    assert!(full >= log_bytes * 9 / 10, "a full scan read only {full}");
    let fast = reads_at_open(&dir, &env, config(), last);
    // The last segment's zero tail (checked zero at open) and a header or two per segment.
    assert!(
        fast <= SEG + SEGMENTS * 4096,
        "open read {fast} of {log_bytes} bytes"
    );
}

/// A segment below the checkpoint that lost its content (zeroed whole) fails open with a
/// corruption error naming that segment's file, though the raft index covers it.
#[test]
fn zeroed_segment_below_the_checkpoint_fails_open() {
    let (dir, env, last) = many_segments();
    let lost = SEGMENTS / 2;
    let name = format!("{:020}", lost * SEG);
    let seg = dir.path().join("commitlog").join(&name);
    assert!(env.inner.corrupt(&seg, 0, &vec![0u8; SEG as usize]));
    let err = open(&dir, &env, config())
        .err()
        .expect("a lost segment must fail open");
    let msg = err.to_string();
    assert!(
        matches!(&err, LogError::Corruption { file, offset: 0, .. } if file.ends_with(&name)),
        "{msg}"
    );
    // The refusal changed nothing: a second open refuses the same way.
    assert!(open(&dir, &env, config()).is_err());
    let s = open(
        &dir,
        &env,
        LogConfig {
            repair_truncate_corruption: true,
            ..config()
        },
    )
    .unwrap();
    let kept = s.watermarks().appended.map(|l| l.index).unwrap_or(0);
    assert!(
        kept < last,
        "repair keeps only what precedes the lost segment"
    );
    assert!(s
        .read_entries(LogIndex::new(1), LogIndex::new(kept + 1))
        .is_ok());
}

/// A record header overwritten inside a segment below the checkpoint (not its first record)
/// is found on the first read of the entry, and open keeps the log whole.
#[test]
fn header_rot_inside_a_segment_shows_on_read() {
    let (dir, env, last) = many_segments();
    let s = open(&dir, &env, config()).unwrap();
    let loc = (1..=last)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap())
        .find(|l| l.phys > 3 * SEG + 4096)
        .unwrap();
    drop(s);
    let seg = dir
        .path()
        .join("commitlog")
        .join(format!("{:020}", 3 * SEG));
    assert!(env.inner.corrupt(&seg, loc.phys - 3 * SEG, &[0xff; 8]));
    let s = open(&dir, &env, config()).unwrap();
    assert_eq!(
        s.watermarks().appended,
        Some(LogId::new_term_index(1, last))
    );
    let err = s
        .read_entries(LogIndex::new(loc.index), LogIndex::new(loc.index + 1))
        .unwrap_err();
    assert!(matches!(err, LogError::Corruption { .. }), "{err}");
}
