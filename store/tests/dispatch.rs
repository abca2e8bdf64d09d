//! Dispatch and the read path: pull, tag filter, offsets edges, key query with forced hash
//! collisions, get by id, rejections, auto-creation, long polling.

mod common;

use raftmq_raft_log::types::LogIndex;
use raftmq_store::message::message_id;
use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::time::Duration;

use common::msg;
use common::open_node;
use common::small_config;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::topic::Permissions;
use raftmq_store::topic::TopicConfig;
use raftmq_store::ApplyResponse;
use raftmq_store::PullRequest;
use raftmq_store::PullStatus;
use raftmq_store::RejectCode;
use raftmq_store::StoreError;

fn pull(topic: &str, q: u32, offset: u64, max: u32, tags: &str) -> PullRequest {
    PullRequest {
        topic: topic.into(),
        queue_id: QueueId::new(q),
        offset: QueueOffset::new(offset),
        max_count: max,
        max_bytes: u64::MAX,
        tag_expr: tags.into(),
    }
}

fn acks(r: ApplyResponse) -> Vec<raftmq_store::MessageAck> {
    match r {
        ApplyResponse::Sent(a) => a,
        other => panic!("expected acks, got {other:?}"),
    }
}

#[test]
fn dispatch_assigns_contiguous_offsets_and_pull_reads_them() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    n.create_topic("orders", 2);
    let mut all = Vec::new();
    for i in 0..20u64 {
        let batch = vec![
            msg(
                "orders",
                (i % 2) as u32,
                i,
                if i % 3 == 0 { "A" } else { "B" },
                &format!("k{i}"),
                1000 + i,
            ),
            msg("orders", 1, 100 + i, "C", "", 1000 + i),
        ];
        let a = acks(n.send(batch));
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].msg_id, a[0].phys_offset);
        assert!(a[1].phys_offset > a[0].phys_offset);
        all.extend(a);
    }
    // Offsets per queue are contiguous from 0.
    for q in 0..2u32 {
        let offs: Vec<u64> = all
            .iter()
            .filter(|a| a.queue_id.get() == q)
            .map(|a| a.queue_offset.get())
            .collect();
        assert_eq!(offs, (0..offs.len() as u64).collect::<Vec<_>>());
    }
    let r = n.store.pull(&pull("orders", 0, 0, 100, "*")).expect("pull");
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(r.messages.len(), 10);
    assert_eq!(
        (r.min_offset.get(), r.max_offset.get(), r.next_offset.get()),
        (0, 10, 10)
    );
    assert_eq!(r.messages[3].message.body, &b"body-6"[..]);
    assert_eq!(r.messages[3].queue_offset.get(), 3);
    // Tag filter: hash first, exact second.
    let r = n.store.pull(&pull("orders", 0, 0, 100, "A")).expect("pull");
    let tags: Vec<_> = r.messages.iter().map(|m| m.message.tags.clone()).collect();
    assert!(tags.iter().all(|t| t == "A") && !tags.is_empty());
    let r = n
        .store
        .pull(&pull("orders", 1, 0, 100, "Z || Y"))
        .expect("pull");
    assert_eq!(r.status, PullStatus::NoMatchedMessage);
    assert_eq!(r.next_offset.get(), r.max_offset.get());
    // max_count and max_bytes.
    let r = n.store.pull(&pull("orders", 1, 2, 3, "*")).expect("pull");
    assert_eq!(
        r.messages
            .iter()
            .map(|m| m.queue_offset.get())
            .collect::<Vec<_>>(),
        [2, 3, 4]
    );
    assert_eq!(r.next_offset.get(), 5);
    let mut p = pull("orders", 1, 0, 100, "*");
    p.max_bytes = 1;
    assert_eq!(
        n.store.pull(&p).expect("pull").messages.len(),
        1,
        "at least one"
    );
    n.store.validate().expect("valid");
}

