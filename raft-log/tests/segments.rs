//! Segment rolls, entry size limits, deterministic placement, retention, snapshot install.

mod common;

use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::PhysOffset;
use std::sync::Arc;

use common::util::entry;
use common::util::ignore;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::error::LogError;
use raftmq_raft_log::format::ENTRY_HEADER_LEN;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;

type Store = LogStore<TestConfig>;
const SEG: u64 = 4096;

fn open(dir: &tempfile::TempDir, env: &MemEnv) -> Store {
    let c = LogConfig {
        segment_bytes: SEG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone())).unwrap()
}

const SIZES: [usize; 12] = [10, 3000, 500, 2100, 0, 4048, 1, 2047, 2048, 64, 3900, 7];

#[test]
fn rolls_keep_entries_whole_and_contiguous() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    for (i, size) in SIZES.iter().enumerate() {
        s.append_entries(vec![entry(1, i as u64 + 1, *size)], ignore())
            .unwrap();
    }
    let mut end = 0;
    for i in 1..=SIZES.len() as u64 {
        let l = s.entry_location(LogIndex::new(i)).unwrap();
        assert_eq!(l.size as usize, ENTRY_HEADER_LEN + SIZES[i as usize - 1]);
        let expected =
            if end % SEG + l.size as u64 > SEG || (end % SEG == 0 && end > 0 && l.phys != end) {
                end - end % SEG + SEG
            } else {
                end
            };
        assert_eq!(l.phys, expected, "entry {i}");
        assert_eq!(
            l.phys / SEG,
            (l.end() - 1) / SEG,
            "entry {i} spans two segments"
        );
        let payload = s
            .read_at(
                PhysOffset::new(l.phys + ENTRY_HEADER_LEN as u64),
                l.size - ENTRY_HEADER_LEN as u32,
            )
            .unwrap();
        assert_eq!(
            payload,
            match entry(1, i, SIZES[i as usize - 1]).payload {
                raftmq_raft_log::types::Payload::Normal(p) => p.0,
                _ => unreachable!(),
            }
        );
        end = l.end();
    }
    s.close().unwrap();
    drop(s);
    let s = open(&dir, &env);
    assert_eq!(
        s.read_entries(LogIndex::new(0), LogIndex::new(100))
            .unwrap()
            .len(),
        SIZES.len()
    );
}

/// One append of many records that roll over several segments, on the real files (one
/// vectored write per run of records in a segment): the same places as one append per
/// record, every payload intact after a reopen.
#[test]
fn one_append_rolling_segments_places_and_keeps_every_record() {
    let config = || LogConfig {
        segment_bytes: SEG,
        flush: FlushPolicy::Sync,
        ..LogConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), config()).unwrap();
    let entries: Vec<_> = (SIZES.iter().enumerate())
        .map(|(i, size)| entry(1, i as u64 + 1, *size))
        .collect();
    s.append_entries(entries.clone(), ignore()).unwrap();
    let (one_by_one, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let r = open(&one_by_one, &env);
    for e in entries.clone() {
        r.append_entries(vec![e], ignore()).unwrap();
    }
    for i in 1..=SIZES.len() as u64 {
        let (got, want) = (
            s.entry_location(LogIndex::new(i)),
            r.entry_location(LogIndex::new(i)),
        );
        assert_eq!(got.unwrap(), want.unwrap(), "entry {i}");
    }
    s.close().unwrap();
    drop(s);
    let s = Store::open(dir.path(), config()).unwrap();
    let back = s
        .read_entries(LogIndex::new(0), LogIndex::new(100))
        .unwrap();
    assert_eq!(back, entries);
}

/// Appends that each roll over two or three segments, while the zero-ahead thread writes zeros
/// past the writes: nothing appended is lost, paddings included (a padding zeroed by the
/// thread would end the log early on reopen).
#[test]
fn rolling_appends_racing_the_zero_ahead_thread_lose_nothing() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    let mut all = Vec::new();
    for round in 0..40u64 {
        let batch: Vec<_> = (0..12)
            .map(|i| {
                entry(
                    1,
                    round * 12 + i + 1,
                    600 + (round as usize * 37 + i as usize * 11) % 500,
                )
            })
            .collect();
        s.append_entries(batch.clone(), ignore()).unwrap();
        all.extend(batch);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    s.flush().unwrap();
    s.close().unwrap();
    drop(s);
    let s = open(&dir, &env);
    let back = s
        .read_entries(LogIndex::new(0), LogIndex::new(1000))
        .unwrap();
    assert_eq!(back.len(), all.len());
    assert!(back == all, "an appended entry changed");
}

