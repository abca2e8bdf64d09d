//! Pop consumption through apply: Receive / Ack / ChangeInvisible on one store (expiry,
//! redelivery with attempt + 1, stale handles, ack idempotence, the in-flight bound, tag
//! filters, topic deletion, retention below the queue minimum), two replicas applying the
//! same entries, and the pop state through a checkpoint reopen and a snapshot install.
//! Delayed delivery: a message not due is parked (attempt 0, deadline = its delivery time),
//! later messages are not blocked, and it goes out with attempt 1 once due; replicas, replay
//! and a snapshot agree on it.

mod common;

use common::msg;
use common::open_node;
use common::small_config;
use common::transfer;
use common::Node;
use openraft::storage::RaftStateMachine;
use raftmq_store::command::Ack;
use raftmq_store::command::AckEntry;
use raftmq_store::command::ChangeInvisible;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::command::Receive;
use raftmq_store::message::Message;
use raftmq_store::receive::delay::DELIVER_MS_PROPERTY;
use raftmq_store::types::LogIndex;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::ApplyResponse;
use raftmq_store::Delivered;
use raftmq_store::InvisibleChanged;
use raftmq_store::RejectCode;

const SEG: u64 = 4096;
const Q0: QueueId = QueueId::new(0);

fn receive(group: &str, max: u32, invisible_ms: u64, now_ms: u64) -> Receive {
    Receive {
        group: group.into(),
        topic: "t".into(),
        queue_id: Q0,
        max_messages: max,
        invisible_ms,
        now_ms,
        max_inflight: 4096,
        queue_min: QueueOffset::ZERO,
        filter: "*".into(),
        fifo: false,
    }
}

fn recv(n: &mut Node, r: Receive) -> Vec<Delivered> {
    match n.propose(&Command::Receive(r)) {
        ApplyResponse::Received(d) => d,
        other => panic!("receive answered {other:?}"),
    }
}

fn offsets(d: &[Delivered]) -> Vec<u64> {
    d.iter().map(|d| d.queue_offset.get()).collect()
}

fn ack(n: &mut Node, group: &str, items: &[(u64, LogIndex)]) -> Vec<Result<(), RejectCode>> {
    let entries = items
        .iter()
        .map(|(o, h)| AckEntry {
            queue_id: Q0,
            queue_offset: QueueOffset::new(*o),
            handle: *h,
        })
        .collect();
    let cmd = Command::Ack(Ack {
        group: group.into(),
        topic: "t".into(),
        entries,
    });
    match n.propose(&cmd) {
        ApplyResponse::Acked(r) => r,
        other => panic!("ack answered {other:?}"),
    }
}

fn change(n: &mut Node, offset: u64, handle: LogIndex, ms: u64, now: u64) -> ApplyResponse {
    n.propose(&Command::ChangeInvisible(ChangeInvisible {
        group: "g".into(),
        topic: "t".into(),
        queue_id: Q0,
        queue_offset: QueueOffset::new(offset),
        handle,
        invisible_ms: ms,
        now_ms: now,
    }))
}

fn progress(n: &Node, group: &str) -> Option<u64> {
    n.store.fetch_offset(group, "t", Q0).map(QueueOffset::get)
}

/// A node with topic `t` (1 queue) and `count` messages tagged `tags[i % len]` on queue 0.
fn node_with(dir: &std::path::Path, count: u64, tags: &[&str]) -> Node {
    let mut n = open_node(dir, small_config(), SEG);
    n.create_topic("t", 1);
    for i in 0..count {
        let tag = tags[(i as usize) % tags.len()];
        n.send(vec![msg("t", 0, i, tag, "", 1000 + i)]);
    }
    n
}

