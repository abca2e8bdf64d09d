//! `log-cache-bytes`: after its flush cycles a log drops its pages more than that many bytes
//! behind the flushed end from the page cache (`drop_behind.rs`), and nothing else: only
//! durable bytes (the [`MemEnv`] refuses a drop of anything not synced), nothing when it is 0,
//! and every entry still reads back. On a real file the dropped pages leave the page cache.

mod common;

use std::os::fd::AsRawFd;
use std::sync::Arc;

use common::util::entry;
use common::util::wait;
use common::util::waiter;
use common::TestConfig;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::env::Env;
use raftmq_raft_log::env::FsEnv;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::PhysOffset;

type Store = LogStore<TestConfig>;

const SEG: u64 = 1 << 20;
const MIB: u64 = 1 << 20;

fn open(dir: &tempfile::TempDir, env: &MemEnv, cache_bytes: u64) -> Store {
    let c = LogConfig {
        segment_bytes: SEG,
        log_cache_bytes: cache_bytes,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone())).unwrap()
}

/// Appends `n` entries of 1000 bytes from index `first`, each waiting for its flush.
fn append_flushed(s: &Store, first: u64, n: u64) {
    for i in first..first + n {
        let (cb, rx) = waiter();
        s.append_entries(vec![entry(1, i, 1000)], cb).unwrap();
        wait(&rx).unwrap();
    }
}

#[test]
fn a_log_drops_what_lies_more_than_the_cache_bytes_behind_its_flushed_end() {
    let dir = tempfile::tempdir().unwrap();
    let env = MemEnv::new();
    let s = open(&dir, &env, MIB);
    append_flushed(&s, 1, 1500);
    assert_eq!(env.dropped_cache_bytes(), 0, "under cache bytes + one step");
    append_flushed(&s, 1501, 3500);
    let end = s.watermarks().appended_phys_end.get();
    let dropped = env.dropped_cache_bytes();
    // Everything older than the cache bytes, but for the last step not yet taken (and the
    // segment headers before the first entry, which a drop may or may not include).
    assert!(dropped <= end - MIB, "dropped {dropped} of {end}");
    assert!(dropped + MIB + 2 * MIB >= end, "dropped {dropped} of {end}");
    // Spread over several segments, and still every entry reads back.
    assert!(end > 3 * SEG, "{end}");
    let back = s
        .read_entries(LogIndex::new(1), LogIndex::new(5001))
        .unwrap();
    assert_eq!(back.len(), 5000);
    assert_eq!(back[17], entry(1, 18, 1000));
    s.close().unwrap();
}

#[test]
fn zero_cache_bytes_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = MemEnv::new();
    let s = open(&dir, &env, 0);
    append_flushed(&s, 1, 4000);
    assert_eq!(env.dropped_cache_bytes(), 0);
    s.close().unwrap();
}

/// Pages of `f`'s first `len` bytes resident in the page cache (`mincore` of a mapping).
fn resident_pages(f: &std::fs::File, len: usize) -> usize {
    // SAFETY: a read-only mapping of a file only this test writes, and not while mapped.
    let map = unsafe { memmap2::Mmap::map(f) }.unwrap();
    let mut v = vec![0u8; len.div_ceil(4096)];
    // SAFETY: `map` is a live mapping of at least `len` bytes and `v` has one byte per page.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, len, v.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    v.iter().filter(|b| *b & 1 == 1).count()
}

#[test]
fn a_real_segment_drops_its_synced_pages_from_the_page_cache_and_keeps_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let seg = FsEnv::default().create_segment(&path, 4 * MIB).unwrap();
    // In appends' sizes: one 2 MiB write may make 2 MiB folios, which a drop of half of
    // them leaves alone.
    for i in 0..32 {
        seg.write_at(i * (64 << 10), &[7u8; 64 << 10]).unwrap();
    }
    seg.sync_range(0, 2 * MIB).unwrap();
    // A reader copies the first half out of the mapping (as consumers do): its pages are
    // mapped now, which alone would keep them cached.
    let mut read = vec![0u8; MIB as usize];
    seg.read_at(0, &mut read).unwrap();
    assert!(read.iter().all(|&b| b == 7));
    let file = std::fs::File::open(&path).unwrap();
    let before = resident_pages(&file, 2 * MIB as usize);
    seg.drop_cache(0, MIB).unwrap();
    let after = resident_pages(&file, 2 * MIB as usize);
    // tmpfs keeps its pages (they are the only copy); any disk file system frees them.
    // SAFETY: `statfs` is plain data (integers), for which all zeros is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid statfs buffer and the descriptor is open.
    assert_eq!(unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) }, 0);
    if st.f_type != libc::TMPFS_MAGIC {
        assert_eq!(before, 512, "written pages are cached");
        assert!(
            after <= 256,
            "the dropped half left the cache: {after} pages still there"
        );
    }
    let mut back = vec![0u8; 16];
    seg.read_at(MIB / 2, &mut back).unwrap();
    assert_eq!(back, vec![7u8; 16], "dropping changes no bytes");
    let err = seg.drop_cache(4 * MIB - 10, 4096).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn a_real_log_reads_its_dropped_entries_back_around_the_page_cache() {
    // Past the recent-entries cache (8 MiB) and the 1 MiB window: the oldest entries are
    // read with O_DIRECT in chunks (`cold_read.rs`), and read the same.
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 4 * MIB,
        log_cache_bytes: MIB,
        ..LogConfig::default()
    };
    let s = Store::open(dir.path(), c).unwrap();
    let n = 12_000;
    for first in (1..=n).step_by(100) {
        let (cb, rx) = waiter();
        let batch = (first..first + 100).map(|i| entry(1, i, 1000)).collect();
        s.append_entries(batch, cb).unwrap();
        wait(&rx).unwrap();
    }
    let back = s
        .read_entries(LogIndex::new(1), LogIndex::new(n + 1))
        .unwrap();
    assert_eq!(back.len(), n as usize);
    for (i, e) in back.iter().enumerate() {
        assert_eq!(*e, entry(1, i as u64 + 1, 1000), "entry {}", i + 1);
    }
    // The raw bytes of an old entry, as a consumer's pull reads a record.
    let l = s.entry_location(LogIndex::new(7)).unwrap();
    let raw = s.read_at(PhysOffset::new(l.phys), l.size).unwrap();
    let again = s.read_at(PhysOffset::new(l.phys), l.size).unwrap();
    assert_eq!(raw.len(), l.size as usize);
    assert_eq!(raw, again);
    assert!(raw.windows(100).any(|w| *w == entry_bytes(7)[..100]));
    s.close().unwrap();
}

/// The payload bytes of [`entry`]`(_, index, 1000)`.
fn entry_bytes(index: u64) -> Vec<u8> {
    (0..1000).map(|i| (index as usize * 7 + i) as u8).collect()
}