#[test]
fn entry_larger_than_a_segment_is_rejected() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    let max = SEG as usize - ENTRY_HEADER_LEN;
    let err = s
        .append_entries(vec![entry(1, 1, max + 1)], ignore())
        .unwrap_err();
    assert!(
        matches!(err, LogError::EntryTooLarge { size, max: m } if size == SEG + 1 && m == SEG),
        "{err}"
    );
    assert!(err.to_string().contains("larger than the maximum"));
    s.append_entries(vec![entry(1, 1, max)], ignore()).unwrap();
    s.append_entries(vec![entry(1, 2, max)], ignore()).unwrap();
    assert_eq!(s.entry_location(LogIndex::new(2)).unwrap().phys, SEG);
}

#[test]
fn same_entries_give_identical_bytes_on_every_node() {
    let envs = [MemEnv::new(), MemEnv::new()];
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut end = 0;
    for (env, dir) in envs.iter().zip(&dirs) {
        let s = open(dir, env);
        for (i, size) in SIZES.iter().enumerate() {
            s.append_entries(vec![entry(3, i as u64 + 10, *size)], ignore())
                .unwrap();
        }
        end = s.watermarks().appended_phys_end.get();
        s.close().unwrap();
    }
    let seg_bytes = |env: &MemEnv, dir: &tempfile::TempDir| {
        let mut out = Vec::new();
        for p in env
            .paths()
            .into_iter()
            .filter(|p| p.starts_with(dir.path().join("commitlog")))
        {
            // Only segments holding entries (a preallocated next one may or may not exist).
            let start: u64 = p.file_name().unwrap().to_str().unwrap().parse().unwrap();
            if start >= end {
                continue;
            }
            let name = p.file_name().unwrap().to_owned();
            let f = raftmq_raft_log::env::Env::open_segment(env, &p).unwrap();
            let mut buf = vec![0u8; SEG as usize];
            f.read_at(0, &mut buf).unwrap();
            out.push((name, buf));
        }
        out
    };
    let a = seg_bytes(&envs[0], &dirs[0]);
    assert!(a.len() >= 4);
    assert_eq!(a, seg_bytes(&envs[1], &dirs[1]));
}

/// A leader that appended entries past a roll and lost them to a new leader's log cuts back
/// into the segment it rolled out of: it must go on at the cut, where a replica that never
/// held the cut entries appends the new ones, so both give each index the same offset (a
/// message id is its offset, valid on every node). It went on at the next segment's start.
#[test]
fn a_cut_that_undoes_a_roll_keeps_the_offsets_of_a_replica_that_never_rolled() {
    let kept = [1000, 1000, 500];
    let cut = [3000, 200];
    let new = [500, 700];
    let append = |s: &Store, term: u64, from: u64, sizes: &[usize]| {
        for (i, size) in sizes.iter().enumerate() {
            s.append_entries(vec![entry(term, from + i as u64, *size)], ignore())
                .unwrap();
        }
    };
    let (env_a, dir_a) = (MemEnv::new(), tempfile::tempdir().unwrap());
    let a = open(&dir_a, &env_a);
    append(&a, 3, 10, &kept);
    append(&a, 3, 13, &cut);
    assert!(
        a.watermarks().appended_phys_end.get() > SEG,
        "the cut entries rolled"
    );
    a.truncate_after(Some(LogId::new_term_index(3, 12)))
        .unwrap();
    append(&a, 4, 13, &new);
    let (env_b, dir_b) = (MemEnv::new(), tempfile::tempdir().unwrap());
    let b = open(&dir_b, &env_b);
    append(&b, 3, 10, &kept);
    append(&b, 4, 13, &new);
    for i in 10..=14 {
        let at = |s: &Store| s.entry_location(LogIndex::new(i)).unwrap().phys;
        assert_eq!(at(&a), at(&b), "index {i}");
    }
    assert_eq!(
        a.watermarks().appended_phys_end,
        b.watermarks().appended_phys_end
    );
    a.close().unwrap();
    drop(a);
    let a = open(&dir_a, &env_a);
    let got = a
        .read_entries(LogIndex::new(10), LogIndex::new(u64::MAX))
        .unwrap();
    let mut want: Vec<_> = (10..13).zip(kept).map(|(i, n)| entry(3, i, n)).collect();
    want.extend((13..15).zip(new).map(|(i, n)| entry(4, i, n)));
    assert_eq!(got, want);
}