#[test]
fn pull_offset_edges_and_missing_topic_or_queue() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    n.create_topic("t", 1);
    let r = n.store.pull(&pull("t", 0, 0, 10, "*")).expect("pull");
    assert_eq!(
        (r.status, r.min_offset.get(), r.max_offset.get()),
        (PullStatus::NoNewMessage, 0, 0)
    );
    n.send(vec![msg("t", 0, 1, "", "", 1), msg("t", 0, 2, "", "", 1)]);
    assert_eq!(
        n.store
            .pull(&pull("t", 0, 2, 10, "*"))
            .expect("pull")
            .status,
        PullStatus::NoNewMessage
    );
    let r = n.store.pull(&pull("t", 0, 3, 10, "*")).expect("pull");
    assert_eq!(
        (r.status, r.next_offset.get()),
        (PullStatus::OffsetTooBig, 2)
    );
    assert_eq!(
        n.store
            .pull(&pull("t", 0, 1, 10, "*"))
            .expect("pull")
            .messages
            .len(),
        1
    );
    assert_eq!(
        n.store
            .pull(&pull("nope", 0, 0, 10, "*"))
            .expect("pull")
            .status,
        PullStatus::NoSuchTopic
    );
    assert_eq!(
        n.store
            .pull(&pull("t", 1, 0, 10, "*"))
            .expect("pull")
            .status,
        PullStatus::NoSuchQueue
    );
    assert!(
        n.store.pull(&pull("t", 0, 0, 10, "a b")).is_err(),
        "bad expression"
    );
}

