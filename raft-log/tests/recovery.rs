//! Recovery scenarios: lost unflushed bytes, torn tails, corruption of flushed data, a lost
//! raft index, I/O errors while flushing, committed-entry protection.

mod common;

use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::PhysOffset;
use raftmq_raft_log::EntryLocation;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use common::util::entry;
use common::util::ignore;
use common::util::indexes;
use common::util::wait;
use common::util::waiter;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::error::LogError;
use raftmq_raft_log::mem_env::CrashMode;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Vote;

type Store = LogStore<TestConfig>;

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        flush,
        ..LogConfig::default()
    }
}

/// Async with a long interval: nothing is flushed unless asked.
fn lazy() -> LogConfig {
    LogConfig {
        flush_interval_ms: 60_000,
        ..config(FlushPolicy::Async)
    }
}

fn open(dir: &tempfile::TempDir, env: &MemEnv, c: LogConfig) -> Result<Store, LogError> {
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone()))
}

/// A runtime for the async waits (`wait_durable`, `wait_applicable`).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Stops `s` without a flush, loses every unsynced byte and opens the log again.
fn power_loss(s: Store, dir: &tempfile::TempDir, env: &MemEnv) -> Store {
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    open(dir, env, lazy()).unwrap()
}

fn fill(s: &Store, from: u64, to: u64, size: usize) {
    let entries = (from..=to).map(|i| entry(1, i, size)).collect();
    s.append_entries(entries, ignore()).unwrap();
}

#[test]
fn crash_drops_unflushed_entries() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 5, 300);
    s.flush().unwrap();
    fill(&s, 6, 9, 300);
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(indexes(&s), vec![1, 2, 3, 4, 5]);
    // The log continues where it was cut.
    fill(&s, 6, 7, 10);
    assert_eq!(indexes(&s), vec![1, 2, 3, 4, 5, 6, 7]);
}

/// The release probe turns true only when the last handle is gone, and the log then opens
/// again in this process at once (its meta db's lock is free).
#[test]
fn released_probe_waits_for_the_last_handle() {
    let dir = tempfile::tempdir().unwrap();
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    fill(&s, 1, 3, 100);
    let released = s.released_probe();
    let other = s.clone();
    drop(s);
    assert!(!released(), "a clone still holds the log");
    drop(other);
    assert!(released());
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    assert_eq!(indexes(&s), vec![1, 2, 3]);
}

#[test]
fn torn_tail_is_truncated() {
    for keep in [1, 20, 47, 48, 100, 333, 700] {
        let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
        let s = open(&dir, &env, lazy()).unwrap();
        fill(&s, 1, 3, 300);
        s.flush().unwrap();
        fill(&s, 4, 6, 300);
        s.halt_without_flush();
        drop(s);
        env.crash(CrashMode::Torn { keep });
        let s = open(&dir, &env, lazy()).unwrap();
        let got = indexes(&s);
        assert!(got.len() >= 3 && got.len() < 6, "keep {keep}: {got:?}");
        let w = s.watermarks();
        assert_eq!(w.flushed_phys_end, w.appended_phys_end);
    }
}

/// [`lazy`] with `repair-truncate-corruption` on.
fn repairing() -> LogConfig {
    LogConfig {
        repair_truncate_corruption: true,
        ..lazy()
    }
}

/// Six flushed entries of 300 bytes, closed, then one byte of entry 4's payload flipped.
fn flushed_log_corrupt_at_entry_4() -> (tempfile::TempDir, MemEnv, EntryLocation) {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 6, 300);
    let loc = s.entry_location(LogIndex::new(4)).unwrap();
    s.close().unwrap();
    drop(s);
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    assert!(env.corrupt(&seg, loc.phys + 60, &[0xff]));
    (dir, env, loc)
}

