//! Crash inside a snapshot install that replaces the log (after the install intent, after the
//! log swap, after the checkpoint): the follower reopens from the same dirs in a state openraft
//! can start from (applied covers the purge point, the current snapshot is the installed one)
//! and holds what the leader retains.

mod common;

use common::all_messages;
use common::build_snapshot;
use common::fill;
use common::open_node;
use common::small_config;
use common::transfer;
use common::Node;
use openraft::storage::RaftStateMachine;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::snapshot::InstallStop;

const SEG: u64 = 4096;

/// A crash: the log loses nothing already fsynced, nothing is closed.
fn crash(n: Node) {
    n.log.halt_without_flush();
    drop(n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_intent_is_recovered_at_open() {
    crash_during_install_then_reopen(InstallStop::AfterIntent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_log_swap_is_recovered_at_open() {
    crash_during_install_then_reopen(InstallStop::AfterLogSwap).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_checkpoint_is_recovered_at_open() {
    crash_during_install_then_reopen(InstallStop::AfterCheckpoint).await;
}

async fn crash_during_install_then_reopen(stop: InstallStop) {
    let da = tempfile::tempdir().expect("tempdir");
    let db = tempfile::tempdir().expect("tempdir");
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 3);
    // b follows the first entries (checkpointed), then lags.
    let first = a
        .log
        .read_entries(LogIndex::new(0), LogIndex::new(1))
        .expect("read");
    b.append_entry(first[0].clone());
    b.sm.apply_entry(&first[0]).expect("apply");
    b.store.checkpoint().expect("checkpoint");
    fill(&mut a, 60);
    let snap = build_snapshot(&mut a).await;
    let last = snap.meta.last_log_id;

    let file = transfer(&snap.snapshot, &b).await;
    b.store.set_install_stop(Some(stop));
    assert!(b.sm.install_snapshot(&snap.meta, file).await.is_err());
    crash(b);

    let mut b = open_node(db.path(), small_config(), SEG);
    let w = b.store.watermarks();
    assert_eq!(
        w.log.last_purged, last,
        "{stop:?}: the log is the snapshot's"
    );
    assert!(
        w.applied >= w.log.last_purged,
        "{stop:?}: applied {:?} below the purge point {:?}: openraft cannot start",
        w.applied,
        w.log.last_purged
    );
    assert_eq!(w.applied, last, "{stop:?}");
    assert_eq!(w.checkpointed, last, "{stop:?}");
    let cur = b.sm.get_current_snapshot().await.expect("current");
    assert_eq!(
        cur.map(|s| s.meta.last_log_id),
        Some(last),
        "{stop:?}: the installed snapshot is the current one"
    );
    for q in 0..3 {
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "{stop:?}: queue {q}"
        );
    }
    b.store.validate().expect("valid");
    let leftovers = [
        db.path().join("store-meta").join("install-intent.json"),
        db.path().join("snapshots").join("pending-install.snap"),
    ];
    for p in &leftovers {
        assert!(!p.exists(), "{stop:?}: {} left behind", p.display());
    }

    // A second reopen (clean this time) changes nothing.
    b.store.close().expect("close");
    drop(b);
    let b = open_node(db.path(), small_config(), SEG);
    assert_eq!(b.store.watermarks().applied, last);
    for q in 0..3 {
        assert_eq!(all_messages(&a, "t", q), all_messages(&b, "t", q));
    }
}