#[test]
fn delete_segments_only_below_the_purge_point() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    let entries = (1..=40).map(|i| entry(1, i, 900)).collect();
    s.append_entries(entries, ignore()).unwrap();
    let l20 = s.entry_location(LogIndex::new(20)).unwrap();
    let err = s.delete_segments_below(l20.phys_offset()).unwrap_err();
    assert!(matches!(err, LogError::DeleteUnpurged { .. }), "{err}");
    s.purge(LogId::new_term_index(1, 20)).unwrap();
    let w = s.watermarks();
    assert_eq!(w.purged_phys_end.get(), l20.end());
    // Purged entries stay readable until their segment goes.
    assert!(s
        .read_at(
            s.entry_location(LogIndex::new(3)).unwrap().phys_offset(),
            10
        )
        .is_ok());
    let min = s.delete_segments_below(w.purged_phys_end).unwrap();
    assert_eq!(min.get(), l20.end() - l20.end() % SEG);
    assert!(s.read_at(PhysOffset::ZERO, 10).is_err());
    assert!(s.entry_location(LogIndex::new(3)).is_none());
    assert!(!env
        .paths()
        .contains(&dir.path().join("commitlog").join(format!("{:020}", 0))));
    s.close().unwrap();
    drop(s);
    let s = open(&dir, &env);
    let w = s.watermarks();
    assert_eq!(w.min_phys_offset, min);
    assert_eq!(w.last_purged, Some(LogId::new_term_index(1, 20)));
    let got: Vec<_> = s
        .read_entries(LogIndex::new(21), LogIndex::new(u64::MAX))
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(got, (21..=40).collect::<Vec<_>>());
    s.append_entries(vec![entry(1, 41, 5)], ignore()).unwrap();
}

#[test]
fn purge_past_the_end_then_append_continues() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    s.append_entries((1..=5).map(|i| entry(1, i, 100)).collect(), ignore())
        .unwrap();
    s.purge(LogId::new_term_index(2, 9)).unwrap();
    s.append_entries(vec![entry(2, 10, 100)], ignore()).unwrap();
    s.close().unwrap();
    drop(s);
    let s = open(&dir, &env);
    let got: Vec<_> = s
        .read_entries(LogIndex::new(0), LogIndex::new(u64::MAX))
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(got, vec![10]);
}

#[test]
fn full_disk_fails_the_roll_cleanly() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    s.append_entries(vec![entry(1, 1, 3000)], ignore()).unwrap();
    // Let the background preallocation of the next segment fail too.
    env.set_disk_full(true);
    s.close().unwrap();
    drop(s);
    for p in env.paths() {
        if p.file_name().and_then(|n| n.to_str()) == Some("00000000000000004096") {
            raftmq_raft_log::env::Env::remove(&env, &p).unwrap();
        }
    }
    let s = open(&dir, &env);
    let err = s
        .append_entries(vec![entry(1, 2, 3000)], ignore())
        .unwrap_err();
    assert!(matches!(err, LogError::DiskFull { .. }), "{err}");
    assert!(err.to_string().contains("disk full"), "{err}");
    // The entry before the failed roll is intact; the log refuses further writes.
    assert_eq!(
        s.read_entries(LogIndex::new(0), LogIndex::new(10))
            .unwrap()
            .len(),
        1
    );
    assert!(s.append_entries(vec![entry(1, 2, 10)], ignore()).is_err());
}

/// Opens on the real file system (snapshot install renames staged files into `commitlog/`).
fn open_fs(dir: &tempfile::TempDir) -> Store {
    let c = LogConfig {
        segment_bytes: SEG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    };
    LogStore::open(dir.path(), c).unwrap()
}

/// Stages the retained segments of `log` as full-size, fsynced files named by start offset
/// (what the `store` crate writes from a snapshot stream); returns the end of their records.
fn stage_segments(log: &Store, staged: &std::path::Path) -> u64 {
    let w = log.watermarks();
    let (start, end) = (w.min_phys_offset.get(), w.appended_phys_end.get());
    let pin = log
        .pin_range(PhysOffset::new(start), PhysOffset::new(end))
        .unwrap();
    std::fs::create_dir_all(staged).unwrap();
    let mut s = start;
    while s < end {
        let len = (s + SEG).min(end) - s;
        let bytes = pin.read_at(PhysOffset::new(s), len as u32).unwrap();
        let f = std::fs::File::create(staged.join(format!("{s:020}"))).unwrap();
        f.set_len(SEG).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0).unwrap();
        f.sync_all().unwrap();
        s += SEG;
    }
    end
}

