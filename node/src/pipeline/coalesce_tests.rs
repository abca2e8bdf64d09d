use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::LogId;
use raftmq_store::message::Message;
use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::MessageAck;
use tokio::time::Duration;
use tokio::time::Instant;

use super::*;

/// A group of `n` messages of `topic` with bodies `tag0`, `tag1`, ..., from `arrived`.
fn group(topic: &str, tag: &str, n: usize, arrived: Instant) -> SubmitBatch {
    SubmitBatch {
        messages: (0..n)
            .map(|i| Message::new(topic, QueueId::new(0), format!("{tag}{i}").into_bytes()))
            .collect(),
        wanted: vec![None; n],
        arrived,
        sends: n,
    }
}

fn bodies(b: &SubmitBatch) -> Vec<String> {
    b.messages()
        .iter()
        .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
        .collect()
}

fn run(e: Entered) -> (SubmitBatch, Running) {
    match e {
        Entered::Run(g, h) => (g, h),
        Entered::Wait(..) => panic!("expected a slot"),
    }
}

fn wait(e: Entered) -> oneshot::Receiver<Answer> {
    match e {
        Entered::Wait(rx, None) => rx,
        Entered::Wait(_, Some(_)) => panic!("expected to wait, not to go out full"),
        Entered::Run(..) => panic!("expected to wait"),
    }
}

fn ack(i: u64) -> MessageAck {
    MessageAck {
        msg_id: PhysOffset::new(i),
        topic: "t".into(),
        queue_id: QueueId::new(0),
        queue_offset: QueueOffset::new(i),
        phys_offset: PhysOffset::new(i),
        store_timestamp_ms: 0,
        duplicate_of: None,
    }
}

/// A coalescer whose sources wait however few messages are being stored.
fn eager(slots: usize, max_messages: usize, max_bytes: usize) -> Coalescer {
    let mut c = Coalescer::new(slots, max_messages, max_bytes);
    c.min_running_messages = 0;
    c
}

#[test]
fn other_sources_wait_and_merge_within_the_limits() {
    let c = eager(1, 5, 1 << 20);
    let (a, b, d) = (c.new_source(), c.new_source(), c.new_source());
    let t = Instant::now();
    let (_, held) = run(c.enter(a, group("t", "a", 2, t)));
    assert_eq!(held.holder, Holder::Solo(a));
    // A's own entry is all that runs: A's next group goes out at once.
    let (_, held2) = run(c.enter(a, group("t", "a", 1, t)));
    // B waits; D's groups join B's, whatever their topic; a group that would pass
    // max-batch-messages starts another waiting group.
    let _rb = wait(c.enter(b, group("t", "b", 2, t)));
    let _rd = wait(c.enter(d, group("t", "d", 2, t)));
    let _ro = wait(c.enter(d, group("o", "o", 1, t)));
    let _rbig = wait(c.enter(b, group("t", "x", 2, t)));
    // Once one waits, even A's own group queues behind (FIFO), joining the first with room.
    let _ra = wait(c.enter(a, group("t", "y", 1, t)));
    {
        let st = c.lock();
        assert_eq!((st.running, st.running_messages), (2, 3));
        let got: Vec<Vec<String>> = st.waiting.iter().map(|w| bodies(&w.batch)).collect();
        assert_eq!(
            got,
            vec![vec!["b0", "b1", "d0", "d1", "o0"], vec!["x0", "x1", "y0"]]
        );
    }
    // A slot frees: the oldest waiting group takes it, a mixed entry.
    let next = c.leave(held).expect("handed over");
    let mixed = next.running;
    assert_eq!((mixed.holder, mixed.messages), (Holder::Mixed, 5));
    assert_eq!(next.waiting.shares.len(), 3);
    let next = c.leave(held2).expect("handed over");
    let other = next.running;
    assert_eq!(next.waiting.shares.len(), 2);
    assert_eq!((other.holder, other.messages), (Holder::Mixed, 3));
    assert!(c.leave(mixed).is_none());
    // B's own group only: a solo entry.
    let _rb = wait(c.enter(b, group("t", "z", 1, t)));
    let solo = c.leave(other).expect("handed over").running;
    assert_eq!(solo.holder, Holder::Solo(b));
    assert!(c.leave(solo).is_none());
    let st = c.lock();
    let left = (
        st.running,
        st.running_messages,
        st.solo.len(),
        st.waiting.len(),
    );
    assert_eq!(left, (0, 0, 0, 0));
}

