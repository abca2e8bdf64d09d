//! Retention of segments a [`raftmq_raft_log::PinnedRange`] still maps (issue 13): the pin
//! keeps every byte, and the file's disk space is still released stepwise
//! ([`Env::remove_large`]) once the last pin drops, never in one burst on the pin's drop.

mod common;

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use common::util::entry;
use common::util::ignore;
use common::TestConfig;
use parking_lot::Mutex;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::env::Env;
use raftmq_raft_log::env::FsEnv;
use raftmq_raft_log::env::PlainFile;
use raftmq_raft_log::env::SegmentFile;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::PhysOffset;

type Store = LogStore<TestConfig>;

const BIG: u64 = 1 << 20;

/// An [`FsEnv`] (shrinking in 64 KiB steps) that records every removal.
#[derive(Clone)]
struct RecordingEnv {
    inner: FsEnv,
    removed: Arc<Mutex<Vec<(&'static str, PathBuf)>>>,
}

impl RecordingEnv {
    fn new() -> Self {
        RecordingEnv {
            inner: FsEnv {
                remove_step_bytes: 64 << 10,
                ..FsEnv::default()
            },
            removed: Arc::default(),
        }
    }

    fn removals_of(&self, name: &str) -> Vec<&'static str> {
        let r = self.removed.lock();
        r.iter()
            .filter(|(_, p)| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(name))
            })
            .map(|(op, _)| *op)
            .collect()
    }
}

impl Env for RecordingEnv {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_segment(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>> {
        self.inner.create_segment(path, capacity)
    }
    fn open_segment(&self, path: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        self.inner.open_segment(path)
    }
    fn open_plain(&self, path: &Path) -> io::Result<Arc<dyn PlainFile>> {
        self.inner.open_plain(path)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.removed.lock().push(("remove", path.to_path_buf()));
        self.inner.remove(path)
    }
    fn remove_large(&self, path: &Path) -> io::Result<()> {
        self.removed
            .lock()
            .push(("remove_large", path.to_path_buf()));
        self.inner.remove_large(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

fn open(dir: &tempfile::TempDir, env: &RecordingEnv) -> Store {
    let c = LogConfig {
        segment_bytes: BIG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        // Removal itself is under test here (reuse: `recycle.rs`).
        recycle_segments: 0,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone())).unwrap()
}

fn seg_name(start: u64) -> String {
    format!("{start:020}")
}

/// Waits (generously: other builds share the machine) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pinned segment removed by retention keeps its bytes (and its disk space) while pinned;
/// once the last clone of the pin drops, it is removed stepwise, as an unpinned one is.
#[test]
fn pinned_segment_is_removed_stepwise_once_the_pin_drops() {
    let dir = tempfile::tempdir().unwrap();
    let env = RecordingEnv::new();
    let s = open(&dir, &env);
    // 30 entries of 100 KiB: ten per segment, three segments.
    s.append_entries((1..=30).map(|i| entry(1, i, 100 << 10)).collect(), ignore())
        .unwrap();
    let first_seg_end = (1..=30)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap())
        .rfind(|l| l.end() <= BIG)
        .unwrap();
    let pin = s
        .pin_range(PhysOffset::ZERO, first_seg_end.phys_end())
        .unwrap();
    let pin2 = pin.clone();
    let expected = s
        .read_at(PhysOffset::ZERO, first_seg_end.end() as u32)
        .unwrap();
    s.purge(LogId::new_term_index(1, 25)).unwrap();
    let min = s.delete_segments_below(PhysOffset::new(2 * BIG)).unwrap();
    assert_eq!(min, PhysOffset::new(2 * BIG));
    let commitlog = dir.path().join("commitlog");
    assert!(!commitlog.join(seg_name(0)).exists());
    // The unpinned segment went stepwise at once.
    assert_eq!(env.removals_of(&seg_name(BIG)), vec!["remove_large"]);
    // The pinned one is out of the log but not released yet.
    assert!(env.removals_of(&seg_name(0)).is_empty());
    drop(pin);
    assert_eq!(
        pin2.read_at(PhysOffset::ZERO, first_seg_end.end() as u32)
            .unwrap(),
        expected
    );
    assert!(env.removals_of(&seg_name(0)).is_empty());
    drop(pin2);
    wait_until("the unpinned segment's stepwise removal", || {
        env.removals_of(&seg_name(0)) == vec!["remove_large"]
    });
    wait_until("the file to be gone", || {
        std::fs::read_dir(&commitlog).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&seg_name(0))
        })
    });
    s.close().unwrap();
}

/// A segment left out of the log by a crash while pinned (renamed, not yet removed) is
/// removed by the next open.
#[test]
fn segment_left_pinned_by_a_crash_is_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let env = RecordingEnv::new();
    let s = open(&dir, &env);
    s.append_entries((1..=30).map(|i| entry(1, i, 100 << 10)).collect(), ignore())
        .unwrap();
    let pin = s
        .pin_range(PhysOffset::ZERO, PhysOffset::new(4096))
        .unwrap();
    s.purge(LogId::new_term_index(1, 25)).unwrap();
    s.delete_segments_below(PhysOffset::new(BIG)).unwrap();
    s.halt_without_flush();
    drop(s);
    let commitlog = dir.path().join("commitlog");
    let left: Vec<_> = std::fs::read_dir(&commitlog)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&seg_name(0)))
        .collect();
    assert_eq!(left.len(), 1, "the pinned segment is kept while pinned");
    let s = open(&dir, &env);
    assert!(!commitlog.join(&left[0]).exists());
    assert_eq!(s.watermarks().min_phys_offset, PhysOffset::new(BIG));
    // The pin of the previous instance still reads its bytes (only unlinked at open).
    assert_eq!(pin.read_at(PhysOffset::ZERO, 4096).unwrap().len(), 4096);
    drop(pin);
    s.close().unwrap();
}
