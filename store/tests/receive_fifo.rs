//! FIFO pop consumption through apply (`Receive.fifo`): a delivered message in flight locks
//! its queue for the group, an expired one comes back (attempt + 1) before anything new, in
//! offset order, an ack unlocks; parked delayed messages do not lock; non-FIFO receives on
//! the same state are unchanged; `has_deliverable` agrees with the apply; two replicas
//! agree; a `Receive` entry in the format before the `flags` byte applies as non-FIFO.

mod common;

use common::msg;
use common::open_node;
use common::raw_entry;
use common::small_config;
use common::Node;
use raftmq_store::command::Ack;
use raftmq_store::command::AckEntry;
use raftmq_store::command::Command;
use raftmq_store::command::Receive;
use raftmq_store::receive::delay::DELIVER_MS_PROPERTY;
use raftmq_store::types::LogIndex;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::ApplyResponse;
use raftmq_store::Delivered;

const SEG: u64 = 4096;
const Q0: QueueId = QueueId::new(0);
const Q1: QueueId = QueueId::new(1);

fn receive(group: &str, q: QueueId, max: u32, now_ms: u64, fifo: bool) -> Receive {
    Receive {
        group: group.into(),
        topic: "t".into(),
        queue_id: q,
        max_messages: max,
        invisible_ms: 1000,
        now_ms,
        max_inflight: 4096,
        queue_min: QueueOffset::ZERO,
        filter: "*".into(),
        fifo,
    }
}

fn fifo(max: u32, now_ms: u64) -> Receive {
    receive("g", Q0, max, now_ms, true)
}

fn recv(n: &mut Node, r: Receive) -> Vec<Delivered> {
    match n.propose(&Command::Receive(r)) {
        ApplyResponse::Received(d) => d,
        other => panic!("receive answered {other:?}"),
    }
}

/// `(queue offset, attempt)` of each delivered message.
fn got(d: &[Delivered]) -> Vec<(u64, u32)> {
    d.iter()
        .map(|d| (d.queue_offset.get(), d.attempt))
        .collect()
}

fn ack(n: &mut Node, q: QueueId, offset: u64, handle: LogIndex) {
    let r = n.propose(&Command::Ack(Ack {
        group: "g".into(),
        topic: "t".into(),
        entries: vec![AckEntry {
            queue_id: q,
            queue_offset: QueueOffset::new(offset),
            handle,
        }],
    }));
    assert_eq!(r, ApplyResponse::Acked(vec![Ok(())]));
}

fn deliverable(n: &Node, q: QueueId, now_ms: u64, fifo: bool) -> bool {
    n.store
        .has_deliverable("g", "t", q, "*", now_ms, fifo)
        .expect("check")
}

/// Topic `t` with 2 queues, `count` messages on queue 0 and 2 on queue 1.
fn node_with(dir: &std::path::Path, count: u64) -> Node {
    let mut n = open_node(dir, small_config(), SEG);
    n.create_topic("t", 2);
    for i in 0..count {
        n.send(vec![msg("t", 0, i, "a", "", 1000 + i)]);
    }
    n.send(vec![
        msg("t", 1, 100, "a", "", 2000),
        msg("t", 1, 101, "a", "", 2001),
    ]);
    n
}

#[test]
fn fifo_locks_the_queue_redelivers_in_order_and_ack_unlocks() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 5);
    let first = recv(&mut n, fifo(1, 10_000));
    assert_eq!(got(&first), [(0, 1)]);
    // Locked: nothing new from queue 0, not even with room for more.
    assert!(recv(&mut n, fifo(4, 10_100)).is_empty());
    assert!(!deliverable(&n, Q0, 10_100, true));
    assert!(
        deliverable(&n, Q0, 10_100, false),
        "a non-FIFO check sees 1"
    );
    // Another queue of the same group is not locked.
    let q1 = recv(&mut n, receive("g", Q1, 4, 10_100, true));
    assert_eq!(got(&q1), [(0, 1), (1, 1)]);
    // Expired: the same message again, attempt 2, before anything new.
    assert!(deliverable(&n, Q0, 11_000, true));
    let again = recv(&mut n, fifo(4, 11_000));
    assert_eq!(got(&again), [(0, 2)]);
    assert!(recv(&mut n, fifo(4, 11_100)).is_empty());
    // Ack unlocks: the next batch in offset order.
    ack(&mut n, Q0, 0, again[0].handle);
    assert!(deliverable(&n, Q0, 11_200, true));
    let batch = recv(&mut n, fifo(2, 11_200));
    assert_eq!(got(&batch), [(1, 1), (2, 1)]);
    // Both expire; acking 1 alone keeps the lock (2 is in flight); 2 comes back alone.
    ack(&mut n, Q0, 1, batch[0].handle);
    assert!(!deliverable(&n, Q0, 12_100, true));
    assert!(recv(&mut n, fifo(4, 12_100)).is_empty());
    let two = recv(&mut n, fifo(4, 12_200));
    assert_eq!(got(&two), [(2, 2)]);
    ack(&mut n, Q0, 2, two[0].handle);
    assert_eq!(got(&recv(&mut n, fifo(4, 12_300))), [(3, 1), (4, 1)]);
    n.store.validate().expect("valid");
}