#[test]
fn corruption_of_flushed_data_refuses_to_open_unless_repair() {
    let (dir, env, loc) = flushed_log_corrupt_at_entry_4();
    // The raft index covers the flushed bytes: open takes it instead of scanning them, and the
    // corruption shows on the first read, never as a shorter log.
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.watermarks().appended, Some(LogId::new_term_index(1, 6)));
    let err = s
        .read_entries(LogIndex::new(1), LogIndex::new(7))
        .unwrap_err();
    assert!(
        matches!(err, LogError::Corruption { offset, .. } if offset == loc.phys),
        "{err}"
    );
    drop(s);
    // Without the index, open scans and refuses.
    raftmq_raft_log::env::Env::remove(&env, &dir.path().join("raft-index").join("index")).unwrap();
    let err = open(&dir, &env, lazy()).err().expect("must refuse");
    let msg = err.to_string();
    assert!(
        matches!(err, LogError::Corruption { offset, .. } if offset == loc.phys),
        "{msg}"
    );
    assert!(
        msg.contains("00000000000000000000") && msg.contains("crc"),
        "{msg}"
    );
    let s = open(&dir, &env, repairing()).unwrap();
    assert_eq!(indexes(&s), vec![1, 2, 3]);
}

/// Repair checks every record even where a normal open would take the raft index: the operator
/// asked to find and cut corruption, which only a full scan sees.
#[test]
fn repair_scans_below_the_checkpoint_and_cuts_at_the_corruption() {
    let (dir, env, _) = flushed_log_corrupt_at_entry_4();
    let s = open(&dir, &env, repairing()).unwrap();
    assert_eq!(indexes(&s), vec![1, 2, 3]);
}

#[test]
fn lost_raft_index_is_rebuilt() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 20, 500);
    let before: Vec<_> = (1..=20)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap())
        .collect();
    s.close().unwrap();
    drop(s);
    let idx = dir.path().join("raft-index").join("index");
    assert!(env.corrupt(&idx, 40, &[1, 2, 3]));
    let s = open(&dir, &env, lazy()).unwrap();
    let after: Vec<_> = (1..=20)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn flush_error_fails_the_callback_and_stops_the_log() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, config(FlushPolicy::Sync)).unwrap();
    let (cb, rx) = waiter();
    s.append_entries(vec![entry(1, 1, 10)], cb).unwrap();
    wait(&rx).unwrap();
    // An explicit flush makes that flush's checkpoint durable here and leaves the
    // checkpointer thread nothing to fsync, so the injected error meets the next flush.
    s.flush().unwrap();
    env.set_fail_sync(true);
    let (cb, rx) = waiter();
    s.append_entries(vec![entry(1, 2, 10)], cb).unwrap();
    let err = wait(&rx).unwrap_err();
    assert!(err.to_string().contains("EIO"), "{err}");
    let again = s
        .append_entries(vec![entry(1, 3, 10)], ignore())
        .unwrap_err();
    assert!(matches!(again, LogError::Stopped(_)), "{again}");
}

#[test]
fn truncate_refuses_committed_entries() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 10, 100);
    s.save_committed(Some(LogId::new_term_index(1, 6))).unwrap();
    let err = s
        .truncate_after(Some(LogId::new_term_index(1, 5)))
        .unwrap_err();
    assert!(
        matches!(err, LogError::TruncateCommitted { committed: 6, .. }),
        "{err}"
    );
    s.truncate_after(Some(LogId::new_term_index(1, 6))).unwrap();
    assert_eq!(indexes(&s), (1..=6).collect::<Vec<_>>());
    // The truncated bytes are gone for good: a reopen after a crash does not resurrect them.
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(indexes(&s), (1..=6).collect::<Vec<_>>());
}

/// Entries 1..=8 appended and committed, only 1..=4 flushed, then a crash: reopened.
fn lose_committed_tail() -> (tempfile::TempDir, MemEnv, Store) {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 4, 100);
    s.flush().unwrap();
    fill(&s, 5, 8, 100);
    s.save_committed(Some(LogId::new_term_index(1, 8))).unwrap();
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    (dir, env, s)
}

#[test]
fn committed_past_the_recovered_end_is_lowered() {
    let (_dir, _env, s) = lose_committed_tail();
    assert_eq!(s.committed(), Some(LogId::new_term_index(1, 4)));
}