#[test]
fn bytes_bound_a_merge_and_zero_slots_never_wait() {
    let t = Instant::now();
    let one = message_bytes(&group("t", "a", 1, t).messages()[0]);
    let c = eager(1, 100, 2 * one);
    let (a, b) = (c.new_source(), c.new_source());
    let _ = run(c.enter(a, group("t", "a", 1, t)));
    let _waits = wait(c.enter(b, group("t", "b", 2, t)));
    let _waits = wait(c.enter(b, group("t", "c", 1, t)));
    assert_eq!(
        c.lock().waiting.len(),
        2,
        "the second would pass max-batch-bytes"
    );

    let off = eager(0, 100, 1 << 20);
    let (a, b) = (off.new_source(), off.new_source());
    for _ in 0..3 {
        let _ = run(off.enter(a, group("t", "a", 1, t)));
        let _ = run(off.enter(b, group("t", "b", 1, t)));
    }
    assert_eq!(off.lock().running, 6);
}

#[test]
fn nothing_waits_while_few_messages_are_being_stored() {
    let t = Instant::now();
    let c = Coalescer::new(1, 1024, 1 << 30);
    let (a, b) = (c.new_source(), c.new_source());
    let small = MERGE_MIN_RUNNING_MESSAGES / 2 - 1;
    let (_, first) = run(c.enter(a, group("t", "a", small, t)));
    let (_, second) = run(c.enter(b, group("t", "b", small, t)));
    // Now as many as the bound: the next source's group waits.
    let (_, third) = run(c.enter(a, group("t", "c", 2, t)));
    let _waits = wait(c.enter(b, group("t", "d", 1, t)));
    assert_eq!(c.lock().running_messages, 2 * small + 2);
    let next = c.leave(first).expect("handed over").running;
    assert_eq!(next.messages, 1);
    for done in [second, third, next] {
        assert!(c.leave(done).is_none());
    }
    let st = c.lock();
    assert_eq!((st.running, st.running_messages, st.solo.len()), (0, 0, 0));
}

#[test]
fn a_lone_source_merges_its_own_groups_only_with_many_messages_being_stored() {
    let t = Instant::now();
    let mut c = Coalescer::new(1, 1024, 1 << 30);
    c.full_messages = 64;
    let a = c.new_source();
    let n = LONE_MERGE_RUNNING_MESSAGES / 4;
    // Its own entries are all that runs: each group goes out at once until they hold the
    // bound, however few slots there are.
    let held: Vec<Running> = (0..4)
        .map(|i| run(c.enter(a, group("t", &format!("g{i}-"), n, t))).1)
        .collect();
    assert_eq!(c.lock().running_messages, LONE_MERGE_RUNNING_MESSAGES);
    // From there its groups wait and merge like another source's.
    let first = wait(c.enter(a, group("t", "x", 2, t)));
    let _second = wait(c.enter(a, group("t", "y", 3, t)));
    assert_eq!(c.lock().waiting.len(), 1);
    let next = c.leave(held[0]).expect("handed over");
    assert_eq!(
        bodies(&next.waiting.batch),
        vec!["x0", "x1", "y0", "y1", "y2"]
    );
    assert_eq!(next.running.holder, Holder::Solo(a));
    // Below the bound again its next group goes out at once.
    let (_, last) = run(c.enter(a, group("t", "z", 1, t)));
    answer(
        Err(Failed {
            error: NodeError::OutcomeUnknown("x".into()),
            unsent: None,
        }),
        next.waiting.shares,
    );
    assert!(first.blocking_recv().is_ok(), "each share answered");
    for done in held.into_iter().skip(1).chain([next.running, last]) {
        assert!(c.leave(done).is_none());
    }
    let st = c.lock();
    assert_eq!((st.running, st.running_messages, st.solo.len()), (0, 0, 0));
}

#[test]
fn a_full_waiting_group_goes_out_at_once() {
    let t = Instant::now();
    let mut c = eager(1, 100, 1 << 30);
    c.full_messages = 4;
    let (a, b, d) = (c.new_source(), c.new_source(), c.new_source());
    let (_, held) = run(c.enter(a, group("t", "a", 1, t)));
    let _rb = wait(c.enter(b, group("t", "b", 2, t)));
    let Entered::Wait(_rd, Some(full)) = c.enter(d, group("t", "d", 2, t)) else {
        panic!("expected the merged group to go out")
    };
    assert_eq!(bodies(&full.waiting.batch), vec!["b0", "b1", "d0", "d1"]);
    assert_eq!(full.running.holder, Holder::Mixed);
    {
        let st = c.lock();
        assert_eq!(
            (st.running, st.running_messages, st.waiting.len()),
            (2, 5, 0)
        );
    }
    // A group of its own that is full goes out too, behind nobody.
    let Entered::Wait(_ra, Some(own)) = c.enter(b, group("t", "e", 4, t)) else {
        panic!("expected the full group to go out")
    };
    assert_eq!(own.running.holder, Holder::Solo(b));
    for done in [held, full.running, own.running] {
        assert!(c.leave(done).is_none());
    }
    let st = c.lock();
    assert_eq!((st.running, st.running_messages, st.solo.len()), (0, 0, 0));
}

