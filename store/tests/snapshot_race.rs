//! Snapshots and retention racing (issue 3, scenario 4 of issue 6), each race made
//! deterministic by running its steps in the order that broke it:
//!
//! - writes go on between the snapshot and retention trimming it: the trimmed snapshot must
//!   hold exactly the units its manifest names (the old trim copied the live queues to their
//!   end, so the prefix CRC landed in the middle of a unit and every install failed);
//! - a snapshot opened for sending before retention deletes its segments must still send the
//!   bytes it described;
//! - a corrupted or truncated transfer is refused by the receiver before anything changes,
//!   and a fresh transfer then installs.

mod common;

use common::all_messages;
use common::build_snapshot;
use common::fill;
use common::open_node;
use common::queue_offsets;
use common::small_config;
use common::transfer;
use common::Node;
use openraft::storage::RaftStateMachine;
use raftmq_store::RetentionPlan;
use raftmq_store::SnapshotFile;

const SEG: u64 = 4096;
/// A "now" at which every segment below the checkpoint has expired.
const LATE_MS: u64 = 1000 + 150 + 100 * 3_600_000;

/// Checkpoint and retention plan, as the node's retention pass starts.
fn plan(a: &Node) -> RetentionPlan {
    a.store.checkpoint().expect("checkpoint");
    a.store
        .retention_plan(LATE_MS)
        .expect("plan")
        .expect("something expires")
}

/// Raft purge and segment deletion, as the node's retention pass ends.
fn retention(a: &Node, plan: RetentionPlan) {
    a.log.purge(plan.purge_upto).expect("purge");
    a.store.apply_retention(&plan).expect("retention");
}

async fn current(a: &mut Node) -> raftmq_store::sm::Snapshot {
    a.sm.get_current_snapshot()
        .await
        .expect("current")
        .expect("some")
}