/// Lost committed entries leave a durable floor (the committed id held before the crash)
/// until the committed id reaches it again; the node's vote guard reads it.
#[test]
fn lost_committed_entries_leave_a_floor_until_caught_up() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), None);
    fill(&s, 1, 4, 100);
    s.flush().unwrap();
    fill(&s, 5, 8, 100);
    s.save_committed(Some(LogId::new_term_index(1, 8))).unwrap();
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    let floor = Some(LogId::new_term_index(1, 8));
    assert_eq!(s.lost_commit_floor(), floor);

    // It survives another crash before the node caught up, even though the committed id
    // persisted meanwhile is lower.
    fill(&s, 5, 6, 100);
    s.flush().unwrap();
    s.save_committed(Some(LogId::new_term_index(1, 6))).unwrap();
    assert_eq!(s.lost_commit_floor(), floor);
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), floor);

    // Committed reaches the floor: cleared, durably.
    fill(&s, 7, 9, 100);
    s.flush().unwrap();
    s.save_committed(Some(LogId::new_term_index(1, 8))).unwrap();
    assert_eq!(s.lost_commit_floor(), None);
    drop(s);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), None);
}

/// openraft's path: the committed id is recorded at once and made durable by the committer
/// thread; once `wait_durable` says so it survives a crash (and sets the floor
/// when the entries do not).
#[test]
fn deferred_committed_id_is_durable_once_waited_for() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 4, 100);
    s.flush().unwrap();
    fill(&s, 5, 8, 100);
    let c = Some(LogId::new_term_index(1, 8));
    s.save_committed_deferred(c).unwrap();
    assert_eq!(s.committed(), c, "recorded at once");
    let rt = runtime();
    rt.block_on(s.wait_durable(LogIndex::new(8))).unwrap();
    rt.block_on(s.wait_durable(LogIndex::new(3))).unwrap();
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), c);
    assert_eq!(s.committed(), Some(LogId::new_term_index(1, 4)));

    // Entries flushed in the log count as durable whatever the committed id.
    fill(&s, 5, 9, 100);
    s.flush().unwrap();
    rt.block_on(s.wait_durable(LogIndex::new(9))).unwrap();
    // A stopped log answers waiters for what never became durable with an error.
    fill(&s, 10, 10, 100);
    s.halt_without_flush();
    let err = rt.block_on(s.wait_durable(LogIndex::new(10))).unwrap_err();
    assert!(matches!(err, LogError::Stopped(_)), "{err}");
}

/// A committed id the log's flush already covers needs no write of its own; but entries
/// appended again after a truncation are not covered by the flush of the ones they replaced:
/// their committed id is written before `save_committed` returns, so a crash that loses them
/// leaves the floor.
#[test]
fn entries_appended_after_a_truncation_are_not_flushed_by_the_cut_ones() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 8, 100);
    s.flush().unwrap();
    s.save_committed(Some(LogId::new_term_index(1, 5))).unwrap();
    s.truncate_after(Some(LogId::new_term_index(1, 5))).unwrap();
    let entries = (6..=8).map(|i| entry(2, i, 100)).collect();
    s.append_entries(entries, ignore()).unwrap();
    let c = Some(LogId::new_term_index(2, 8));
    s.save_committed(c).unwrap();
    let s = power_loss(s, &dir, &env);
    assert_eq!(indexes(&s), (1..=5).collect::<Vec<_>>());
    assert_eq!(s.lost_commit_floor(), c);
}

