//! Crash recovery: crash between each pair of steps (log append / apply / ConsumeQueue flush /
//! checkpoint), lost ConsumeQueue units, lost log tail; replay is idempotent and answers the
//! same acks.

mod common;

use raftmq_raft_log::types::LogIndex;
use std::collections::BTreeMap;
use std::path::Path;

use common::msg;
use common::open_node;
use common::small_config;
use common::Node;
use raftmq_store::command::Command;
use raftmq_store::ApplyResponse;

const SEG: u64 = 8192;

/// What openraft does after a restart: re-apply every log entry after the applied id.
fn replay(n: &Node) -> BTreeMap<u64, ApplyResponse> {
    let from = n.store.watermarks().applied.map_or(0, |l| l.index + 1);
    let to = n.log.watermarks().appended.map_or(0, |l| l.index + 1);
    let mut out = BTreeMap::new();
    for e in n
        .log
        .read_entries(LogIndex::new(from), LogIndex::new(to))
        .expect("read")
    {
        out.insert(e.log_id.index, n.sm.apply_entry(&e).expect("replay"));
    }
    out
}

fn batch(i: u64) -> Command {
    Command::batch(vec![
        msg("t", (i % 2) as u32, i, "x", &format!("k{i}"), 1000 + i),
        msg("t", 1, 500 + i, "", "", 1000 + i),
    ])
}

/// Creates the topic and applies 20 batches, checkpointing after the 10th; returns responses.
fn run(n: &mut Node) -> BTreeMap<u64, ApplyResponse> {
    let mut resp = BTreeMap::new();
    n.create_topic("t", 2);
    for i in 0..20 {
        let idx = n.next_index;
        resp.insert(idx, n.send(batch(i).to_batch()));
        if i == 9 {
            n.store.checkpoint().expect("checkpoint");
        }
    }
    resp
}

trait ToBatch {
    fn to_batch(&self) -> Vec<raftmq_store::message::Message>;
}

impl ToBatch for Command {
    fn to_batch(&self) -> Vec<raftmq_store::message::Message> {
        match self {
            Command::SendBatch { messages, .. } => messages.clone(),
            _ => panic!("batch expected"),
        }
    }
}

fn crash(n: Node) {
    n.log.halt_without_flush();
    drop(n);
}

fn queue_dump(n: &Node) -> Vec<(u64, u64)> {
    (0..2).map(|q| common::queue_offsets(n, "t", q)).collect()
}

#[derive(Clone, Copy, Debug)]
enum CrashAfter {
    Append,
    Apply,
    Flush,
    Checkpoint,
}

#[test]
fn crash_between_each_step_then_replay_is_idempotent() {
    for step in [
        CrashAfter::Append,
        CrashAfter::Apply,
        CrashAfter::Flush,
        CrashAfter::Checkpoint,
    ] {
        let d = tempfile::tempdir().expect("tempdir");
        let mut n = open_node(d.path(), small_config(), SEG);
        let mut want = run(&mut n);
        let e = n.append(&batch(99));
        match step {
            CrashAfter::Append => {}
            CrashAfter::Apply => {
                want.insert(e.log_id.index, n.sm.apply_entry(&e).expect("apply"));
            }
            CrashAfter::Flush | CrashAfter::Checkpoint => {
                want.insert(e.log_id.index, n.sm.apply_entry(&e).expect("apply"));
                n.store.checkpoint().expect("flush");
            }
        }
        let before = queue_dump(&n);
        crash(n);
        let n = open_node(d.path(), small_config(), SEG);
        let replayed = replay(&n);
        for (idx, r) in &replayed {
            if let Some(w) = want.get(idx) {
                assert_eq!(r, w, "{step:?}: replay of {idx} answers the original ack");
            } else {
                assert!(matches!(r, ApplyResponse::Sent(_)), "{step:?}");
            }
        }
        let after = queue_dump(&n);
        match step {
            // 20 batches: queue 0 holds the 10 even ones, queue 1 the 10 odd ones and 20
            // more; batch 99 adds two to queue 1.
            CrashAfter::Append => assert_eq!(after, vec![(0, 10), (0, 32)], "{step:?}"),
            _ => assert_eq!(after, before, "{step:?}"),
        }
        n.store.validate().expect("valid");
        // Replaying again (a second crash right away) changes nothing.
        let again = replay(&n);
        assert!(again.is_empty() || again.values().all(|r| matches!(r, ApplyResponse::Sent(_))));
        assert_eq!(queue_dump(&n), after);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn lost_consume_queue_units_after_the_checkpoint_are_redispatched() {
    let d = tempfile::tempdir().expect("tempdir");
    let saved = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 2);
    let mut want = BTreeMap::new();
    for i in 0..20 {
        let idx = n.next_index;
        want.insert(idx, n.send(batch(i).to_batch()));
        if i == 9 {
            n.store.checkpoint().expect("checkpoint");
            copy_dir(
                &d.path().join("consumequeue"),
                &saved.path().join("consumequeue"),
            );
            copy_dir(&d.path().join("index"), &saved.path().join("index"));
        }
    }
    let before = queue_dump(&n);
    crash(n);
    // Power loss: ConsumeQueue and index lose everything written after the checkpoint.
    for sub in ["consumequeue", "index"] {
        std::fs::remove_dir_all(d.path().join(sub)).expect("rm");
        copy_dir(&saved.path().join(sub), &d.path().join(sub));
    }
    let n = open_node(d.path(), small_config(), SEG);
    let replayed = replay(&n);
    assert_eq!(replayed.len(), 10);
    for (idx, r) in &replayed {
        assert_eq!(r, &want[idx], "entry {idx}");
    }
    assert_eq!(queue_dump(&n), before);
    let k = n
        .store
        .query_by_key("t", "k15", 0, u64::MAX, 5)
        .expect("query");
    assert_eq!(k.len(), 1);
}

#[test]
fn units_past_a_lost_log_tail_are_cut_at_open() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    let want = run(&mut n);
    // The log loses entries after index 15 (e.g. async flush and power loss) while the
    // ConsumeQueues still point at them.
    let keep = n
        .log
        .read_entries(LogIndex::new(15), LogIndex::new(16))
        .expect("read")[0]
        .log_id;
    n.log.truncate_after(Some(keep)).expect("truncate");
    crash(n);
    let n = open_node(d.path(), small_config(), SEG);
    let end = n.log.watermarks().appended_phys_end;
    n.store.validate().expect("valid after cut");
    assert!(n.store.watermarks().dispatched_phys_end <= end);
    let replayed = replay(&n);
    for (idx, r) in &replayed {
        assert_eq!(r, &want[idx], "entry {idx}");
    }
    // Entries 1..=15 hold batches 0..=14: queue 0 holds the 8 even ones, queue 1 the 7 odd
    // ones and 15 more.
    assert_eq!(queue_dump(&n), vec![(0, 8), (0, 22)]);
}