/// A node `a` holding `batches` batches of topic `t` and an empty node `b` (with their dirs).
fn two_nodes(batches: u64) -> ([tempfile::TempDir; 2], Node, Node) {
    let dirs = [
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    ];
    let mut a = open_node(dirs[0].path(), small_config(), SEG);
    let b = open_node(dirs[1].path(), small_config(), SEG);
    a.create_topic("t", 3);
    fill(&mut a, batches);
    (dirs, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_between_snapshot_and_retention_do_not_leak_into_the_trimmed_snapshot() {
    let (_dirs, mut a, mut b) = two_nodes(150);
    // The retention pass: plan, a snapshot covering its purge point, ...
    let plan = plan(&a);
    let snap = build_snapshot(&mut a).await;
    assert!(snap.meta.last_log_id >= Some(plan.purge_upto));
    let at_snapshot: Vec<_> = (0..3).map(|q| queue_offsets(&a, "t", q)).collect();
    drop(snap);
    // ... while the leader keeps applying (every queue grows past the snapshot's units) ...
    fill(&mut a, 30);
    // ... then the purge and the segment deletion, which trims the stored snapshot.
    retention(&a, plan);

    let cur = current(&mut a).await;
    let file = transfer(&cur.snapshot, &b).await;
    let rx = b.store.snapshot_receiver(1 << 30);
    let file = rx
        .verify(file, cur.meta.last_log_id)
        .expect("trimmed snapshot verifies");
    b.sm.install_snapshot(&cur.meta, file)
        .await
        .expect("install");
    for (q, &(_, snapshot_max)) in (0u32..).zip(&at_snapshot) {
        let (min, max) = queue_offsets(&b, "t", q);
        assert_eq!(max, snapshot_max, "queue {q} ends where the snapshot did");
        assert_eq!(min, queue_offsets(&a, "t", q).0, "queue {q} min");
        let want: Vec<_> = all_messages(&a, "t", q)
            .into_iter()
            .filter(|m| m.0 < max)
            .collect();
        assert_eq!(all_messages(&b, "t", q), want, "queue {q}");
    }
    b.store.validate().expect("valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_being_sent_keeps_its_segments_through_retention() {
    let (_dirs, mut a, mut b) = two_nodes(150);
    build_snapshot(&mut a).await;
    let before: Vec<_> = (0..3).map(|q| all_messages(&a, "t", q)).collect();
    // openraft takes the snapshot to send it; retention runs before the stream reads it.
    let in_flight = current(&mut a).await;
    let first_chunk = in_flight.snapshot.read_chunk(0, 1 << 20).expect("read");
    retention(&a, plan(&a));
    assert!(
        queue_offsets(&a, "t", 0).0 > 0,
        "retention deleted messages"
    );
    assert_eq!(
        in_flight.snapshot.read_chunk(0, 1 << 20).expect("read"),
        first_chunk,
        "the snapshot's file never changes"
    );

    let file = transfer(&in_flight.snapshot, &b).await;
    drop(in_flight);
    let rx = b.store.snapshot_receiver(1 << 30);
    let meta = current(&mut a).await.meta;
    let file = rx.verify(file, meta.last_log_id).expect("verifies");
    b.sm.install_snapshot(&meta, file).await.expect("install");
    for (q, want) in before.iter().enumerate() {
        assert_eq!(
            &all_messages(&b, "t", q as u32),
            want,
            "queue {q}: every message sent"
        );
    }
    // And the trimmed snapshot retention left behind is sendable too.
    let dc = tempfile::tempdir().expect("dir");
    let mut c = open_node(dc.path(), small_config(), SEG);
    let cur = current(&mut a).await;
    let file = transfer(&cur.snapshot, &c).await;
    c.sm.install_snapshot(&cur.meta, file)
        .await
        .expect("install trimmed");
    for q in 0..3 {
        assert_eq!(
            all_messages(&c, "t", q),
            all_messages(&a, "t", q),
            "queue {q}"
        );
    }
}

/// Flips one bit at `at` (from the end if negative) of a received snapshot file.
fn damage(file: SnapshotFile, at: i64) -> SnapshotFile {
    let path = file.path().to_owned();
    drop(file);
    let mut bytes = std::fs::read(&path).expect("read");
    let i = if at < 0 { bytes.len() as i64 + at } else { at } as usize;
    bytes[i] ^= 0x10;
    std::fs::write(&path, bytes).expect("write");
    SnapshotFile::open(&path).expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_snapshot_is_refused_before_install_then_a_fresh_one_installs() {
    let (_dirs, mut a, mut b) = two_nodes(60);
    let snap = build_snapshot(&mut a).await;
    let last = snap.meta.last_log_id;
    let rx = b.store.snapshot_receiver(1 << 30);
    let b_before = b.store.watermarks();

    // A bit in a segment, in the manifest, in the units (just before the prefix CRC).
    let prefix_len = {
        let m = raftmq_store::snapshot::read_manifest(&snap.snapshot).expect("manifest");
        snap.snapshot.len() - m.segments_bytes()
    };
    for at in [-100, 40, prefix_len as i64 - 10] {
        let bad = damage(transfer(&snap.snapshot, &b).await, at);
        let path = bad.path().to_owned();
        let err = rx.verify(bad, last).expect_err("damaged snapshot refused");
        assert!(err.is_corruption(), "{err}");
        assert!(!path.exists(), "refused file removed");
    }
    // A transfer cut short, and one claiming another last log id.
    let short = {
        let f = transfer(&snap.snapshot, &b).await;
        let path = f.path().to_owned();
        drop(f);
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("write");
        SnapshotFile::open(&path).expect("open")
    };
    assert!(rx.verify(short, last).is_err(), "short snapshot refused");
    let other =
        last.map(|l| raftmq_raft_log::types::LogId::new_term_index(l.leader_id.term, l.index + 1));
    assert!(
        rx.verify(transfer(&snap.snapshot, &b).await, other)
            .is_err(),
        "wrong last log id refused"
    );
    assert_eq!(b.store.watermarks(), b_before, "nothing installed");

    let file = rx
        .verify(transfer(&snap.snapshot, &b).await, last)
        .expect("fresh transfer verifies");
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    for q in 0..3 {
        assert_eq!(
            all_messages(&b, "t", q),
            all_messages(&a, "t", q),
            "queue {q}"
        );
    }
}
