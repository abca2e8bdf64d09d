//! Property test: random message batches applied, with crashes and replays at random points;
//! the ConsumeQueues always equal a model built from the committed entries.

mod common;

use raftmq_raft_log::types::LogIndex;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::collections::BTreeMap;

use common::msg;
use common::open_node;
use common::small_config;
use common::Node;
use proptest::prelude::*;
use raftmq_store::command::record_offsets;
use raftmq_store::command::Command;
use raftmq_store::message::message_id;
use raftmq_store::PullRequest;

type Model = BTreeMap<(String, u32), Vec<u64>>;

const TOPICS: [&str; 2] = ["a", "b"];

#[derive(Clone, Debug)]
struct Step {
    /// (topic index, queue id, tag index, has key)
    messages: Vec<(usize, u32, usize, bool)>,
    crash_after: bool,
    checkpoint_after: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::collection::vec((0..2usize, 0..3u32, 0..3usize, any::<bool>()), 1..6),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(messages, crash_after, checkpoint_after)| Step {
            messages,
            crash_after,
            checkpoint_after,
        })
}

fn queues(n: &Node) -> Model {
    let mut out = Model::new();
    for t in TOPICS {
        for q in 0..3 {
            let (min, max) = common::queue_offsets(n, t, q);
            let mut ids = Vec::new();
            let mut o = min;
            while o < max {
                let r = n
                    .store
                    .pull(&PullRequest {
                        topic: t.into(),
                        queue_id: QueueId::new(q),
                        offset: QueueOffset::new(o),
                        max_count: 32,
                        max_bytes: u64::MAX,
                        tag_expr: "*".into(),
                    })
                    .expect("pull");
                ids.extend(r.messages.iter().map(|m| m.msg_id.get()));
                o = r.next_offset.get();
            }
            if !ids.is_empty() {
                out.insert((t.to_owned(), q), ids);
            }
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
    fn consume_queues_match_the_model(steps in prop::collection::vec(step(), 1..25)) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut n = open_node(d.path(), small_config(), 4096);
        for t in TOPICS {
            n.create_topic(t, 3);
        }
        let mut model = Model::new();
        for (i, s) in steps.iter().enumerate() {
            let ms: Vec<_> = s
                .messages
                .iter()
                .enumerate()
                .map(|(j, (t, q, tag, key))| {
                    let key = if *key { format!("k{i}-{j}") } else { String::new() };
                    msg(TOPICS[*t], *q, i as u64, ["", "x", "y"][*tag], &key, i as u64)
                })
                .collect();
            let cmd = Command::batch(ms.clone());
            let e = n.append(&cmd);
            // The model: each record's physical offset, in entry order, per queue.
            let payload = cmd.encode().expect("encode").0;
            let loc = n.log.entry_location(LogIndex::new(e.log_id.index)).expect("loc");
            for (off, m) in record_offsets(&payload).expect("offsets").iter().zip(&ms) {
                model
                    .entry((m.topic.clone(), m.queue_id.get()))
                    .or_default()
                    .push(message_id(loc.phys_offset(), *off).get());
            }
            n.sm.apply_entry(&e).expect("apply");
            if s.checkpoint_after {
                n.store.checkpoint().expect("checkpoint");
            }
            if s.crash_after {
                n.log.halt_without_flush();
                drop(n);
                n = open_node(d.path(), small_config(), 4096);
                replay(&n);
                // A second replay (crash right after recovery) is a no-op.
                let before = queues(&n);
                n.log.halt_without_flush();
                drop(n);
                n = open_node(d.path(), small_config(), 4096);
                replay(&n);
                prop_assert_eq!(&queues(&n), &before);
            }
            prop_assert_eq!(&queues(&n), &model);
            n.store.validate().expect("valid");
        }
    }
}