#[test]
fn snapshot_install_copies_segments_and_keeps_offsets() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open_fs(&dir_a);
    let b = open_fs(&dir_b);
    a.append_entries((1..=40).map(|i| entry(1, i, 700)).collect(), ignore())
        .unwrap();
    b.append_entries((1..=3).map(|i| entry(1, i, 10)).collect(), ignore())
        .unwrap();
    // A retains from entry 11 on; B installs a snapshot covering up to 30.
    a.purge(LogId::new_term_index(1, 10)).unwrap();
    a.delete_segments_below(a.watermarks().purged_phys_end)
        .unwrap();
    let staged = dir_b.path().join("staged");
    let end = stage_segments(&a, &staged);
    b.replace_from_files(&staged, LogId::new_term_index(1, 30), PhysOffset::new(end))
        .unwrap();
    let (wa, wb) = (a.watermarks(), b.watermarks());
    assert_eq!(wb.min_phys_offset, wa.min_phys_offset);
    assert_eq!(wb.appended, wa.appended);
    assert_eq!(wb.appended_phys_end, wa.appended_phys_end);
    assert_eq!(wb.last_purged, Some(LogId::new_term_index(1, 30)));
    for i in 11..=40 {
        assert_eq!(
            a.entry_location(LogIndex::new(i)),
            b.entry_location(LogIndex::new(i)),
            "entry {i}"
        );
    }
    a.append_entries(vec![entry(2, 41, 900)], ignore()).unwrap();
    b.append_entries(vec![entry(2, 41, 900)], ignore()).unwrap();
    assert_eq!(
        a.entry_location(LogIndex::new(41)),
        b.entry_location(LogIndex::new(41))
    );
    b.close().unwrap();
    drop(b);
    let b = open_fs(&dir_b);
    assert_eq!(
        b.read_entries(LogIndex::new(31), LogIndex::new(100))
            .unwrap()
            .len(),
        11
    );
    assert_eq!(
        b.watermarks().last_purged,
        Some(LogId::new_term_index(1, 30))
    );
}

/// Retention removes a segment in steps (shrink 64 MiB at a time, then unlink); a missing
/// file is not an error.
#[test]
fn remove_large_shrinks_then_unlinks() {
    use raftmq_raft_log::env::Env;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000000");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(200 << 20).unwrap();
    drop(f);
    let env = raftmq_raft_log::env::FsEnv::default();
    env.remove_large(&p).unwrap();
    assert!(!p.exists());
    env.remove_large(&p).unwrap();
}

/// A pinned range keeps every byte readable while retention deletes its segments, even when
/// the segments are large enough for `remove_large` to shrink them (issue 13: shrinking a
/// mapped file made the pin's reads past the new end raise SIGBUS).
#[test]
fn pinned_segments_stay_readable_through_stepwise_removal() {
    const BIG: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let env = raftmq_raft_log::env::FsEnv {
        remove_step_bytes: 64 << 10,
        ..raftmq_raft_log::env::FsEnv::default()
    };
    let c = LogConfig {
        segment_bytes: BIG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    };
    let s: Store = LogStore::open_with_env(dir.path(), c, Arc::new(env)).unwrap();
    // 30 entries of 100 KiB: ten per segment, three segments.
    s.append_entries((1..=30).map(|i| entry(1, i, 100 << 10)).collect(), ignore())
        .unwrap();
    let last_in_first_two = (1..=30)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap())
        .rfind(|l| l.end() <= 2 * BIG)
        .unwrap();
    let pinned_end = last_in_first_two.end();
    let pin = s
        .pin_range(PhysOffset::ZERO, PhysOffset::new(pinned_end))
        .unwrap();
    let expected: Vec<_> = (1..=last_in_first_two.index)
        .map(|i| {
            let l = s.entry_location(LogIndex::new(i)).unwrap();
            (l, s.read_at(l.phys_offset(), l.size).unwrap())
        })
        .collect();
    // Purge into the third segment, so that both pinned segments go.
    s.purge(LogId::new_term_index(1, last_in_first_two.index + 1))
        .unwrap();
    let min = s.delete_segments_below(PhysOffset::new(2 * BIG)).unwrap();
    assert_eq!(min, PhysOffset::new(2 * BIG));
    assert!(!dir
        .path()
        .join("commitlog")
        .join(format!("{:020}", 0))
        .exists());
    for (l, bytes) in &expected {
        assert_eq!(
            &pin.read_at(l.phys_offset(), l.size).unwrap(),
            bytes,
            "entry {}",
            l.index
        );
    }
    // Every byte of the pinned segments, the zero tails included.
    for seg in 0..2 {
        let end = ((seg + 1) * BIG).min(pinned_end);
        let got = pin
            .read_at(PhysOffset::new(seg * BIG), (end - seg * BIG) as u32)
            .unwrap();
        assert_eq!(got.len() as u64, end - seg * BIG);
    }
    drop(pin);
    s.close().unwrap();
}