/// Three shares of one entry of 2 + 1 + 2 messages.
fn shares(t: Instant) -> (Vec<Share>, Vec<oneshot::Receiver<Answer>>) {
    let mut shares = Vec::new();
    let mut rxs = Vec::new();
    for (i, len) in [2usize, 1, 2].into_iter().enumerate() {
        let (tx, rx) = oneshot::channel();
        shares.push(Share {
            source: i as Source,
            len,
            arrived: t + Duration::from_millis(i as u64),
            sends: len,
            answer: tx,
        });
        rxs.push(rx);
    }
    (shares, rxs)
}

#[test]
fn each_share_gets_its_own_acks_messages_or_the_same_unknown_outcome() {
    let t = Instant::now();
    let log_id = LogId {
        leader_id: CommittedLeaderId::new(1),
        index: 7,
    };

    let (s, mut rxs) = shares(t);
    answer(
        Ok(Sent {
            log_id,
            acks: (0..5).map(ack).collect(),
        }),
        s,
    );
    let mut next = 0u64;
    for (rx, len) in rxs.iter_mut().zip([2u64, 1, 2]) {
        let (got, alone) = rx.try_recv().expect("answered");
        let Ok(sent) = got else {
            panic!("expected the entry")
        };
        let ids: Vec<u64> = sent.acks.iter().map(|a| a.msg_id.get()).collect();
        assert_eq!(ids, (next..next + len).collect::<Vec<_>>());
        assert!(!alone);
        next += len;
    }

    // Nothing stored: each share has its own messages back, with its arrival and sends.
    let (s, mut rxs) = shares(t);
    let mut merged = group("t", "m", 5, t);
    merged.sends = 5;
    answer(
        Err(Failed {
            error: NodeError::TopicNotFound("t".into()),
            unsent: Some(merged),
        }),
        s,
    );
    let want = [vec!["m0", "m1"], vec!["m2"], vec!["m3", "m4"]];
    for (i, rx) in rxs.iter_mut().enumerate() {
        let (got, _) = rx.try_recv().expect("answered");
        let Err(failed) = got else {
            panic!("expected a failure")
        };
        assert!(failed.error.stored_nothing());
        let own = failed.unsent.expect("messages back");
        assert_eq!(bodies(&own), want[i]);
        assert_eq!(own.arrived, t + Duration::from_millis(i as u64));
        assert_eq!(own.sends, own.len());
    }

    let (s, mut rxs) = shares(t);
    answer(
        Err(Failed {
            error: NodeError::Timeout("no quorum ack".into()),
            unsent: None,
        }),
        s,
    );
    for rx in &mut rxs {
        let (got, _) = rx.try_recv().expect("answered");
        let Err(failed) = got else {
            panic!("expected a failure")
        };
        assert!(matches!(&failed.error, NodeError::Timeout(m) if m == "no quorum ack"));
        assert!(failed.unsent.is_none());
    }

    // A group alone in its entry gets the outcome as it is.
    let (tx, mut rx) = oneshot::channel();
    let only = Share {
        source: 1,
        len: 1,
        arrived: t,
        sends: 1,
        answer: tx,
    };
    answer(
        Err(Failed {
            error: NodeError::TopicNotFound("t".into()),
            unsent: Some(group("t", "m", 1, t)),
        }),
        vec![only],
    );
    let (got, alone) = rx.try_recv().expect("answered");
    assert!(alone);
    let Err(failed) = got else {
        panic!("expected a failure")
    };
    assert!(matches!(failed.error, NodeError::TopicNotFound(_)));

    // A share whose caller left is skipped; the others still get theirs.
    let (s, mut rxs) = shares(t);
    drop(rxs.remove(1));
    answer(
        Err(Failed {
            error: NodeError::OutcomeUnknown("x".into()),
            unsent: None,
        }),
        s,
    );
    assert!(rxs.iter_mut().all(|rx| rx.try_recv().is_ok()));
}

#[test]
fn a_connection_is_one_source_apart_from_the_streams() {
    let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    let b: SocketAddr = "127.0.0.1:5001".parse().unwrap();
    let c = eager(1, 100, 1 << 20);
    let stream = c.new_source();
    let (sa, sb) = (connection_source(Some(a)), connection_source(Some(b)));
    assert_eq!(sa, connection_source(Some(a)));
    assert_ne!(sa, sb);
    assert_ne!(connection_source(None), sa);
    assert!([sa, sb, connection_source(None)]
        .iter()
        .all(|s| *s > stream));
    // One connection's requests do not wait for each other; another connection's do.
    let t = Instant::now();
    let (_, held) = run(c.enter(sa, group("t", "a", 1, t)));
    let (_, held2) = run(c.enter(sa, group("t", "a", 1, t)));
    let _rb = wait(c.enter(sb, group("t", "b", 1, t)));
    assert!(c.leave(held).is_some());
    assert!(c.leave(held2).is_none());
}