#[test]
fn receive_expire_redeliver_and_ack() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 5, &["a"]);
    let first = n.next_index;
    let got = recv(&mut n, receive("g", 3, 1000, 10_000));
    assert_eq!(offsets(&got), [0, 1, 2]);
    assert!(got.iter().all(|d| d.attempt == 1
        && d.handle == LogIndex::new(first)
        && d.invisible_until_ms == 11_000));
    assert_eq!(progress(&n, "g"), Some(0), "progress in the offset table");
    let more = recv(&mut n, receive("g", 3, 1000, 10_500));
    assert_eq!(offsets(&more), [3, 4]);
    assert!(recv(&mut n, receive("g", 3, 1000, 10_600)).is_empty());
    assert!(!n
        .store
        .has_deliverable("g", "t", Q0, "*", 10_600, false)
        .expect("check"));
    assert!(n
        .store
        .has_deliverable("g", "t", Q0, "*", 11_000, false)
        .expect("check"));

    let h0 = got[0].handle;
    assert_eq!(ack(&mut n, "g", &[(0, h0)]), [Ok(())]);
    assert_eq!(progress(&n, "g"), Some(1));
    assert_eq!(
        ack(&mut n, "g", &[(0, h0), (1, LogIndex::new(999)), (4, h0)]),
        [
            Err(RejectCode::AlreadyAcked),
            Err(RejectCode::InvalidReceiptHandle),
            Err(RejectCode::InvalidReceiptHandle),
        ],
        "retried ack harmless; wrong handles refused"
    );
    // 1 and 2 expired at 11_000, 3 and 4 expire at 11_500.
    let second = n.next_index;
    let again = recv(&mut n, receive("g", 10, 1000, 11_000));
    assert_eq!(offsets(&again), [1, 2]);
    assert!(again
        .iter()
        .all(|d| d.attempt == 2 && d.handle == LogIndex::new(second)));
    assert_eq!(
        ack(&mut n, "g", &[(1, got[1].handle)]),
        [Err(RejectCode::InvalidReceiptHandle)],
        "the first delivery's handle is stale after a redelivery"
    );
    assert_eq!(
        ack(&mut n, "g", &[(1, again[0].handle), (2, again[1].handle)]),
        [Ok(()), Ok(())]
    );
    assert_eq!(progress(&n, "g"), Some(3));
    let s = n.store.receive_state("g", "t", Q0).expect("state");
    assert_eq!(s.next, QueueOffset::new(5));
    assert_eq!(
        s.inflight.keys().map(|o| o.get()).collect::<Vec<_>>(),
        [3, 4]
    );
    n.store.validate().expect("valid");
}

#[test]
fn change_invisible_gives_a_new_handle() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 2, &["a"]);
    let got = recv(&mut n, receive("g", 1, 1000, 10_000));
    let old = got[0].handle;
    let at = n.next_index;
    let ApplyResponse::InvisibleChanged(c) = change(&mut n, 0, old, 5000, 10_200) else {
        panic!("change refused")
    };
    assert_eq!(
        c,
        InvisibleChanged {
            handle: LogIndex::new(at),
            invisible_until_ms: 15_200,
            attempt: 1,
        }
    );
    let stale = change(&mut n, 0, old, 5000, 10_300);
    assert!(
        matches!(
            stale,
            ApplyResponse::Rejected {
                code: RejectCode::InvalidReceiptHandle,
                ..
            }
        ),
        "{stale:?}"
    );
    assert_eq!(
        ack(&mut n, "g", &[(0, old)]),
        [Err(RejectCode::InvalidReceiptHandle)]
    );
    // Not expired at the old deadline any more: only offset 1 is new.
    assert_eq!(offsets(&recv(&mut n, receive("g", 5, 1000, 12_000))), [1]);
    assert_eq!(ack(&mut n, "g", &[(0, c.handle)]), [Ok(())]);
    let acked = change(&mut n, 0, c.handle, 5000, 12_100);
    assert!(
        matches!(
            acked,
            ApplyResponse::Rejected {
                code: RejectCode::AlreadyAcked,
                ..
            }
        ),
        "{acked:?}"
    );
    let never = change(&mut n, 7, c.handle, 5000, 12_100);
    assert!(
        matches!(
            never,
            ApplyResponse::Rejected {
                code: RejectCode::InvalidReceiptHandle,
                ..
            }
        ),
        "{never:?}"
    );
}

