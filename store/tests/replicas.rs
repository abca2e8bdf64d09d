//! Property test: two replicas apply the same random commands (sends with and without
//! auto-creation, topic create / update / delete, offset commits, pop receives / acks /
//! deadline changes, refusals); one of them crashes and replays at random points. Responses,
//! topics, offsets, pop state and every ConsumeQueue stay identical.

mod common;

use common::msg;
use common::open_node;
use common::small_config;
use common::Node;
use proptest::prelude::*;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::command::Ack;
use raftmq_store::command::AckEntry;
use raftmq_store::command::ChangeInvisible;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::command::Receive;
use raftmq_store::dedup::DedupParams;
use raftmq_store::dedup::PRODUCER_ID_PROPERTY;
use raftmq_store::dedup::SEQUENCE_PROPERTY;
use raftmq_store::topic::Permissions;
use raftmq_store::topic::TopicConfig;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::PullRequest;

const TOPICS: [&str; 3] = ["a", "b", "c"];

fn command() -> impl Strategy<Value = Command> {
    // Some messages carry an identity out of a small set (so retries and in-batch copies
    // occur); some batches carry dedup bounds small enough that expiry and the cap evict.
    let identity = prop::option::of((0..2u32, 0..4u64));
    let dedup = prop::option::of((1..60u64, 1..4u32));
    let send = (
        prop::collection::vec((0..3usize, 0..4u32, identity, 0..100u64), 1..5),
        prop::option::of(1..4u32),
        dedup,
    )
        .prop_map(|(ms, auto, dedup)| Command::SendBatch {
            messages: ms
                .iter()
                .map(|(t, q, id, ts)| {
                    let mut m = msg(TOPICS[*t], *q, u64::from(*q), "x", "k", *ts);
                    if let Some((p, seq)) = id {
                        m.properties
                            .insert(PRODUCER_ID_PROPERTY.into(), format!("p{p}"));
                        m.properties
                            .insert(SEQUENCE_PROPERTY.into(), seq.to_string());
                    }
                    m
                })
                .collect(),
            auto_create_queues: auto,
            dedup: dedup.map(|(window_ms, max_entries)| DedupParams {
                window_ms,
                max_entries,
            }),
        });
    let create = (0..3usize, 1..4u32)
        .prop_map(|(t, n)| Command::CreateTopic(TopicConfig::new(TOPICS[t], n)));
    let update = (0..3usize, 1..4u32, any::<bool>()).prop_map(|(t, n, w)| {
        Command::UpdateTopic(TopicConfig {
            perm: Permissions {
                read: true,
                write: w,
            },
            ..TopicConfig::new(TOPICS[t], n)
        })
    });
    let delete = (0..3usize).prop_map(|t| Command::DeleteTopic {
        topic: TOPICS[t].into(),
    });
    let commit = (0..3usize, 0..4u32, 0..10u64).prop_map(|(t, q, o)| {
        Command::CommitOffset(CommitOffset {
            group: "g".into(),
            topic: TOPICS[t].into(),
            queue_id: QueueId::new(q),
            offset: QueueOffset::new(o),
        })
    });
    let receive = (
        0..3usize,
        0..4u32,
        1..4u32,
        0..3usize,
        0..5000u64,
        0..2000u64,
        any::<bool>(),
    )
        .prop_map(|(t, q, max, f, now, invisible, fifo)| {
            Command::Receive(Receive {
                group: "g".into(),
                topic: TOPICS[t].into(),
                queue_id: QueueId::new(q),
                max_messages: max,
                invisible_ms: invisible,
                now_ms: now,
                max_inflight: 3,
                queue_min: QueueOffset::ZERO,
                filter: ["*", "x", "y"][f].into(),
                fifo,
            })
        });
    let ack = (0..3usize, 0..4u32, 0..6u64, 0..40u64).prop_map(|(t, q, o, h)| {
        Command::Ack(Ack {
            group: "g".into(),
            topic: TOPICS[t].into(),
            entries: vec![AckEntry {
                queue_id: QueueId::new(q),
                queue_offset: QueueOffset::new(o),
                handle: LogIndex::new(h),
            }],
        })
    });
    let change =
        (0..3usize, 0..4u32, 0..6u64, 0..40u64, 0..5000u64).prop_map(|(t, q, o, h, now)| {
            Command::ChangeInvisible(ChangeInvisible {
                group: "g".into(),
                topic: TOPICS[t].into(),
                queue_id: QueueId::new(q),
                queue_offset: QueueOffset::new(o),
                handle: LogIndex::new(h),
                invisible_ms: 100,
                now_ms: now,
            })
        });
    prop_oneof![
        6 => send, 2 => create, 1 => update, 1 => delete, 1 => commit,
        3 => receive, 2 => ack, 1 => change
    ]
}

fn dump(n: &Node) -> Vec<(String, u32, u64, u64, Vec<u64>)> {
    let mut out = Vec::new();
    for t in TOPICS {
        for q in 0..4 {
            let (min, max) = common::queue_offsets(n, t, q);
            let ids = if n
                .store
                .topic(t)
                .is_some_and(|c| c.readable(QueueId::new(q)))
                && max > min
            {
                n.store
                    .pull(&PullRequest {
                        topic: t.into(),
                        queue_id: QueueId::new(q),
                        offset: QueueOffset::new(min),
                        max_count: 1000,
                        max_bytes: u64::MAX,
                        tag_expr: "*".into(),
                    })
                    .expect("pull")
                    .messages
                    .iter()
                    .map(|m| m.msg_id.get())
                    .collect()
            } else {
                Vec::new()
            };
            out.push((t.to_owned(), q, min, max, ids));
        }
    }
    out
}

fn replay(n: &Node) {
    let from = n.store.watermarks().applied.map_or(0, |l| l.index + 1);
    let to = n.log.watermarks().appended.map_or(0, |l| l.index + 1);
    for e in n
        .log
        .read_entries(LogIndex::new(from), LogIndex::new(to))
        .expect("read")
    {
        n.sm.apply_entry(&e).expect("replay");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn replicas_stay_identical(cmds in prop::collection::vec((command(), prop::bool::weighted(0.1)), 1..40)) {
        let (da, db) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let mut a = open_node(da.path(), small_config(), 4096);
        let mut b = open_node(db.path(), small_config(), 4096);
        for (cmd, crash) in &cmds {
            let e = a.append(cmd);
            b.append_entry(e.clone());
            let ra = a.sm.apply_entry(&e).expect("apply a");
            let rb = b.sm.apply_entry(&e).expect("apply b");
            prop_assert_eq!(&ra, &rb);
            if *crash {
                b.log.halt_without_flush();
                let next = b.next_index;
                drop(b);
                b = open_node(db.path(), small_config(), 4096);
                b.next_index = next;
                replay(&b);
            }
            prop_assert_eq!(a.store.topics(), b.store.topics());
            prop_assert_eq!(a.store.fetch_offset("g", "a", QueueId::new(1)).map(QueueOffset::get), b.store.fetch_offset("g", "a", QueueId::new(1)).map(QueueOffset::get));
            prop_assert_eq!(dump(&a), dump(&b));
            prop_assert_eq!(a.store.dedup_window(), b.store.dedup_window());
            for t in TOPICS {
                for q in 0..4 {
                    let q = QueueId::new(q);
                    prop_assert_eq!(a.store.receive_state("g", t, q), b.store.receive_state("g", t, q));
                    prop_assert_eq!(a.store.fetch_offset("g", t, q), b.store.fetch_offset("g", t, q));
                }
            }
        }
        b.store.validate().expect("valid");
        a.store.validate().expect("valid");
    }
}