#[test]
fn rejections_are_deterministic_and_dispatch_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    let r = n.send(vec![msg("t", 0, 1, "", "", 1)]);
    assert!(
        matches!(
            r,
            ApplyResponse::Rejected {
                code: RejectCode::NoSuchTopic,
                ..
            }
        ),
        "{r:?}"
    );
    n.create_topic("t", 2);
    let r = n.send(vec![msg("t", 0, 1, "", "", 1), msg("t", 5, 1, "", "", 1)]);
    assert!(
        matches!(
            r,
            ApplyResponse::Rejected {
                code: RejectCode::NoSuchQueue,
                ..
            }
        ),
        "{r:?}"
    );
    assert_eq!(
        common::queue_offsets(&n, "t", 0),
        (0, 0),
        "whole batch refused"
    );
    let ro = TopicConfig {
        perm: Permissions {
            read: true,
            write: false,
        },
        ..TopicConfig::new("t", 2)
    };
    assert!(matches!(
        n.propose(&Command::UpdateTopic(ro)),
        ApplyResponse::Topic(_)
    ));
    let r = n.send(vec![msg("t", 0, 1, "", "", 1)]);
    assert!(
        matches!(
            r,
            ApplyResponse::Rejected {
                code: RejectCode::NoPermission,
                ..
            }
        ),
        "{r:?}"
    );
    let r = n.propose(&Command::CreateTopic(TopicConfig::new("t", 1)));
    assert!(
        matches!(
            r,
            ApplyResponse::Rejected {
                code: RejectCode::TopicExists,
                ..
            }
        ),
        "{r:?}"
    );
    // A payload that does not decode is refused, not fatal.
    let e = common::raw_entry(1, n.next_index, b"garbage".to_vec());
    let e = n.append_entry(e);
    let r = n.sm.apply_entry(&e).expect("apply");
    assert!(
        matches!(
            r,
            ApplyResponse::Rejected {
                code: RejectCode::Invalid,
                ..
            }
        ),
        "{r:?}"
    );
    // A rejected message's record is in the log but is not served by id.
    let e = n.append(&Command::batch(vec![msg("t", 0, 9, "", "", 1)]));
    let loc = n
        .log
        .entry_location(LogIndex::new(e.log_id.index))
        .expect("loc");
    n.sm.apply_entry(&e).expect("apply");
    let id = message_id(loc.phys_offset(), 24);
    assert!(matches!(
        n.store.get_by_id(id),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn auto_create_topic_and_admin_commands() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    let r = n.propose(&Command::SendBatch {
        messages: vec![msg("auto", 3, 1, "", "", 1)],
        auto_create_queues: Some(4),
        dedup: None,
    });
    assert_eq!(acks(r)[0].queue_offset.get(), 0);
    assert_eq!(n.store.topic("auto").expect("created").write_queue_count, 4);
    let r = n.propose(&Command::SendBatch {
        messages: vec![msg("auto2", 4, 1, "", "", 1)],
        auto_create_queues: Some(4),
        dedup: None,
    });
    assert!(matches!(
        r,
        ApplyResponse::Rejected {
            code: RejectCode::NoSuchQueue,
            ..
        }
    ));
    assert!(
        n.store.topic("auto2").is_none(),
        "nothing created by a refused batch"
    );
    let c = CommitOffset {
        group: "g".into(),
        topic: "auto".into(),
        queue_id: QueueId::new(3),
        offset: QueueOffset::new(1),
    };
    assert_eq!(
        n.propose(&Command::CommitOffset(c)),
        ApplyResponse::OffsetCommitted
    );
    assert_eq!(
        n.store
            .fetch_offset("g", "auto", QueueId::new(3))
            .map(QueueOffset::get),
        Some(1)
    );
    let r = n.propose(&Command::DeleteTopic {
        topic: "auto".into(),
    });
    assert_eq!(r, ApplyResponse::TopicDeleted("auto".into()));
    assert!(n.store.topic("auto").is_none());
    assert_eq!(
        n.store
            .fetch_offset("g", "auto", QueueId::new(3))
            .map(QueueOffset::get),
        None
    );
    assert_eq!(common::queue_offsets(&n, "auto", 3), (0, 0));
    assert_eq!(n.store.topics().len(), 0);
}

fn same_hash(_: &str) -> u64 {
    42
}

#[test]
fn key_query_with_forced_collisions_and_get_by_id() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = raftmq_store::LogStore::open(d.path(), common::log_config(64 * 1024)).expect("log");
    let (store, sm) =
        raftmq_store::open_with_hasher(d.path(), small_config(), log.clone(), same_hash)
            .expect("open");
    let mut n = common::Node {
        log,
        store,
        sm,
        next_index: 0,
        term: 1,
    };
    n.create_topic("t", 1);
    n.create_topic("u", 1);
    for i in 0..40u64 {
        let key = if i % 2 == 0 { "even" } else { "odd" };
        n.send(vec![
            msg("t", 0, i, "", key, 1000 + i),
            msg("u", 0, i, "", "even", 1000 + i),
        ]);
    }
    let r = n
        .store
        .query_by_key("t", "even", 0, u64::MAX, 100)
        .expect("query");
    assert_eq!(r.len(), 20);
    assert!(r
        .iter()
        .all(|m| m.message.keys == ["even"] && m.message.topic == "t"));
    let r = n
        .store
        .query_by_key("t", "odd", 1010, 1019, 100)
        .expect("query");
    assert_eq!(r.len(), 5, "time range");
    assert_eq!(
        n.store
            .query_by_key("t", "none", 0, u64::MAX, 10)
            .expect("query")
            .len(),
        0
    );
    assert_eq!(
        n.store
            .query_by_key("t", "even", 0, u64::MAX, 3)
            .expect("query")
            .len(),
        3
    );
    // A byte budget stops the answer and says so; the first message always fits.
    let all = n
        .store
        .query_by_key_within("t", "even", (0, u64::MAX), 100, u64::MAX)
        .expect("query");
    assert_eq!((all.messages.len(), all.truncated), (20, false));
    let three: u64 = all.messages[..3]
        .iter()
        .map(|m| u64::from(m.store_size))
        .sum();
    let within = n
        .store
        .query_by_key_within("t", "even", (0, u64::MAX), 100, three)
        .expect("query");
    assert_eq!((within.messages.len(), within.truncated), (3, true));
    let one = n
        .store
        .query_by_key_within("t", "even", (0, u64::MAX), 100, 1)
        .expect("query");
    assert_eq!((one.messages.len(), one.truncated), (1, true));
    let m = &r[0];
    let again = n.store.get_by_id(m.msg_id).expect("by id");
    assert_eq!(again.message, m.message);
    assert!(again.queue_offset.get() < 40);
    assert!(matches!(
        n.store.get_by_id(m.msg_id.advance(1)),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        n.store.get_by_id(PhysOffset::new(u64::MAX / 2)),
        Err(StoreError::NotFound { .. })
    ));
    // An id whose record would end past 2^64 cannot be a message: a clear refusal, no
    // overflow.
    for id in [u64::MAX - 1, u64::MAX] {
        let e = n
            .store
            .get_by_id(PhysOffset::new(id))
            .expect_err("cannot be an id");
        assert!(matches!(e, StoreError::InvalidArgument { .. }), "{e:?}");
        assert!(e.to_string().contains("cannot be a message id"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_wakes_on_dispatch_and_times_out() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    n.create_topic("t", 1);
    let store = n.store.clone();
    assert!(
        !store
            .wait_for_messages(
                "t",
                QueueId::new(0),
                QueueOffset::new(0),
                Duration::from_millis(20)
            )
            .await
    );
    let waiter = tokio::spawn(async move {
        store
            .wait_for_messages(
                "t",
                QueueId::new(0),
                QueueOffset::new(0),
                Duration::from_secs(10),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Dispatch through the openraft entry point so waiters are notified.
    let e = n.append(&Command::batch(vec![msg("t", 0, 1, "", "", 1)]));
    use openraft::storage::RaftStateMachine;
    let items = futures::stream::iter(vec![Ok((e, None))]);
    n.sm.apply(items).await.expect("apply");
    assert!(waiter.await.expect("join"));
}

#[test]
fn offsets_are_committed_only_for_existing_queues() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), 64 * 1024);
    n.create_topic("t", 2);
    let commit = |topic: &str, q: u32| {
        Command::CommitOffset(CommitOffset {
            group: "g".into(),
            topic: topic.into(),
            queue_id: QueueId::new(q),
            offset: QueueOffset::new(1),
        })
    };
    for (topic, q, code) in [
        ("nope", 0, RejectCode::NoSuchTopic),
        ("t", 2, RejectCode::NoSuchQueue),
    ] {
        let r = n.propose(&commit(topic, q));
        assert!(
            matches!(r, ApplyResponse::Rejected { code: c, .. } if c == code),
            "{topic}/{q}: {r:?}"
        );
        assert_eq!(n.store.fetch_offset("g", topic, QueueId::new(q)), None);
    }
    assert_eq!(n.propose(&commit("t", 1)), ApplyResponse::OffsetCommitted);
    assert_eq!(
        n.store.fetch_offset("g", "t", QueueId::new(1)),
        Some(QueueOffset::new(1))
    );
}

#[test]
fn consumer_groups_with_state_are_bounded() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut cfg = small_config();
    cfg.limits.max_groups = 2;
    let mut n = open_node(d.path(), cfg, 64 * 1024);
    n.create_topic("t", 1);
    for g in ["g1", "g2"] {
        n.store.check_new_group(g).expect("room");
        let r = n.propose(&Command::CommitOffset(CommitOffset {
            group: g.into(),
            topic: "t".into(),
            queue_id: QueueId::new(0),
            offset: QueueOffset::new(0),
        }));
        assert_eq!(r, ApplyResponse::OffsetCommitted);
    }
    n.store.check_new_group("g1").expect("a known group passes");
    let e = n.store.check_new_group("g3").expect_err("a third group");
    assert!(e.to_string().contains("max-groups is 2"), "{e}");
}