#[test]
fn filter_skips_bound_limits_and_start_offsets() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 6, &["A", "B"]);
    let r = Receive {
        filter: "A".into(),
        ..receive("g", 10, 1000, 10_000)
    };
    assert!(n
        .store
        .has_deliverable("g", "t", Q0, "A", 10_000, false)
        .expect("check"));
    assert!(!n
        .store
        .has_deliverable("g", "t", Q0, "C", 10_000, false)
        .expect("check"));
    assert!(n
        .store
        .has_deliverable("g", "t", Q0, "bad ||", 0, false)
        .is_err());
    assert_eq!(offsets(&recv(&mut n, r)), [0, 2, 4]);
    assert_eq!(
        n.store.receive_state("g", "t", Q0).expect("state").next,
        QueueOffset::new(6),
        "B messages skipped for good"
    );
    assert_eq!(
        ack(&mut n, "g", &[(1, LogIndex::new(1))]),
        [Err(RejectCode::AlreadyAcked)]
    );
    let bad = n.propose(&Command::Receive(Receive {
        filter: "A ||".into(),
        ..receive("g", 1, 1, 1)
    }));
    assert!(matches!(
        bad,
        ApplyResponse::Rejected {
            code: RejectCode::Invalid,
            ..
        }
    ));

    // The in-flight bound: full means only expired ones are handed out.
    let bounded = |now| Receive {
        max_inflight: 2,
        ..receive("h", 10, 1000, now)
    };
    assert_eq!(offsets(&recv(&mut n, bounded(10_000))), [0, 1]);
    assert!(recv(&mut n, bounded(10_100)).is_empty());
    assert_eq!(offsets(&recv(&mut n, bounded(11_000))), [0, 1]);

    // A new group starts at its committed offset.
    n.propose(&Command::CommitOffset(CommitOffset {
        group: "k".into(),
        topic: "t".into(),
        queue_id: Q0,
        offset: QueueOffset::new(4),
    }));
    assert_eq!(
        offsets(&recv(&mut n, receive("k", 10, 1000, 10_000))),
        [4, 5]
    );
    // An explicit offset commit resets the group's pop state on the queue.
    n.propose(&Command::CommitOffset(CommitOffset {
        group: "k".into(),
        topic: "t".into(),
        queue_id: Q0,
        offset: QueueOffset::new(1),
    }));
    assert!(n.store.receive_state("k", "t", Q0).is_none());
    assert_eq!(
        offsets(&recv(&mut n, receive("k", 2, 1000, 10_000))),
        [1, 2]
    );
    n.store.validate().expect("valid");
}

#[test]
fn topic_delete_forgets_and_unknown_topic_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 3, &["a"]);
    let got = recv(&mut n, receive("g", 2, 1000, 10_000));
    n.propose(&Command::DeleteTopic { topic: "t".into() });
    assert!(n.store.receive_state("g", "t", Q0).is_none());
    assert_eq!(progress(&n, "g"), None);
    let r = n.propose(&Command::Receive(receive("g", 1, 1, 1)));
    assert!(matches!(
        r,
        ApplyResponse::Rejected {
            code: RejectCode::NoSuchTopic,
            ..
        }
    ));
    let a = n.propose(&Command::Ack(Ack {
        group: "g".into(),
        topic: "t".into(),
        entries: vec![AckEntry {
            queue_id: Q0,
            queue_offset: QueueOffset::ZERO,
            handle: got[0].handle,
        }],
    }));
    assert!(matches!(
        a,
        ApplyResponse::Rejected {
            code: RejectCode::NoSuchTopic,
            ..
        }
    ));
    // Recreated: a fresh start, nothing remembered.
    n.create_topic("t", 1);
    n.send(vec![msg("t", 0, 9, "a", "", 2000)]);
    assert_eq!(offsets(&recv(&mut n, receive("g", 5, 1000, 20_000))), [0]);
}

#[test]
fn offsets_below_the_queue_minimum_are_forgotten() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    for i in 0..150 {
        n.send(vec![msg("t", 0, i, "a", "", 1000 + i)]);
    }
    let got = recv(&mut n, receive("g", 4, 1000, 10_000));
    assert_eq!(offsets(&got), [0, 1, 2, 3]);
    // The leader's stamp alone forgets what it no longer has.
    let r = Receive {
        queue_min: QueueOffset::new(2),
        ..receive("s", 1, 1000, 10_000)
    };
    assert_eq!(offsets(&recv(&mut n, r)), [2]);
    // Local retention: the queue minimum moves up.
    n.store.checkpoint().expect("checkpoint");
    let plan = n
        .store
        .retention_plan(1000 + 150 + 100 * 3_600_000)
        .expect("plan")
        .expect("some");
    n.log.purge(plan.purge_upto).expect("purge");
    n.store.apply_retention(&plan).expect("retention");
    let min = n.store.queue_offsets("t", Q0).0;
    assert!(min.get() > 4, "queue min moved up to {min}");
    for i in 150..152 {
        n.send(vec![msg("t", 0, i, "a", "", 1000 + i)]);
    }
    let later = recv(&mut n, receive("g", 2, 1000, 20_000));
    assert_eq!(offsets(&later), [min.get(), min.get() + 1]);
    let s = n.store.receive_state("g", "t", Q0).expect("state");
    assert!(s.inflight.keys().all(|o| *o >= min), "{s:?}");
    assert_eq!(progress(&n, "g"), Some(min.get()));
    n.store.validate().expect("valid");
}