#[test]
fn several_expired_come_back_in_offset_order() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 4);
    assert_eq!(
        got(&recv(&mut n, fifo(3, 10_000))),
        [(0, 1), (1, 1), (2, 1)]
    );
    let back = recv(&mut n, fifo(2, 11_000));
    assert_eq!(got(&back), [(0, 2), (1, 2)], "batch size still bounds");
    let rest = recv(&mut n, fifo(4, 11_000));
    assert_eq!(got(&rest), [(2, 2)], "3 stays behind the lock");
}

#[test]
fn non_fifo_receives_are_unchanged() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut n = node_with(da.path(), 4);
    let plain = |now| receive("g", Q0, 1, now, false);
    assert_eq!(got(&recv(&mut n, plain(10_000))), [(0, 1)]);
    assert_eq!(got(&recv(&mut n, plain(10_100))), [(1, 1)], "concurrent");
    assert_eq!(got(&recv(&mut n, plain(11_000))), [(0, 2)]);
    // The same receives as FIFO on another store give a different, ordered answer.
    let mut m = node_with(db.path(), 4);
    assert_eq!(got(&recv(&mut m, fifo(1, 10_000))), [(0, 1)]);
    assert!(recv(&mut m, fifo(1, 10_100)).is_empty());
}

#[test]
fn parked_delayed_messages_do_not_lock_and_wait_behind_the_lock() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    let mut late = msg("t", 0, 0, "a", "", 1000);
    late.properties
        .insert(DELIVER_MS_PROPERTY.into(), "10500".into());
    n.send(vec![late]);
    n.send(vec![msg("t", 0, 1, "a", "", 1001)]);
    // 0 is parked (attempt 0): no lock, 1 goes out.
    let one = recv(&mut n, fifo(1, 10_000));
    assert_eq!(got(&one), [(1, 1)]);
    // 0 is due, but 1 is delivered and in flight: 0 waits.
    assert!(!deliverable(&n, Q0, 10_600, true));
    assert!(
        deliverable(&n, Q0, 10_600, false),
        "non-FIFO: the due one goes"
    );
    assert!(recv(&mut n, fifo(4, 10_600)).is_empty());
    ack(&mut n, Q0, 1, one[0].handle);
    assert!(deliverable(&n, Q0, 10_700, true));
    assert_eq!(got(&recv(&mut n, fifo(4, 10_700))), [(0, 1)]);
}

#[test]
fn replicas_agree_on_fifo_receives() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = node_with(da.path(), 12);
    let mut b = node_with(db.path(), 12);
    for step in 0..30u64 {
        let c = Command::Receive(receive("g", Q0, 2, 10_000 + step * 300, step % 3 != 0));
        let (ra, rb) = (a.propose(&c), b.propose(&c));
        assert_eq!(ra, rb, "{c:?}");
        if let ApplyResponse::Received(d) = ra {
            if let Some(first) = d.first().filter(|_| step % 2 == 0) {
                ack(&mut a, Q0, first.queue_offset.get(), first.handle);
                ack(&mut b, Q0, first.queue_offset.get(), first.handle);
            }
        }
    }
    assert_eq!(
        a.store.receive_state("g", "t", Q0),
        b.store.receive_state("g", "t", Q0)
    );
    a.store.validate().expect("valid");
}

#[test]
fn old_format_receive_entries_apply_as_non_fifo() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = node_with(d.path(), 3);
    let old = |n: &mut Node, now| {
        // The payload as written before the `flags` byte (body ends after the filter): a
        // FIFO one without its trailing flags byte.
        let mut p = Command::Receive(receive("g", Q0, 1, now, true))
            .encode()
            .expect("encode")
            .0
            .to_vec();
        assert_eq!(p.pop(), Some(0x01), "the flags byte");
        let body_len = (p.len() - 16) as u32;
        p[12..16].copy_from_slice(&body_len.to_le_bytes());
        let crc = crc32fast::hash(&p[8..]);
        p[4..8].copy_from_slice(&crc.to_le_bytes());
        let e = n.append_entry(raw_entry(n.term, n.next_index, p));
        match n.sm.apply_entry(&e).expect("apply") {
            ApplyResponse::Received(d) => d,
            other => panic!("old receive answered {other:?}"),
        }
    };
    assert_eq!(got(&old(&mut n, 10_000)), [(0, 1)]);
    assert_eq!(got(&old(&mut n, 10_100)), [(1, 1)], "not FIFO: not locked");
}
