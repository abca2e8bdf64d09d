//! An `async` log spreads its writeback over the flush interval (issue 14, target 5): the
//! flusher starts writing the appended bytes back in small steps between its periodic
//! flushes, so the periodic fdatasync finds little left and no burst of disk writes stalls
//! the meta db's fsyncs (the committed id, in openraft's core loop) behind it. Starting
//! writeback promises nothing: the bytes become durable only at the periodic flush, as
//! before (counted through a wrapping [`Env`]).

mod common;

use std::io;
use std::path::Path;
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
use raftmq_raft_log::env::PlainFile;
use raftmq_raft_log::env::SegmentFile;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;

type Store = LogStore<TestConfig>;

const SEG: u64 = 1 << 20;

/// What the log asked of its segments: writeback started and syncs, as (offset, len).
#[derive(Default)]
struct Calls {
    writeback: Vec<(u64, u64)>,
    syncs: Vec<(u64, u64)>,
}

/// A [`MemEnv`] whose segments record [`Calls`].
#[derive(Clone)]
struct RecordingEnv {
    inner: MemEnv,
    calls: Arc<Mutex<Calls>>,
}

struct RecordingSegment {
    inner: Arc<dyn SegmentFile>,
    calls: Arc<Mutex<Calls>>,
}

impl SegmentFile for RecordingSegment {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn sync_range(&self, offset: u64, len: u64) -> io::Result<()> {
        self.calls.lock().syncs.push((offset, len));
        self.inner.sync_range(offset, len)
    }
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.calls.lock().writeback.push((offset, len));
        self.inner.start_writeback(offset, len)
    }
}

impl RecordingEnv {
    fn wrap(&self, f: Arc<dyn SegmentFile>) -> Arc<dyn SegmentFile> {
        Arc::new(RecordingSegment {
            inner: f,
            calls: self.calls.clone(),
        })
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

fn open(dir: &tempfile::TempDir, env: &RecordingEnv, flush: FlushPolicy) -> Store {
    let c = LogConfig {
        segment_bytes: SEG,
        flush,
        // Far beyond the test: the periodic flush never runs during it.
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone())).unwrap()
}

fn recording() -> RecordingEnv {
    RecordingEnv {
        inner: MemEnv::new(),
        calls: Arc::default(),
    }
}

/// Bytes covered by the writeback started so far (the ranges never overlap).
fn written_back(env: &RecordingEnv) -> u64 {
    env.calls.lock().writeback.iter().map(|(_, len)| len).sum()
}

#[test]
fn async_log_starts_writeback_between_periodic_flushes_without_syncing() {
    let dir = tempfile::tempdir().unwrap();
    let env = recording();
    let s = open(&dir, &env, FlushPolicy::Async);
    let before = s.watermarks().appended_phys_end.get();
    for i in 1..=200 {
        s.append_entries(vec![entry(1, i, 1000)], ignore()).unwrap();
    }
    // Writeback goes in whole pages: all but the last partial page.
    let end = s.watermarks().appended_phys_end.get();
    let appended = end - end % 4096 - before;
    assert!(appended > 100_000, "{before}..{end}");
    // Generous deadline (a loaded machine): the flusher's writeback steps are ~10 ms apart.
    let deadline = Instant::now() + Duration::from_secs(20);
    while written_back(&env) < appended {
        assert!(
            Instant::now() < deadline,
            "writeback of {} of {appended} appended bytes started after 20 s",
            written_back(&env)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let calls = env.calls.lock();
    // Each range once, in order, none past the append position.
    let mut end = 0;
    for &(off, len) in &calls.writeback {
        assert!(off >= end && len > 0, "{:?}", calls.writeback);
        end = off + len;
    }
    assert!(end <= s.watermarks().appended_phys_end.get());
    // Starting writeback is no flush: nothing was synced, the bytes are not durable yet.
    assert!(calls.syncs.is_empty(), "synced {:?}", calls.syncs);
    drop(calls);
    s.close().unwrap();
}

#[test]
fn sync_log_starts_no_writeback_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let env = recording();
    let s = open(&dir, &env, FlushPolicy::Sync);
    for i in 1..=50 {
        s.append_entries(vec![entry(1, i, 1000)], ignore()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    // `sync` flushes for every waiting append; the group commit is its writeback.
    assert!(!env.calls.lock().syncs.is_empty());
    assert_eq!(written_back(&env), 0);
    s.close().unwrap();
}

#[test]
fn a_real_segment_starts_writeback_in_range_and_refuses_outside() {
    let dir = tempfile::tempdir().unwrap();
    let env = raftmq_raft_log::env::FsEnv::default();
    let f = env
        .create_segment(&dir.path().join("seg"), 1 << 20)
        .unwrap();
    f.write_at(0, &[7u8; 64 << 10]).unwrap();
    f.start_writeback(0, 64 << 10).unwrap();
    f.start_writeback(4096, 0).unwrap();
    let err = f.start_writeback((1 << 20) - 10, 4096).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("outside segment"), "{err}");
    // The bytes are still there and still need a sync to be durable; sync works after it.
    f.sync_range(0, 64 << 10).unwrap();
    let mut back = vec![0u8; 16];
    f.read_at(100, &mut back).unwrap();
    assert_eq!(back, vec![7u8; 16]);
}
