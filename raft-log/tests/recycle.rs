//! Segments retention deletes, kept and reused (`recycle-segments`), on the real file system:
//! a reused file's old bytes never pass for records, across rolls, reopens, crashes and
//! truncations.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::util::entry;
use common::util::ignore;
use common::util::indexes;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogIndex;

type Store = LogStore<TestConfig>;

/// Small segments: a reused tail is zeroed whole at open.
const SMALL: u64 = 64 << 10;
/// Past recovery's tail scan (16 MiB): a reused tail is closed with a padding record at open.
const LARGE: u64 = 32 << 20;

fn config(segment_bytes: u64, recycle: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        flush: FlushPolicy::Sync,
        recycle_segments: recycle,
        // Inline segment creation: which file a roll takes is then deterministic.
        preallocate: false,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, segment_bytes: u64) -> Store {
    Store::open(dir, config(segment_bytes, 1)).unwrap()
}

/// The names in `commitlog/` with their inodes, sorted.
fn files(dir: &Path) -> Vec<(String, u64)> {
    let mut out: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect();
    out.sort();
    out
}

fn ino_of(dir: &Path, start: u64) -> u64 {
    let name = format!("{start:020}");
    files(dir).into_iter().find(|(n, _)| *n == name).unwrap().1
}

fn free_names(dir: &Path) -> Vec<String> {
    let names = files(dir).into_iter().map(|(n, _)| n);
    names.filter(|n| n.ends_with(".free")).collect()
}

/// Appends entries `from..=to` of `size` bytes, term `term`, and waits until they are durable.
fn append(s: &Store, term: u64, from: u64, to: u64, size: usize) {
    let entries = (from..=to).map(|i| entry(term, i, size)).collect();
    s.append_entries(entries, ignore()).unwrap();
    s.flush().unwrap();
}

/// Purges up to `upto` and deletes the segments below it; returns the new log start.
fn retain_from(s: &Store, upto: u64) -> u64 {
    s.purge(LogId::new_term_index(1, upto)).unwrap();
    let w = s.watermarks();
    s.delete_segments_below(w.purged_phys_end).unwrap().get()
}

/// Appends entries of `size` bytes from `from` on until the log reaches segment `seg`;
/// returns the next index.
fn append_into_segment(s: &Store, seg_bytes: u64, seg: u64, mut from: u64, size: usize) -> u64 {
    while s.watermarks().appended_phys_end.get() <= seg * seg_bytes {
        append(s, 1, from, from, size);
        from += 1;
    }
    from
}

fn payloads_match(s: &Store, range: std::ops::RangeInclusive<u64>, size: usize) {
    let got = s
        .read_entries(
            LogIndex::new(*range.start()),
            LogIndex::new(range.end() + 1),
        )
        .unwrap();
    let want: Vec<_> = range.map(|i| entry(1, i, size)).collect();
    assert_eq!(got, want);
}

#[test]
fn a_deleted_segment_becomes_a_later_one_and_the_pool_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), SMALL);
    // Four segments of 3000-byte entries (21 a segment), then retention of the first three.
    let next = append_into_segment(&s, SMALL, 3, 1, 3000);
    let ino0 = ino_of(dir.path(), 0);
    // Up to the last entry of segment 2: segments 0 and 1 go, one kept.
    let start = retain_from(&s, next - 2);
    assert_eq!(start, 2 * SMALL);
    assert_eq!(free_names(dir.path()), vec![format!("{:020}.free", 0)]);
    assert_eq!(files(dir.path()).len(), 3, "{:?}", files(dir.path()));
    let next = append_into_segment(&s, SMALL, 4, next, 3000);
    assert!(
        free_names(dir.path()).is_empty(),
        "the roll took the free segment"
    );
    assert_eq!(
        ino_of(dir.path(), 4 * SMALL),
        ino0,
        "the same file, renamed"
    );
    s.close().unwrap();
    drop(s);
    // Reopened: exactly the retained entries, the reused segment's old bytes no record.
    let s = open(dir.path(), SMALL);
    let first = indexes(&s)[0];
    payloads_match(&s, first..=next - 1, 3000);
    append(&s, 1, next, next + 2, 3000);
    payloads_match(&s, first..=next + 2, 3000);
    // Retention keeps one again; a full disk's pass deletes it.
    assert_eq!(retain_from(&s, next + 1), 4 * SMALL);
    assert_eq!(free_names(dir.path()).len(), 1);
    assert_eq!(s.delete_free_segments().unwrap(), 1);
    assert!(free_names(dir.path()).is_empty());
    payloads_match(&s, next + 2..=next + 2, 3000);
    s.close().unwrap();
    drop(s);
    // A free segment beyond the pool's size is deleted at open.
    std::fs::write(dir.path().join("commitlog").join("x.free"), b"").unwrap();
    let s = Store::open(dir.path(), config(SMALL, 0)).unwrap();
    assert!(free_names(dir.path()).is_empty());
    payloads_match(&s, next + 2..=next + 2, 3000);
}