/// The same entries on two stores: same answers, same pop state; the state survives a
/// close and reopen (checkpoint).
#[test]
fn replicas_agree_and_state_survives_reopen() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = node_with(da.path(), 20, &["A", "B", "C"]);
    let mut b = node_with(db.path(), 20, &["A", "B", "C"]);
    let mut cmds = Vec::new();
    for step in 0..30u64 {
        let now = 10_000 + step * 400;
        cmds.push(Command::Receive(Receive {
            filter: if step % 2 == 0 { "A || C" } else { "*" }.into(),
            max_inflight: 5,
            ..receive(["g", "h"][(step % 2) as usize], 3, 1000, now)
        }));
    }
    for c in &cmds {
        let (ra, rb) = (a.propose(c), b.propose(c));
        assert_eq!(ra, rb, "{c:?}");
        if let ApplyResponse::Received(d) = ra {
            if let Some(first) = d.first() {
                let group = match c {
                    Command::Receive(r) => r.group.clone(),
                    _ => unreachable!("receives only"),
                };
                let entry = [(first.queue_offset.get(), first.handle)];
                assert_eq!(ack(&mut a, &group, &entry), ack(&mut b, &group, &entry));
            }
        }
    }
    for g in ["g", "h"] {
        assert_eq!(
            a.store.receive_state(g, "t", Q0),
            b.store.receive_state(g, "t", Q0)
        );
        assert_eq!(progress(&a, g), progress(&b, g));
    }
    let before = a.store.receive_state("g", "t", Q0).expect("state");
    a.store.close().expect("close");
    drop(a);
    let a = open_node(da.path(), small_config(), SEG);
    assert_eq!(a.store.receive_state("g", "t", Q0), Some(before));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_install_carries_the_pop_state() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = node_with(da.path(), 10, &["a"]);
    let got = recv(&mut a, receive("g", 4, 1000, 10_000));
    ack(&mut a, "g", &[(1, got[1].handle)]);
    let mut b = open_node(db.path(), small_config(), SEG);
    let snap = common::build_snapshot(&mut a).await;
    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    let want = a.store.receive_state("g", "t", Q0).expect("state");
    assert_eq!(want.inflight.len(), 3);
    assert_eq!(b.store.receive_state("g", "t", Q0), Some(want));
    assert_eq!(progress(&b, "g"), Some(0));
    // The learner goes on identically: the old handle acks there.
    b.next_index = a.next_index;
    let entry = [(2, got[2].handle)];
    assert_eq!(ack(&mut a, "g", &entry), ack(&mut b, "g", &entry));
    assert_eq!(
        a.store.receive_state("g", "t", Q0),
        b.store.receive_state("g", "t", Q0)
    );
}

/// Message `i` of topic `t`, queue 0, to be delivered at `deliver_ms`.
fn delayed(i: u64, deliver_ms: u64) -> Message {
    let mut m = msg("t", 0, i, "a", "", 1000 + i);
    m.properties
        .insert(DELIVER_MS_PROPERTY.into(), deliver_ms.to_string());
    m
}

fn deliverable(n: &Node, group: &str, now_ms: u64) -> bool {
    n.store
        .has_deliverable(group, "t", Q0, "*", now_ms, false)
        .expect("check")
}

/// Queue 0 of `t`: 0 normal, 1 due at 20_000, 2 normal, 3 due at 5_000 (past), 4 due at
/// 30_000.
fn delay_node(dir: &std::path::Path) -> Node {
    let mut n = open_node(dir, small_config(), SEG);
    n.create_topic("t", 1);
    n.send(vec![msg("t", 0, 0, "a", "", 1000)]);
    n.send(vec![delayed(1, 20_000)]);
    n.send(vec![msg("t", 0, 2, "a", "", 1002), delayed(3, 5_000)]);
    n.send(vec![delayed(4, 30_000)]);
    n
}

