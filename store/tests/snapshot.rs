//! Snapshot build on one store and chunked transfer + install on another: the receiver ends
//! up with every retained message, the same offsets, and continues at the same physical
//! offsets.

mod common;

use common::all_messages;
use common::fill;
use common::msg;
use common::open_node;
use common::small_config;
use common::transfer;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::ApplyResponse;
use raftmq_store::SnapshotFile;

const SEG: u64 = 4096;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_between_two_stores_with_retention() {
    let da = tempfile::tempdir().expect("tempdir");
    let db = tempfile::tempdir().expect("tempdir");
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 3);
    let c = CommitOffset {
        group: "g".into(),
        topic: "t".into(),
        queue_id: QueueId::new(1),
        offset: QueueOffset::new(7),
    };
    a.propose(&Command::CommitOffset(c));
    fill(&mut a, 150);
    // Retention on the leader first: drop the oldest segments.
    a.store.checkpoint().expect("checkpoint");
    let plan = a
        .store
        .retention_plan(1000 + 150 + 100 * 3_600_000)
        .expect("plan")
        .expect("some");
    a.log.purge(plan.purge_upto).expect("purge");
    a.store.apply_retention(&plan).expect("retention");
    assert!(
        common::queue_offsets(&a, "t", 0).0 > 0,
        "queue min moved up"
    );

    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let cur =
        a.sm.get_current_snapshot()
            .await
            .expect("current")
            .expect("some");
    assert_eq!(cur.meta, snap.meta);
    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");

    for q in 0..3 {
        assert_eq!(
            common::queue_offsets(&a, "t", q),
            common::queue_offsets(&b, "t", q)
        );
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "queue {q}"
        );
    }
    assert_eq!(
        b.store
            .fetch_offset("g", "t", QueueId::new(1))
            .map(QueueOffset::get),
        Some(7)
    );
    assert_eq!(b.store.topics(), a.store.topics());
    let k = b
        .store
        .query_by_key("t", "key149", 0, u64::MAX, 10)
        .expect("query");
    assert_eq!(k.len(), 1);
    assert_eq!(
        b.store.get_by_id(k[0].msg_id).expect("id").message.body,
        &b"body-149"[..]
    );
    let (wa, wb) = (a.log.watermarks(), b.log.watermarks());
    assert_eq!(wb.appended_phys_end, wa.appended_phys_end);
    assert_eq!(wb.min_phys_offset, wa.min_phys_offset);
    assert_eq!(wb.last_purged, snap.meta.last_log_id);
    let (applied, _) = b.sm.applied_state().await.expect("state");
    assert_eq!(applied, snap.meta.last_log_id);
    b.store.validate().expect("valid");

    // Both continue identically: same entry, same physical offset, same ack.
    b.next_index = a.next_index;
    let e = a.append(&Command::batch(vec![msg("t", 2, 7, "", "", 5000)]));
    let ra = a.sm.apply_entry(&e).expect("apply");
    b.append_entry(e.clone());
    let rb = b.sm.apply_entry(&e).expect("apply");
    assert_eq!(ra, rb);
    assert!(matches!(ra, ApplyResponse::Sent(_)));

    // The installed state survives a restart of the receiver.
    b.store.close().expect("close");
    drop(b);
    let b = open_node(db.path(), small_config(), SEG);
    for q in 0..3 {
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "queue {q} after reopen"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_install_over_a_lagging_log_and_corrupt_file_refused() {
    let da = tempfile::tempdir().expect("tempdir");
    let db = tempfile::tempdir().expect("tempdir");
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 3);
    // b follows the first entries, then lags.
    let e = a
        .log
        .read_entries(LogIndex::new(0), LogIndex::new(1))
        .expect("read");
    b.append_entry(e[0].clone());
    b.sm.apply_entry(&e[0]).expect("apply");
    fill(&mut a, 60);
    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");

    // A flipped bit anywhere is refused before anything changes.
    let bad = transfer(&snap.snapshot, &b).await;
    let path = bad.path().to_owned();
    drop(bad);
    let mut bytes = std::fs::read(&path).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&path, bytes).expect("write");
    let bad = SnapshotFile::open(&path).expect("open");
    assert!(b.sm.install_snapshot(&snap.meta, bad).await.is_err());
    // And in the prefix (manifest, units), covered by the prefix CRC.
    let bad = transfer(&snap.snapshot, &b).await;
    let path = bad.path().to_owned();
    drop(bad);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[40] ^= 1;
    std::fs::write(&path, bytes).expect("write");
    let bad = SnapshotFile::open(&path).expect("open");
    assert!(b.sm.install_snapshot(&snap.meta, bad).await.is_err());
    assert_eq!(b.store.watermarks().applied.map(|l| l.index), Some(0));

    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    for q in 0..3 {
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "queue {q}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_install_keeps_a_log_that_already_holds_the_last_entry() {
    let da = tempfile::tempdir().expect("tempdir");
    let db = tempfile::tempdir().expect("tempdir");
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 3);
    fill(&mut a, 40);
    // b has every entry in its log but applied none of them.
    let last = a.log.watermarks().appended.expect("last").index;
    for e in a
        .log
        .read_entries(LogIndex::new(0), LogIndex::new(last + 1))
        .expect("read")
    {
        b.append_entry(e);
    }
    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let file = transfer(&snap.snapshot, &b).await;
    let end_before = b.log.watermarks().appended_phys_end;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    assert_eq!(b.log.watermarks().appended_phys_end, end_before, "log kept");
    for q in 0..3 {
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "queue {q}"
        );
    }
    assert_eq!(
        b.store
            .query_by_key("t", "key7", 0, u64::MAX, 5)
            .expect("query")
            .len(),
        1
    );
    b.store.validate().expect("valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_snapshot_is_trimmed_by_retention_and_stays_sendable() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = open_node(da.path(), small_config(), SEG);
    let b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 3);
    fill(&mut a, 150);
    a.store.checkpoint().expect("checkpoint");
    // Snapshot first (openraft needs one covering the purge point), then retention.
    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let full = snap.snapshot.len();
    let plan = a
        .store
        .retention_plan(1000 + 150 + 100 * 3_600_000)
        .expect("plan")
        .expect("some");
    a.log.purge(plan.purge_upto).expect("purge");
    a.store.apply_retention(&plan).expect("retention");
    let cur =
        a.sm.get_current_snapshot()
            .await
            .expect("current")
            .expect("some");
    assert_eq!(cur.meta, snap.meta, "same snapshot, trimmed");
    assert!(cur.snapshot.len() < full);
    let file = transfer(&cur.snapshot, &b).await;
    let mut b = b;
    b.sm.install_snapshot(&cur.meta, file)
        .await
        .expect("install");
    for q in 0..3 {
        assert_eq!(
            all_messages(&a, "t", q),
            all_messages(&b, "t", q),
            "queue {q}"
        );
    }
    assert_eq!(
        b.log.watermarks().min_phys_offset,
        a.log.watermarks().min_phys_offset
    );
    b.next_index = a.next_index;
}