/// A reused segment as the log's tail, reopened after a clean close and after a crash. After a
/// clean close the log goes on where it ended (its old bytes stay); after a crash, at `SMALL`
/// its old bytes are zeroed, at `LARGE` the segment is closed with a padding record and the log
/// goes on in the next one.
#[test]
fn a_reused_tail_reopens_with_exactly_its_records() {
    for (seg, size) in [(SMALL, 3000), (LARGE, 400_000)] {
        for crash in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let s = open(dir.path(), seg);
            let next = append_into_segment(&s, seg, 1, 1, size);
            let ino0 = ino_of(dir.path(), 0);
            retain_from(&s, next - 1);
            let next = append_into_segment(&s, seg, 2, next, size);
            assert_eq!(
                ino_of(dir.path(), 2 * seg),
                ino0,
                "segment 2 is the reused one"
            );
            let next = next + 3;
            append(&s, 1, next - 3, next - 1, size);
            let end = s.watermarks().appended_phys_end.get();
            if crash {
                s.halt_without_flush();
            } else {
                s.close().unwrap();
            }
            drop(s);
            let s = open(dir.path(), seg);
            let first = indexes(&s)[0];
            payloads_match(&s, first..=next - 1, size);
            let w = s.watermarks();
            let reopened_end = if seg == LARGE && crash { 3 * seg } else { end };
            assert_eq!(
                w.appended_phys_end.get(),
                reopened_end,
                "seg {seg} crash {crash}"
            );
            append(&s, 1, next, next + 1, size);
            let l = s.entry_location(LogIndex::new(next)).unwrap();
            assert_eq!(
                l.phys, reopened_end,
                "the next append goes at the reopened end"
            );
            s.halt_without_flush();
            drop(s);
            let s = open(dir.path(), seg);
            payloads_match(&s, first..=next + 1, size);
        }
    }
}

/// A truncation inside a reused segment, and one back across a roll into it: the cut
/// entries never come back, and the log goes on at the cut (this process wrote every byte of
/// the segment past it that is not a reused file's old bytes, and zeroes them).
#[test]
fn truncation_in_a_reused_segment_keeps_the_cut() {
    for across_roll in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path(), SMALL);
        let next = append_into_segment(&s, SMALL, 1, 1, 3000);
        retain_from(&s, next - 1);
        let mut next = append_into_segment(&s, SMALL, 2, next, 3000);
        let keep = next + 2;
        append(&s, 1, next, keep + 3, 3000);
        next = keep + 4;
        if across_roll {
            next = append_into_segment(&s, SMALL, 3, next, 3000);
        }
        s.save_committed(Some(LogId::new_term_index(1, keep)))
            .unwrap();
        s.truncate_after(Some(LogId::new_term_index(1, keep)))
            .unwrap();
        let keep_end = s.entry_location(LogIndex::new(keep)).unwrap().end();
        let w = s.watermarks();
        // Across a roll too, the log goes on at the cut, where a replica that never held the
        // cut entries appends the next one: the same index at the same offset everywhere.
        let expect_end = keep_end;
        assert_eq!(
            w.appended_phys_end.get(),
            expect_end,
            "across a roll: {across_roll}"
        );
        // New entries of a later term at the cut indexes.
        let entries = (keep + 1..=keep + 2).map(|i| entry(2, i, 1000)).collect();
        s.append_entries(entries, ignore()).unwrap();
        s.flush().unwrap();
        s.close().unwrap();
        drop(s);
        let s = open(dir.path(), SMALL);
        let got = s
            .read_entries(LogIndex::new(keep - 1), LogIndex::new(u64::MAX))
            .unwrap();
        let want = vec![
            entry(1, keep - 1, 3000),
            entry(1, keep, 3000),
            entry(2, keep + 1, 1000),
            entry(2, keep + 2, 1000),
        ];
        assert_eq!(got, want, "across a roll: {across_roll}");
        let l = s.entry_location(LogIndex::new(keep + 1)).unwrap();
        assert_eq!(l.phys, expect_end);
    }
}

