//! Inline flushing (issue 14, target 1): a follower's `sync` append to a quiet log is flushed
//! on the appending thread, so its callback completes before `append_entries` returns and
//! no thread hand-off sits around the fdatasync; appends in a burst still share the flusher's
//! group commit. Durability is the same either way: what a callback reported survives a crash.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::util::entry;
use common::util::indexes;
use common::util::wait;
use common::util::waiter;
use common::TestConfig;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::mem_env::CrashMode;
use raftmq_raft_log::mem_env::MemEnv;
use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::LogError;

type Store = LogStore<TestConfig>;

/// Longer than the inline rule's quiet time (200 µs), with room for a slow machine's timers.
const QUIET: Duration = Duration::from_millis(5);

fn open(dir: &tempfile::TempDir, env: &MemEnv) -> Store {
    let c = LogConfig {
        segment_bytes: 1 << 20,
        flush: FlushPolicy::Sync,
        ..LogConfig::default()
    };
    LogStore::open_with_env(dir.path(), c, Arc::new(env.clone())).unwrap()
}

/// Appends entry `index` (term 1, `size` bytes) after a quiet gap; the receiver of its
/// callback.
fn quiet_append(s: &Store, index: u64, size: usize) -> mpsc::Receiver<std::io::Result<()>> {
    std::thread::sleep(QUIET);
    let (cb, rx) = waiter();
    s.append_entries(vec![entry(1, index, size)], cb).unwrap();
    rx
}

#[test]
fn a_quiet_append_is_durable_when_it_returns() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    s.set_inline_flush(true);
    for i in 1..=3 {
        let rx = quiet_append(&s, i, 500);
        // Completed on this thread, before the call returned.
        assert!(matches!(rx.try_recv(), Ok(Ok(()))), "append {i}");
        assert_eq!(s.watermarks().flushed.map(|l| l.index), Some(i));
    }
    assert_eq!(s.inline_flushes(), 3);
    // The flush was real: a crash right now keeps all three.
    s.halt_without_flush();
    drop(s);
    env.crash(CrashMode::DropUnsynced);
    assert_eq!(indexes(&open(&dir, &env)), vec![1, 2, 3]);
}

#[test]
fn a_burst_shares_the_flusher_thread_and_every_append_completes() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    s.set_inline_flush(true);
    std::thread::sleep(QUIET);
    let rxs: Vec<_> = (1..=50)
        .map(|i| {
            let (cb, rx) = waiter();
            s.append_entries(vec![entry(1, i, 500)], cb).unwrap();
            rx
        })
        .collect();
    for rx in &rxs {
        wait(rx).unwrap();
    }
    // Only appends after a quiet gap flush inline: the first, and any a slow machine paused
    // before (never most of them).
    let inline = s.inline_flushes();
    assert!((1..25).contains(&inline), "{inline} of 50 inline");
    assert_eq!(s.watermarks().flushed.map(|l| l.index), Some(50));
}

#[test]
fn off_by_default_and_when_turned_off() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    wait(&quiet_append(&s, 1, 100)).unwrap();
    assert_eq!(s.inline_flushes(), 0, "a leader's default");
    s.set_inline_flush(true);
    wait(&quiet_append(&s, 2, 100)).unwrap();
    assert_eq!(s.inline_flushes(), 1);
    s.set_inline_flush(false);
    wait(&quiet_append(&s, 3, 100)).unwrap();
    assert_eq!(s.inline_flushes(), 1);
}

#[test]
fn a_failed_inline_flush_fails_the_callback_and_stops_the_log() {
    let (dir, env) = (tempfile::tempdir().unwrap(), MemEnv::new());
    let s = open(&dir, &env);
    s.set_inline_flush(true);
    wait(&quiet_append(&s, 1, 100)).unwrap();
    // An explicit flush makes that flush's checkpoint durable here and leaves the
    // checkpointer thread nothing to fsync, so the injected error meets the next flush.
    s.flush().unwrap();
    env.set_fail_sync(true);
    // The bytes were written; their flush failed, and the callback says so at once.
    let rx = quiet_append(&s, 2, 100);
    let err = rx
        .try_recv()
        .expect("completed before returning")
        .unwrap_err();
    assert!(err.to_string().contains("msync"), "{err}");
    let (cb, rx) = waiter();
    let err = s.append_entries(vec![entry(1, 3, 100)], cb).unwrap_err();
    assert!(matches!(err, LogError::Stopped(_)), "{err}");
    assert!(wait(&rx).is_err());
    // What was flushed stays.
    s.halt_without_flush();
    drop(s);
    env.set_fail_sync(false);
    env.crash(CrashMode::DropUnsynced);
    assert_eq!(indexes(&open(&dir, &env)), vec![1]);
}