#[test]
fn clean_close_removes_the_abort_marker_and_reopen_needs_no_replay() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    run(&mut n);
    assert!(d.path().join("abort").exists());
    n.store.close().expect("close");
    assert!(!d.path().join("abort").exists());
    n.log.close().expect("close log");
    let before = queue_dump(&n);
    drop(n);
    let n = open_node(d.path(), small_config(), SEG);
    assert!(replay(&n).is_empty());
    assert_eq!(queue_dump(&n), before);
}

/// Waits (up to 10 s) until `n`'s durable checkpoint covers `want`.
fn wait_checkpointed(n: &Node, want: Option<raftmq_raft_log::types::LogId>) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while n.store.watermarks().checkpointed != want {
        assert!(
            std::time::Instant::now() < end,
            "checkpointed {:?}, want {want:?}",
            n.store.watermarks().checkpointed
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The periodic checkpoint is written off the apply path: apply goes on while the write is
/// held, `checkpointed` (what retention may purge below) moves only once the file is
/// durable, a synchronous checkpoint waits for the write under way and leaves the newest
/// state in the file, and a crash after either replays to the same queues.
#[test]
fn periodic_checkpoint_is_written_in_the_background() {
    use raftmq_store::state::Checkpoint;
    use std::sync::mpsc;
    use std::time::Duration;

    let d = tempfile::tempdir().expect("tempdir");
    let mut cfg = small_config();
    cfg.checkpoint_every_entries = 5;
    let mut n = open_node(d.path(), cfg.clone(), SEG);
    let release = n.store.hold_next_checkpoint();
    n.create_topic("t", 2);
    for i in 0..4 {
        n.send(batch(i).to_batch());
    }
    // Entry 5 started the write; it is held.
    let taken = n.store.watermarks().applied;
    assert!(taken.is_some());
    let (tx, rx) = mpsc::channel();
    let applier = std::thread::spawn(move || {
        for i in 4..7 {
            n.send(batch(i).to_batch());
        }
        tx.send(()).expect("report");
        n
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("apply went on while the checkpoint write was held");
    let n = applier.join().expect("applier");
    assert_eq!(n.store.watermarks().checkpointed, None, "not durable yet");
    assert_eq!(
        Checkpoint::load(d.path()).expect("load").last_applied,
        None,
        "no file yet"
    );
    drop(release);
    wait_checkpointed(&n, taken);
    assert_eq!(
        Checkpoint::load(d.path()).expect("load").last_applied,
        taken
    );

    // Three more entries reach the next period (5 since the last); `Store::checkpoint`
    // meanwhile waits for the held write, then writes the newest state.
    let mut n = n;
    let release = n.store.hold_next_checkpoint();
    for i in 7..10 {
        n.send(batch(i).to_batch());
    }
    let newest = n.store.watermarks().applied;
    let store = n.store.clone();
    let (tx, rx) = mpsc::channel();
    let sync = std::thread::spawn(move || {
        store.checkpoint().expect("checkpoint");
        tx.send(()).expect("report");
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "the synchronous checkpoint did not wait for the write under way"
    );
    release.send(()).expect("release");
    rx.recv_timeout(Duration::from_secs(10))
        .expect("synchronous checkpoint done");
    sync.join().expect("sync");
    assert_eq!(n.store.watermarks().checkpointed, newest);
    assert_eq!(
        Checkpoint::load(d.path()).expect("load").last_applied,
        newest
    );

    // Crash and replay: the same queues as before.
    let mut n = n;
    for i in 10..13 {
        n.send(batch(i).to_batch());
    }
    let before = queue_dump(&n);
    crash(n);
    let n = open_node(d.path(), cfg, SEG);
    let replayed = replay(&n);
    assert!(replayed
        .values()
        .all(|r| matches!(r, ApplyResponse::Sent(_))));
    assert_eq!(queue_dump(&n), before);
    n.store.validate().expect("valid");
}
