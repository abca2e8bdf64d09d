//! A power loss inside `replace_from_files` (issue 13), on a [`MemEnv`] whose crashes lose
//! unsynced bytes *and* directory entries not yet fsynced (removals, renames): after a crash
//! at every step of the swap the log opens as the old log or as the new one, and installing
//! again from there succeeds.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::util::entry;
use common::util::ignore;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::env::Env;
use raftmq_raft_log::mem_env::CrashMode;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::PhysOffset;

type Store = LogStore<TestConfig>;

const SEG: u64 = 4096;

fn open(dir: &Path, env: &MemEnv) -> Store {
    let c = LogConfig {
        segment_bytes: SEG,
        flush: FlushPolicy::Async,
        flush_interval_ms: 60_000,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir, c, Arc::new(env.clone())).unwrap()
}

/// Stages the retained segments of `log` in `env` under `staged` (created durably, full size,
/// as the store writes a snapshot stream); returns the end of their records.
fn stage(log: &Store, env: &MemEnv, staged: &Path) -> u64 {
    let w = log.watermarks();
    let (start, end) = (w.min_phys_offset.get(), w.appended_phys_end.get());
    let pin = log
        .pin_range(PhysOffset::new(start), PhysOffset::new(end))
        .unwrap();
    let mut s = start;
    while s < end {
        let len = (s + SEG).min(end) - s;
        let bytes = pin.read_at(PhysOffset::new(s), len as u32).unwrap();
        let f = env
            .create_segment(&staged.join(format!("{s:020}")), SEG)
            .unwrap();
        f.write_at(0, &bytes).unwrap();
        f.sync_range(0, SEG).unwrap();
        s += SEG;
    }
    end
}

/// Which log a reopened receiver holds.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Old,
    New,
}

/// `b` is the untouched old log (entries 1..=12, nothing purged) or the installed one (as
/// `a` from entry 11 on, purged up to 30).
fn old_or_new(a: &Store, b: &Store) -> Side {
    let (wa, wb) = (a.watermarks(), b.watermarks());
    assert!(b.lost_commit_floor().is_none(), "{wb:?}");
    if wb.last_purged.is_none() {
        assert_eq!(wb.min_phys_offset, PhysOffset::ZERO, "{wb:?}");
        assert_eq!(wb.appended, Some(LogId::new_term_index(1, 12)), "{wb:?}");
        let n = b
            .read_entries(LogIndex::new(1), LogIndex::new(13))
            .unwrap()
            .len();
        assert_eq!(n, 12);
        return Side::Old;
    }
    assert_eq!(wb.last_purged, Some(LogId::new_term_index(1, 30)), "{wb:?}");
    assert_eq!(
        (wb.min_phys_offset, wb.appended, wb.appended_phys_end),
        (wa.min_phys_offset, wa.appended, wa.appended_phys_end)
    );
    let got = b
        .read_entries(LogIndex::new(31), LogIndex::new(41))
        .unwrap();
    let want = a
        .read_entries(LogIndex::new(31), LogIndex::new(41))
        .unwrap();
    assert_eq!(got, want);
    for i in 11..=40 {
        assert_eq!(
            a.entry_location(LogIndex::new(i)),
            b.entry_location(LogIndex::new(i)),
            "entry {i}"
        );
    }
    Side::New
}

#[test]
fn power_loss_at_every_install_step_reopens_old_or_new() {
    let dir_a = tempfile::tempdir().unwrap();
    let env_a = MemEnv::new();
    let a = open(dir_a.path(), &env_a);
    a.append_entries((1..=40).map(|i| entry(1, i, 700)).collect(), ignore())
        .unwrap();
    a.purge(LogId::new_term_index(1, 10)).unwrap();
    a.delete_segments_below(a.watermarks().purged_phys_end)
        .unwrap();
    let mut seen = Vec::new();
    for n in 1.. {
        let dir_b = tempfile::tempdir().unwrap();
        let env = MemEnv::new();
        let b = open(dir_b.path(), &env);
        // Old segments share names with the snapshot's first segments.
        b.append_entries((1..=12).map(|i| entry(1, i, 700)).collect(), ignore())
            .unwrap();
        b.save_committed(Some(LogId::new_term_index(1, 3))).unwrap();
        b.flush().unwrap();
        let staged = dir_b.path().join("staged");
        let end = stage(&a, &env, &staged);
        env.set_volatile_dirs(true);
        b.set_install_failpoint(Some(n));
        let r = b.replace_from_files(&staged, LogId::new_term_index(1, 30), PhysOffset::new(end));
        b.halt_without_flush();
        drop(b);
        env.crash(CrashMode::DropUnsynced);
        let b = open(dir_b.path(), &env);
        let side = old_or_new(&a, &b);
        if r.is_ok() {
            assert_eq!(side, Side::New);
            break;
        }
        seen.push(side);
        // The redo: stage again (over what is left), install again, survive a reopen.
        let end = stage(&a, &env, &staged);
        b.replace_from_files(&staged, LogId::new_term_index(1, 30), PhysOffset::new(end))
            .unwrap();
        assert_eq!(old_or_new(&a, &b), Side::New);
        b.append_entries(vec![entry(2, 41, 900)], ignore()).unwrap();
        b.flush().unwrap();
        b.halt_without_flush();
        drop(b);
        env.crash(CrashMode::DropUnsynced);
        let b = open(dir_b.path(), &env);
        let n = b
            .read_entries(LogIndex::new(31), LogIndex::new(100))
            .unwrap()
            .len();
        assert_eq!(n, 11, "crash at step {}", seen.len());
    }
    assert!(
        seen.contains(&Side::Old) && seen.contains(&Side::New),
        "{seen:?}"
    );
    assert!(seen.len() > 8, "{seen:?}");
}