/// What a log reopened after an interrupted install holds.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Old,
    New,
}

/// Checks that `b` is either the untouched old log (entries 1..=12) or the installed one
/// (equal to `a` from entry 11 on, purged up to 30); says which.
fn old_or_new(a: &Store, b: &Store) -> Side {
    let (wa, wb) = (a.watermarks(), b.watermarks());
    assert!(b.lost_commit_floor().is_none(), "{wb:?}");
    if wb.last_purged.is_none() {
        assert_eq!(wb.min_phys_offset, PhysOffset::ZERO, "{wb:?}");
        assert_eq!(wb.appended, Some(LogId::new_term_index(1, 12)), "{wb:?}");
        assert_eq!(
            b.read_entries(LogIndex::new(1), LogIndex::new(13))
                .unwrap()
                .len(),
            12
        );
        return Side::Old;
    }
    assert_eq!(wb.last_purged, Some(LogId::new_term_index(1, 30)), "{wb:?}");
    assert_eq!(wb.min_phys_offset, wa.min_phys_offset);
    assert_eq!(wb.appended, wa.appended);
    assert_eq!(wb.appended_phys_end, wa.appended_phys_end);
    for i in 11..=40 {
        assert_eq!(
            a.entry_location(LogIndex::new(i)),
            b.entry_location(LogIndex::new(i)),
            "entry {i}"
        );
    }
    Side::New
}

/// Issue 13: a crash after any I/O step of `replace_from_files` leaves a log that opens as the
/// old log or the new one, and installing again from there (the store's redo) succeeds.
#[test]
fn crash_at_every_install_step_reopens_old_or_new() {
    let dir_a = tempfile::tempdir().unwrap();
    let a = open_fs(&dir_a);
    a.append_entries((1..=40).map(|i| entry(1, i, 700)).collect(), ignore())
        .unwrap();
    a.purge(LogId::new_term_index(1, 10)).unwrap();
    a.delete_segments_below(a.watermarks().purged_phys_end)
        .unwrap();
    let mut seen = Vec::new();
    for n in 1.. {
        let dir_b = tempfile::tempdir().unwrap();
        let b = open_fs(&dir_b);
        // Old segments 0..3 share names with the snapshot's first segments.
        b.append_entries((1..=12).map(|i| entry(1, i, 700)).collect(), ignore())
            .unwrap();
        b.save_committed(Some(LogId::new_term_index(1, 3))).unwrap();
        let staged = dir_b.path().join("staged");
        let end = stage_segments(&a, &staged);
        b.set_install_failpoint(Some(n));
        let r = b.replace_from_files(&staged, LogId::new_term_index(1, 30), PhysOffset::new(end));
        // A crash: nothing more is flushed or synced.
        b.halt_without_flush();
        drop(b);
        let b = open_fs(&dir_b);
        let side = old_or_new(&a, &b);
        if r.is_ok() {
            assert_eq!(side, Side::New);
            break;
        }
        seen.push(side);
        // The redo: stage again, install again.
        std::fs::remove_dir_all(&staged).ok();
        let end = stage_segments(&a, &staged);
        b.replace_from_files(&staged, LogId::new_term_index(1, 30), PhysOffset::new(end))
            .unwrap();
        assert_eq!(old_or_new(&a, &b), Side::New);
        b.append_entries(vec![entry(2, 41, 900)], ignore()).unwrap();
        assert!(b.entry_location(LogIndex::new(41)).is_some());
        b.close().unwrap();
        drop(b);
        let b = open_fs(&dir_b);
        assert_eq!(
            b.read_entries(LogIndex::new(31), LogIndex::new(100))
                .unwrap()
                .len(),
            11
        );
    }
    assert!(
        seen.contains(&Side::Old) && seen.contains(&Side::New),
        "{seen:?}"
    );
    assert!(seen.len() > 8, "{seen:?}");
}