#[test]
fn a_delayed_message_is_parked_then_delivered_with_attempt_1() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = delay_node(d.path());
    let first = n.next_index;
    let got = recv(&mut n, receive("g", 10, 100_000, 10_000));
    assert_eq!(
        offsets(&got),
        [0, 2, 3],
        "later messages not blocked; 3 is past due"
    );
    assert!(got.iter().all(|d| d.attempt == 1));
    let s = n.store.receive_state("g", "t", Q0).expect("state");
    assert_eq!(
        s.next,
        QueueOffset::new(5),
        "next moved past the parked ones"
    );
    let parked = |o: u64| s.inflight[&QueueOffset::new(o)];
    assert_eq!(
        (
            parked(1).attempt,
            parked(1).invisible_until_ms,
            parked(1).handle
        ),
        (0, 20_000, LogIndex::new(first))
    );
    assert_eq!(
        (parked(4).attempt, parked(4).invisible_until_ms),
        (0, 30_000)
    );
    n.store.validate().expect("valid");

    // Parked is not delivered: no handle acks or moves it, and it holds the progress.
    assert_eq!(
        ack(&mut n, "g", &[(1, LogIndex::new(first))]),
        [Err(RejectCode::InvalidReceiptHandle)]
    );
    let moved = change(&mut n, 1, LogIndex::new(first), 1000, 10_100);
    assert!(
        matches!(
            moved,
            ApplyResponse::Rejected {
                code: RejectCode::InvalidReceiptHandle,
                ..
            }
        ),
        "{moved:?}"
    );
    let handles: Vec<_> = got
        .iter()
        .map(|d| (d.queue_offset.get(), d.handle))
        .collect();
    assert_eq!(ack(&mut n, "g", &handles), [Ok(()), Ok(()), Ok(())]);
    assert_eq!(
        progress(&n, "g"),
        Some(1),
        "the parked message holds the progress"
    );

    // Not before its time; at its time with attempt 1 (not 2).
    assert!(!deliverable(&n, "g", 19_999));
    assert!(recv(&mut n, receive("g", 10, 1000, 19_999)).is_empty());
    assert!(deliverable(&n, "g", 20_000));
    let at = n.next_index;
    let due = recv(&mut n, receive("g", 10, 1000, 20_000));
    assert_eq!(offsets(&due), [1]);
    assert_eq!(
        (due[0].attempt, due[0].handle, due[0].invisible_until_ms),
        (1, LogIndex::new(at), 21_000)
    );
    assert!(!deliverable(&n, "g", 20_500));
    // Not acked: delivered again with attempt 2, like any message.
    let again = recv(&mut n, receive("g", 10, 1000, 21_000));
    assert_eq!((offsets(&again), again[0].attempt), (vec![1], 2));
    assert_eq!(ack(&mut n, "g", &[(1, again[0].handle)]), [Ok(())]);
    assert_eq!(progress(&n, "g"), Some(4));
    let last = recv(&mut n, receive("g", 10, 1000, 30_000));
    assert_eq!((offsets(&last), last[0].attempt), (vec![4], 1));
    assert_eq!(ack(&mut n, "g", &[(4, last[0].handle)]), [Ok(())]);
    assert_eq!(progress(&n, "g"), Some(5));
    n.store.validate().expect("valid");
}

#[test]
fn has_deliverable_waits_for_a_lone_delayed_message() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    n.send(vec![delayed(0, 20_000)]);
    // Not parked yet (no Receive scanned it): still not deliverable before its time.
    assert!(!deliverable(&n, "g", 10_000));
    assert!(deliverable(&n, "g", 20_000));
    // Scanned at its time: delivered at once, attempt 1.
    let got = recv(&mut n, receive("g", 10, 1000, 20_000));
    assert_eq!((offsets(&got), got[0].attempt), (vec![0], 1));
    // A later normal message behind a new delayed one is deliverable at once.
    n.send(vec![delayed(1, 50_000), msg("t", 0, 2, "a", "", 1002)]);
    assert!(deliverable(&n, "g", 20_100));
    assert_eq!(offsets(&recv(&mut n, receive("g", 10, 1000, 20_100))), [2]);
    // Filtered out: a delayed message of another tag is skipped, never parked.
    let mut other = delayed(3, 60_000);
    other.tags = "b".into();
    n.send(vec![other]);
    let r = Receive {
        filter: "a".into(),
        ..receive("g", 10, 1000, 20_200)
    };
    assert!(recv(&mut n, r).is_empty());
    let s = n.store.receive_state("g", "t", Q0).expect("state");
    assert_eq!(s.next, QueueOffset::new(4));
    assert!(!s.inflight.contains_key(&QueueOffset::new(3)));
}

