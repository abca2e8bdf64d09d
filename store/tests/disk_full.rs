//! Freeing a full disk: a retention plan limited to what the stored snapshot covers (no new
//! snapshot needed), and the disk reserve that retention releases before it writes.

mod common;

use common::msg;
use common::open_node;
use common::small_config;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::StoreError;

const SEG: u64 = 4096;
const HOUR: u64 = 3_600_000;

#[test]
fn covered_plan_never_purges_past_the_stored_snapshot() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.store.set_disk_usage_override(Some(0.95));
    n.create_topic("t", 1);
    for i in 0..120u64 {
        n.send(vec![msg("t", 0, i, "", "", 0)]);
    }
    n.store.checkpoint().expect("checkpoint");
    let full = n
        .store
        .retention_plan(1000 * HOUR)
        .expect("plan")
        .expect("everything expired");
    let covered = LogIndex::new(full.purge_upto.index / 2);
    let plan = n
        .store
        .retention_plan_covered(1000 * HOUR, covered)
        .expect("plan")
        .expect("the covered part");
    assert!(
        plan.purge_upto.index <= covered.get(),
        "{plan:?} past {covered}"
    );
    assert!(plan.delete_below_phys < full.delete_below_phys);
    assert!(plan.delete_below_phys.get() > 0 && plan.delete_below_phys.is_aligned(SEG));
    // A snapshot ending in the first segment covers no whole segment.
    assert_eq!(
        n.store
            .retention_plan_covered(1000 * HOUR, LogIndex::new(1))
            .expect("plan"),
        None
    );
    // Past the checkpoint it is the full plan.
    let past = LogIndex::new(u64::MAX / 2);
    assert_eq!(
        n.store
            .retention_plan_covered(1000 * HOUR, past)
            .expect("plan"),
        Some(full)
    );
    n.log.purge(plan.purge_upto).expect("purge");
    n.store.apply_retention(&plan).expect("apply");
    assert_eq!(n.log.watermarks().min_phys_offset, plan.delete_below_phys);
    n.store.validate().expect("valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_reserve_is_made_released_and_grows_with_the_snapshot() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    let reserve = d.path().join("disk-reserve");
    assert_eq!(n.store.disk_reserve_bytes(), 0);
    // No snapshot yet: the margin alone, min(16 MiB, segment size).
    assert_eq!(n.store.ensure_disk_reserve().expect("made"), SEG);
    assert_eq!(std::fs::metadata(&reserve).expect("file").len(), SEG);
    assert_eq!(n.store.ensure_disk_reserve().expect("kept"), SEG);
    assert_eq!(n.store.release_disk_reserve().expect("released"), SEG);
    assert!(!reserve.exists());
    assert_eq!(n.store.release_disk_reserve().expect("none"), 0);

    n.create_topic("t", 1);
    for i in 0..300u64 {
        n.send(vec![msg("t", 0, i, "", "", 0)]);
    }
    let snap =
        n.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    drop(snap);
    let snapshots: u64 = std::fs::read_dir(d.path().join("snapshots"))
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot-"))
        .map(|e| e.metadata().expect("meta").len())
        .sum();
    assert!(
        snapshots > 300 * 20,
        "the prefix holds every unit: {snapshots}"
    );
    let want = snapshots + SEG;
    assert_eq!(n.store.ensure_disk_reserve().expect("made"), want);
    assert_eq!(n.store.disk_reserve_bytes(), want);
    let _ = n.sm.get_current_snapshot().await.expect("current");
}

#[test]
fn enospc_counts_as_disk_full_wherever_it_comes_from() {
    let enospc = || std::io::Error::from_raw_os_error(28);
    assert!(StoreError::io("write", "/x", enospc()).is_disk_full());
    assert!(StoreError::DiskFull { reason: "r".into() }.is_disk_full());
    assert!(StoreError::Log(raftmq_raft_log::error::LogError::io(
        "write",
        "/x",
        enospc()
    ))
    .is_disk_full());
    let eio = std::io::Error::from_raw_os_error(5);
    assert!(!StoreError::io("write", "/x", eio).is_disk_full());
    assert!(!StoreError::invalid("x").is_disk_full());
}