/// Leader or follower, an `async` node records a new committed id at once and writes it
/// behind; apply waits until it is durable (or the log's flush covers the entry), so a crash
/// after the entry became visible leaves the lost-commit floor over it.
#[test]
fn async_committed_id_is_written_behind_and_apply_waits_for_it() {
    let rt = runtime();
    for vote_for in [2, 1] {
        let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
        let s = open(&dir, &env, lazy()).unwrap();
        s.set_node_id(1);
        fill(&s, 1, 4, 100);
        s.flush().unwrap();
        fill(&s, 5, 8, 100);
        // Voted after the appends: a node with its own vote flushes its appends at once.
        s.save_vote(&Vote::new_committed(1, vote_for)).unwrap();
        // The thread has just written an id, so one written behind now waits its interval.
        s.save_committed_deferred(Some(LogId::new_term_index(1, 5)))
            .unwrap();
        rt.block_on(s.wait_durable(LogIndex::new(5))).unwrap();
        let c = Some(LogId::new_term_index(1, 8));
        s.save_committed_async(c).unwrap();
        assert_eq!(s.committed(), c, "recorded at once");
        rt.block_on(s.wait_applicable(LogIndex::new(8))).unwrap();
        s.halt_without_flush();
        drop(s);
        env.crash(CrashMode::DropUnsynced);
        let s = open(&dir, &env, lazy()).unwrap();
        assert_eq!(s.lost_commit_floor(), c, "vote for {vote_for}");
    }
}

/// An `async` node with its own vote (a candidate or the leader) flushes what it appends at
/// once, long before its flush interval, so that apply and the commit gate, which wait for
/// the entries to be durable, find them flushed; one that follows another node waits for its
/// interval.
#[test]
fn async_leader_flushes_its_appends_at_once_a_follower_at_its_interval() {
    for (vote_for, eager) in [(1, true), (2, false)] {
        let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
        let s = open(&dir, &env, lazy()).unwrap();
        s.set_node_id(1);
        s.save_vote(&Vote::new_committed(1, vote_for)).unwrap();
        fill(&s, 1, 4, 100);
        let flushed = |s: &Store| s.watermarks().flushed.map(|f| f.index);
        let deadline = Instant::now() + Duration::from_secs(10);
        while eager && flushed(&s) != Some(4) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if !eager {
            std::thread::sleep(Duration::from_millis(200));
        }
        let want = if eager { Some(4) } else { None };
        assert_eq!(flushed(&s), want, "vote for {vote_for}");
        // A crash keeps what the log flushed: the leader's appends, none of the follower's.
        s.save_committed_async(Some(LogId::new_term_index(1, 4)))
            .unwrap();
        let s = power_loss(s, &dir, &env);
        let kept = if eager { 4 } else { 0 };
        assert_eq!(indexes(&s).len(), kept, "vote for {vote_for}");
    }
}

/// The commit gate of an `async` leader tells peers a commit index only once a crash cannot
/// forget it: clamped to the durable id before, whole once `admit` returned (and `admit`
/// waits for a commit the leader has not even saved yet); a crash then leaves the floor over
/// it.
#[test]
fn gated_async_leader_tells_peers_only_durable_commits() {
    use futures::FutureExt;

    let rt = runtime();
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    s.set_node_id(1);
    let gate = s.commit_gate();
    fill(&s, 1, 4, 100);
    s.flush().unwrap();
    fill(&s, 5, 8, 100);
    // Voted after the appends, which a leader would have flushed at once: here nothing but
    // the save covers entries 5..=8.
    s.save_vote(&Vote::new_committed(1, 1)).unwrap();
    let (c4, c7, c8) = (
        Some(LogId::new_term_index(1, 4)),
        Some(LogId::new_term_index(1, 7)),
        Some(LogId::new_term_index(1, 8)),
    );
    assert_eq!(gate.clamp(c4), c4, "the log's flush covers it");
    assert_eq!(gate.clamp(c7), None, "nothing covers it");
    let mut admitted = Box::pin(gate.admit(c8));
    assert!(rt
        .block_on(async { (&mut admitted).now_or_never() })
        .is_none());
    s.save_committed_async(c8).unwrap();
    assert_eq!(s.committed(), c8, "recorded at once");
    rt.block_on(admitted).unwrap();
    assert_eq!((gate.clamp(c7), gate.clamp(c8)), (c7, c8));
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), c8);
}

/// The operator override forgets the floor on open.
#[test]
fn accept_lost_commits_forgets_the_floor() {
    let (dir, env, s) = lose_committed_tail();
    assert!(s.lost_commit_floor().is_some());
    drop(s);
    let accept = LogConfig {
        accept_lost_commits: true,
        ..lazy()
    };
    let s = open(&dir, &env, accept).unwrap();
    assert_eq!(s.lost_commit_floor(), None);
    drop(s);
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.lost_commit_floor(), None);
    assert_eq!(indexes(&s), (1..=4).collect::<Vec<_>>());
}