#[test]
fn parked_messages_count_in_the_inflight_bound() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    n.send(vec![delayed(0, 20_000), delayed(1, 20_000)]);
    n.send(vec![msg("t", 0, 2, "a", "", 1002)]);
    let bounded = |now| Receive {
        max_inflight: 2,
        ..receive("g", 10, 1000, now)
    };
    assert!(
        recv(&mut n, bounded(10_000)).is_empty(),
        "both parked, bound full"
    );
    assert_eq!(
        n.store.receive_state("g", "t", Q0).expect("state").next,
        QueueOffset::new(2)
    );
    // Due: the parked ones go out (the count stays 2), the normal one still waits.
    let due = recv(&mut n, bounded(20_000));
    assert_eq!(offsets(&due), [0, 1]);
    assert!(due.iter().all(|d| d.attempt == 1));
    let handles: Vec<_> = due
        .iter()
        .map(|d| (d.queue_offset.get(), d.handle))
        .collect();
    ack(&mut n, "g", &handles);
    assert_eq!(offsets(&recv(&mut n, bounded(20_100))), [2]);
}

/// Delayed messages on two replicas, then a crash and replay on one: same answers, same
/// state; a checkpoint reopen keeps the parked entries.
#[test]
fn delay_replicas_and_replay_agree() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = delay_node(da.path());
    let mut b = delay_node(db.path());
    let start = a.next_index;
    let mut answers = Vec::new();
    for now in [10_000, 15_000, 20_000, 25_000, 30_000, 31_000] {
        let c = Command::Receive(receive("g", 2, 1000, now));
        let (ra, rb) = (a.propose(&c), b.propose(&c));
        assert_eq!(ra, rb, "{c:?}");
        answers.push(ra);
    }
    assert_eq!(
        a.store.receive_state("g", "t", Q0),
        b.store.receive_state("g", "t", Q0)
    );
    let want = a.store.receive_state("g", "t", Q0).expect("state");
    // Crash (no checkpoint since open): every entry is applied again.
    drop(a);
    let a = open_node(da.path(), small_config(), SEG);
    let from = a.store.watermarks().applied.map_or(0, |l| l.index + 1);
    assert!(from < start, "replay covers the receives");
    let entries = a
        .log
        .read_entries(LogIndex::new(from), LogIndex::new(a.next_index))
        .expect("read");
    let mut replayed = Vec::new();
    for e in entries {
        let r = a.sm.apply_entry(&e).expect("replay");
        if e.log_id.index >= start {
            replayed.push(r);
        }
    }
    assert_eq!(
        replayed, answers,
        "replay picks what the first apply picked"
    );
    assert_eq!(a.store.receive_state("g", "t", Q0), Some(want.clone()));
    a.store.close().expect("close");
    drop(a);
    let a = open_node(da.path(), small_config(), SEG);
    assert_eq!(a.store.receive_state("g", "t", Q0), Some(want));
    a.store.validate().expect("valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_install_keeps_parked_messages() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = delay_node(da.path());
    assert_eq!(
        offsets(&recv(&mut a, receive("g", 10, 100_000, 10_000))),
        [0, 2, 3]
    );
    let mut b = open_node(db.path(), small_config(), SEG);
    let snap = common::build_snapshot(&mut a).await;
    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    let want = a.store.receive_state("g", "t", Q0).expect("state");
    assert_eq!(want.inflight[&QueueOffset::new(1)].attempt, 0);
    assert_eq!(b.store.receive_state("g", "t", Q0), Some(want));
    b.next_index = a.next_index;
    assert!(!deliverable(&b, "g", 19_999));
    let r = Command::Receive(receive("g", 10, 1000, 20_000));
    let (ra, rb) = (a.propose(&r), b.propose(&r));
    assert_eq!(ra, rb);
    let ApplyResponse::Received(d) = rb else {
        panic!("{rb:?}")
    };
    assert_eq!((offsets(&d), d[0].attempt), (vec![1], 1));
}
