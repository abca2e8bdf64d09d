//! Retention with a fake clock and a fake disk usage: whole segments by age, the clean ratio,
//! never past the checkpoint, ConsumeQueue/index cleanup, the reject ratio.

mod common;

use common::msg;
use common::open_node;
use common::small_config;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::PullRequest;
use raftmq_store::PullStatus;
use raftmq_store::StoreError;

const SEG: u64 = 4096;
const HOUR: u64 = 3_600_000;

fn pull0(n: &common::Node, offset: u64) -> PullStatus {
    n.store
        .pull(&PullRequest {
            topic: "t".into(),
            queue_id: QueueId::new(0),
            offset: QueueOffset::new(offset),
            max_count: 1,
            max_bytes: u64::MAX,
            tag_expr: "*".into(),
        })
        .expect("pull")
        .status
}

#[test]
fn age_based_retention_deletes_whole_old_segments_only() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.store.set_disk_usage_override(Some(0.1));
    n.create_topic("t", 1);
    // Hour 0: 60 messages; hour 10: 60 more (each spans several segments).
    for i in 0..120u64 {
        let ts = if i < 60 { 0 } else { 10 * HOUR };
        n.send(vec![msg("t", 0, i, "", &format!("k{i}"), ts)]);
    }
    assert_eq!(
        n.store.retention_plan(100 * HOUR).expect("plan"),
        None,
        "no checkpoint yet"
    );
    n.store.checkpoint().expect("checkpoint");
    assert_eq!(
        n.store.retention_plan(71 * HOUR).expect("plan"),
        None,
        "nothing is 72h old"
    );
    let plan = n
        .store
        .retention_plan(72 * HOUR)
        .expect("plan")
        .expect("old segments");
    assert!(plan.delete_below_phys.is_aligned(SEG));
    let loc = n
        .log
        .entry_location(LogIndex::new(plan.purge_upto.index))
        .expect("loc");
    assert_eq!(
        loc.phys_offset(),
        plan.delete_below_phys,
        "purge up to the first kept entry"
    );
    n.log.purge(plan.purge_upto).expect("purge");
    n.store.apply_retention(&plan).expect("apply");
    let (min, max) = common::queue_offsets(&n, "t", 0);
    assert!(min > 0 && min <= 60, "only hour-0 messages went: min {min}");
    assert_eq!(max, 120);
    assert_eq!(pull0(&n, 0), PullStatus::OffsetTooSmall);
    assert_eq!(pull0(&n, min), PullStatus::Found);
    assert!(n.log.watermarks().min_phys_offset == plan.delete_below_phys);
    n.store.validate().expect("valid");
    // Reopened, the queues start where retention left them, not at their files' first unit
    // (retention removes ConsumeQueue files whole).
    drop(n);
    let n = open_node(d.path(), small_config(), SEG);
    assert_eq!(common::queue_offsets(&n, "t", 0), (min, max));
    assert_eq!(pull0(&n, 0), PullStatus::OffsetTooSmall);
    assert_eq!(pull0(&n, min), PullStatus::Found);
    n.store.set_disk_usage_override(Some(0.1));
    // The rest expires at hour 82; the segment holding the checkpoint entry always stays.
    let plan = n
        .store
        .retention_plan(1000 * HOUR)
        .expect("plan")
        .expect("more");
    let cp = n.store.watermarks().checkpointed.expect("checkpointed");
    let cp_phys = n
        .log
        .entry_location(LogIndex::new(cp.index))
        .expect("loc")
        .phys_offset();
    assert!(plan.delete_below_phys <= cp_phys);
    n.log.purge(plan.purge_upto).expect("purge");
    n.store.apply_retention(&plan).expect("apply");
    assert!(common::queue_offsets(&n, "t", 0).0 > min);
    assert_eq!(
        n.store
            .query_by_key("t", "k0", 0, u64::MAX, 5)
            .expect("query")
            .len(),
        0
    );
    assert_eq!(
        n.store
            .query_by_key("t", "k119", 0, u64::MAX, 5)
            .expect("query")
            .len(),
        1
    );
}

#[test]
fn clean_ratio_deletes_the_oldest_segment_and_reject_ratio_refuses() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    for i in 0..100u64 {
        n.send(vec![msg("t", 0, i, "", "", 50 * HOUR)]);
    }
    n.store.checkpoint().expect("checkpoint");
    n.store.set_disk_usage_override(Some(0.5));
    assert_eq!(n.store.retention_plan(51 * HOUR).expect("plan"), None);
    n.store.check_disk().expect("below reject ratio");
    n.store.set_disk_usage_override(Some(0.8));
    let plan = n
        .store
        .retention_plan(51 * HOUR)
        .expect("plan")
        .expect("clean ratio");
    assert_eq!(plan.delete_below_phys.get(), SEG, "one segment per plan");
    n.store.check_disk().expect("below reject ratio");
    n.store.set_disk_usage_override(Some(0.95));
    assert!(matches!(
        n.store.check_disk(),
        Err(StoreError::DiskFull { .. })
    ));
    n.store.set_disk_usage_override(None);
    let real = n.store.disk_usage().expect("statvfs");
    assert!((0.0..=1.0).contains(&real));
}