#[test]
fn real_files_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    let (cb, rx) = waiter();
    s.append_entries((1..=30).map(|i| entry(2, i, 333)).collect(), cb)
        .unwrap();
    wait(&rx).unwrap();
    let w = s.watermarks();
    assert_eq!(w.flushed, Some(LogId::new_term_index(2, 30)));
    drop(s);
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    assert_eq!(indexes(&s), (1..=30).collect::<Vec<_>>());
    assert_eq!(s.watermarks().appended_phys_end, w.appended_phys_end);
}

/// Retention empties the raft index file instead of rewriting it; what is written after is a
/// tail of the index, which the next open keeps as it is (no rewrite at start-up).
#[test]
fn index_tail_left_by_retention_is_kept_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    fill(&s, 1, 30, 333);
    s.flush().unwrap();
    s.purge(LogId::new_term_index(1, 20)).unwrap();
    let w = s.watermarks();
    let min = s.delete_segments_below(w.purged_phys_end).unwrap();
    assert!(min > PhysOffset::ZERO, "a segment was deleted");
    fill(&s, 31, 33, 333);
    s.flush().unwrap();
    let first = indexes(&s)[0];
    drop(s);
    let idx = dir.path().join("raft-index").join("index");
    let tail_len = std::fs::metadata(&idx).unwrap().len();
    assert_eq!(
        tail_len,
        3 * 32,
        "only the entries appended after retention"
    );
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    assert_eq!(indexes(&s), (first..=33).collect::<Vec<_>>());
    assert_eq!(
        std::fs::metadata(&idx).unwrap().len(),
        tail_len,
        "not rewritten"
    );
    fill(&s, 34, 34, 333);
    s.flush().unwrap();
    assert_eq!(std::fs::metadata(&idx).unwrap().len(), tail_len + 32);
}

#[test]
fn concurrent_appenders_share_flushes_and_readers_see_whole_entries() {
    let dir = tempfile::tempdir().unwrap();
    let s: Store = LogStore::open(dir.path(), config(FlushPolicy::Sync)).unwrap();
    let next = Arc::new(parking_lot::Mutex::new(1u64));
    let mut threads = Vec::new();
    for _ in 0..8 {
        let (s, next) = (s.clone(), next.clone());
        threads.push(std::thread::spawn(move || {
            for _ in 0..50 {
                let (cb, rx) = waiter();
                {
                    let mut i = next.lock();
                    s.append_entries(vec![entry(1, *i, 200)], cb).unwrap();
                    *i += 1;
                }
                wait(&rx).unwrap();
            }
        }));
    }
    let reader = {
        let s = s.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                let n = s
                    .read_entries(LogIndex::new(0), LogIndex::new(u64::MAX))
                    .unwrap()
                    .len();
                assert!(n <= 400);
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    reader.join().unwrap();
    assert_eq!(indexes(&s), (1..=400).collect::<Vec<_>>());
    let w = s.watermarks();
    assert_eq!(w.flushed, Some(LogId::new_term_index(1, 400)));
}

/// Copies the files of `from` into a new directory `to` (what a power loss leaves of a db
/// whose writes since its last flush sit only in its own buffers).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Issue 13: the flush checkpoint is durable once a flush returns, so flushed bytes that rot
/// before a crash are reported as corruption at open, never cut as a torn tail.
#[test]
fn flushed_corruption_is_not_taken_for_a_torn_tail_after_a_crash() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 6, 300);
    s.flush().unwrap();
    let loc = s.entry_location(LogIndex::new(5)).unwrap();
    // A power loss now: meta/ keeps what its last flush wrote, the segments what was synced.
    let meta = dir.path().join("meta");
    let at_crash = dir.path().join("meta-at-crash");
    copy_dir(&meta, &at_crash);
    s.halt_without_flush();
    drop(s);
    std::fs::remove_dir_all(&meta).unwrap();
    std::fs::rename(&at_crash, &meta).unwrap();
    env.crash(CrashMode::DropUnsynced);
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    assert!(env.corrupt(&seg, loc.phys + 60, &[0xff]));
    // With the raft index (durable below the checkpoint), open keeps every entry and the read
    // reports the corruption.
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.watermarks().appended, Some(LogId::new_term_index(1, 6)));
    assert!(matches!(
        s.read_entries(LogIndex::new(5), LogIndex::new(6))
            .unwrap_err(),
        LogError::Corruption { .. }
    ));
    drop(s);
    // Without it, open scans: the checkpoint says the bytes were flushed.
    raftmq_raft_log::env::Env::remove(&env, &dir.path().join("raft-index").join("index")).unwrap();
    let err = open(&dir, &env, lazy())
        .err()
        .expect("flushed corruption must be reported");
    assert!(
        matches!(err, LogError::Corruption { offset, .. } if offset == loc.phys),
        "{err}"
    );
}