/// A truncation back into a reused segment that recovery closed with a padding record: the
/// segment stays closed (its old bytes are not zeroed: that would write most of a segment
/// under the flush lock), and the cut entries never come back.
#[test]
fn truncation_into_a_reused_segment_recovery_closed() {
    let (seg, size) = (LARGE, 400_000);
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), seg);
    let next = append_into_segment(&s, seg, 1, 1, size);
    retain_from(&s, next - 1);
    let next = append_into_segment(&s, seg, 2, next, size);
    append(&s, 1, next, next + 2, size);
    s.halt_without_flush();
    drop(s);
    let s = open(dir.path(), seg);
    assert_eq!(s.watermarks().appended_phys_end.get(), 3 * seg);
    s.truncate_after(Some(LogId::new_term_index(1, next)))
        .unwrap();
    assert_eq!(s.watermarks().appended_phys_end.get(), 3 * seg);
    s.append_entries(vec![entry(2, next + 1, 1000)], ignore())
        .unwrap();
    s.flush().unwrap();
    s.close().unwrap();
    drop(s);
    let file = dir
        .path()
        .join("commitlog")
        .join(format!("{:020}", 2 * seg));
    let mut tail = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(file).unwrap(),
        &mut tail,
        seg / 2,
    )
    .unwrap();
    assert!(tail.iter().any(|b| *b != 0), "old bytes left in place");
    let s = open(dir.path(), seg);
    let got = s
        .read_entries(LogIndex::new(next), LogIndex::new(u64::MAX))
        .unwrap();
    assert_eq!(got, vec![entry(1, next, size), entry(2, next + 1, 1000)]);
    let l = s.entry_location(LogIndex::new(next + 1)).unwrap();
    assert_eq!(l.phys, 3 * seg);
}

/// `bench suite --written-segments` puts written files in `commitlog/` of a node that never
/// ran. The new log adopts them, but its first segment is new: a reused file's old records
/// are told from the new life's by the offsets they name, which are all below a later
/// segment's and could equal the first one's. The next roll takes a seed, whose old bytes
/// (here not even zeros) do not pass for records across a reopen.
#[test]
fn free_files_put_in_a_new_log_become_its_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let commitlog = dir.path().join("commitlog");
    std::fs::create_dir_all(&commitlog).unwrap();
    let seed = commitlog.join("seed-1.free");
    std::fs::write(&seed, vec![0xab; SMALL as usize]).unwrap();
    let seed_ino = std::fs::metadata(&seed).unwrap().ino();
    let s = open(dir.path(), SMALL);
    append(&s, 1, 1, 5, 3000);
    assert_ne!(ino_of(dir.path(), 0), seed_ino, "segment 0 is new");
    assert_eq!(free_names(dir.path()), ["seed-1.free"]);
    let next = append_into_segment(&s, SMALL, 1, 6, 3000);
    assert!(free_names(dir.path()).is_empty(), "{:?}", files(dir.path()));
    assert_eq!(ino_of(dir.path(), SMALL), seed_ino, "segment 1 is the seed");
    drop(s);
    let s = open(dir.path(), SMALL);
    payloads_match(&s, 1..=next - 1, 3000);
    let after = s.read_entries(LogIndex::new(next), LogIndex::new(next + 1));
    assert!(after.unwrap().is_empty());
}