/// Issue 13: open takes the raft index for what the flush checkpoint covers (the bytes there
/// are not read: a flipped payload byte goes unnoticed until a read) and scans only past it;
/// a truncation's rewritten index records are durable before a checkpoint vouches for them.
#[test]
fn open_takes_the_raft_index_below_the_checkpoint_and_scans_past_it() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 8, 200);
    s.flush().unwrap();
    s.truncate_after(Some(LogId::new_term_index(1, 5))).unwrap();
    let entries = (6..=7).map(|i| entry(2, i, 300)).collect();
    s.append_entries(entries, ignore()).unwrap();
    s.flush().unwrap();
    fill_term(&s, 2, 8, 9);
    let loc2 = s.entry_location(LogIndex::new(2)).unwrap();
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    assert!(env.corrupt(&seg, loc2.phys + 60, &[0xff]));
    let s = open(&dir, &env, lazy()).unwrap();
    assert_eq!(s.watermarks().appended, Some(LogId::new_term_index(2, 7)));
    let terms: Vec<_> = (1..=7)
        .map(|i| s.entry_location(LogIndex::new(i)).unwrap().term)
        .collect();
    assert_eq!(terms, vec![1, 1, 1, 1, 1, 2, 2]);
    assert!(s.read_entries(LogIndex::new(3), LogIndex::new(8)).is_ok());
    assert!(matches!(
        s.read_entries(LogIndex::new(2), LogIndex::new(3))
            .unwrap_err(),
        LogError::Corruption { .. }
    ));
}

fn fill_term(s: &Store, term: u64, from: u64, to: u64) {
    let entries = (from..=to).map(|i| entry(term, i, 300)).collect();
    s.append_entries(entries, ignore()).unwrap();
}

/// A data dir written by the previous version (checkpoint without `index_synced`: its raft
/// index was not synced with it) opens with the full scan, which still finds flushed corruption.
#[test]
fn older_checkpoint_does_not_vouch_for_the_index() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env, lazy()).unwrap();
    fill(&s, 1, 6, 300);
    let loc = s.entry_location(LogIndex::new(4)).unwrap();
    let end = s.watermarks().appended_phys_end;
    s.close().unwrap();
    drop(s);
    {
        // sled releases the closed log's lock asynchronously.
        let db = (0..200)
            .find_map(|_| {
                let db = sled::open(dir.path().join("meta")).ok();
                if db.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                db
            })
            .expect("meta db opens");
        let old = format!(r#"{{"phys_end":{end},"log_id":null}}"#);
        db.insert("flush-checkpoint", old.as_bytes()).unwrap();
        db.flush().unwrap();
    }
    let seg = dir.path().join("commitlog").join(format!("{:020}", 0));
    assert!(env.corrupt(&seg, loc.phys + 60, &[0xff]));
    let err = open(&dir, &env, lazy()).err().expect("must refuse");
    assert!(
        matches!(err, LogError::Corruption { offset, .. } if offset == loc.phys),
        "{err}"
    );
}
