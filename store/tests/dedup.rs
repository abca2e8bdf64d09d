//! The dedup window of idempotent sends at apply: a retry is answered with the original
//! result and stores nothing; expiry by leader time and the entry cap; the window survives a
//! restart (checkpoint and replay) and a snapshot install; entries without the dedup trailer
//! (written before it existed) store every copy as before.

mod common;

use common::msg;
use common::open_node;
use common::small_config;
use common::transfer;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use raftmq_raft_log::types::LogIndex;
use raftmq_store::command::Command;
use raftmq_store::dedup::DedupParams;
use raftmq_store::dedup::CLIENT_MESSAGE_ID_PROPERTY;
use raftmq_store::dedup::PRODUCER_ID_PROPERTY;
use raftmq_store::dedup::SEQUENCE_PROPERTY;
use raftmq_store::message::Message;
use raftmq_store::ApplyResponse;
use raftmq_store::MessageAck;

const SEG: u64 = 64 * 1024;
const PARAMS: DedupParams = DedupParams {
    window_ms: 1_000,
    max_entries: 3,
};

/// Message `seq` of producer `p` on queue `q` at leader time `ts`.
fn idem(p: &str, seq: u64, q: u32, ts: u64) -> Message {
    let mut m = msg("t", q, seq, "", &format!("k{seq}"), ts);
    m.properties
        .insert(PRODUCER_ID_PROPERTY.into(), p.to_owned());
    m.properties
        .insert(SEQUENCE_PROPERTY.into(), seq.to_string());
    m
}

fn batch(messages: Vec<Message>) -> Command {
    Command::SendBatch {
        messages,
        auto_create_queues: None,
        dedup: Some(PARAMS),
    }
}

fn acks(r: ApplyResponse) -> Vec<MessageAck> {
    match r {
        ApplyResponse::Sent(a) => a,
        other => panic!("expected acks, got {other:?}"),
    }
}

/// Queue `q` of topic `t`: (min, max) offsets.
fn len(n: &common::Node, q: u32) -> u64 {
    let (min, max) = common::queue_offsets(n, "t", q);
    max - min
}

/// The ack a fresh send got, as its retry must see it.
fn as_retry(a: &MessageAck, log_id: raftmq_raft_log::types::LogId) -> MessageAck {
    MessageAck {
        duplicate_of: Some(log_id),
        ..a.clone()
    }
}

#[test]
fn retry_is_answered_with_the_original_result_and_stores_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 2);
    let e1 = n.append(&batch(vec![idem("p1", 0, 0, 100), idem("p1", 1, 1, 100)]));
    let first = acks(n.sm.apply_entry(&e1).expect("apply"));
    assert!(first.iter().all(|a| a.duplicate_of.is_none()));
    // The retry goes to another queue (the leader picked again) and a later entry: answered
    // with the original queue, offsets and log id; nothing dispatched, no key indexed.
    let retry = acks(n.propose(&batch(vec![idem("p1", 1, 0, 200)])));
    assert_eq!(retry, vec![as_retry(&first[1], e1.log_id)]);
    assert_eq!((len(&n, 0), len(&n, 1)), (1, 1));
    assert_eq!(
        n.store
            .query_by_key("t", "k1", 0, u64::MAX, 10)
            .expect("query")
            .len(),
        1
    );
    // Two copies in flight in one entry (and a fresh one between them): the second copy is
    // not stored.
    let e3 = n.append(&batch(vec![
        idem("p1", 2, 0, 300),
        idem("p2", 2, 0, 300),
        idem("p1", 2, 1, 300),
    ]));
    let a3 = acks(n.sm.apply_entry(&e3).expect("apply"));
    assert_eq!(a3[2], as_retry(&a3[0], e3.log_id));
    assert_ne!(
        a3[1].phys_offset, a3[0].phys_offset,
        "another producer's seq 2 is stored"
    );
    assert_eq!((len(&n, 0), len(&n, 1)), (3, 1));
    // A RocketMQ client message id is an identity too; another topic is another message.
    n.create_topic("u", 1);
    let rmq = |topic: &str| {
        let mut m = msg(topic, 0, 9, "", "", 400);
        m.properties
            .insert(CLIENT_MESSAGE_ID_PROPERTY.into(), "7F00000100002A9F".into());
        m
    };
    let e4 = n.append(&batch(vec![rmq("t")]));
    let a4 = acks(n.sm.apply_entry(&e4).expect("apply"));
    assert_eq!(
        acks(n.propose(&batch(vec![rmq("t")]))),
        vec![as_retry(&a4[0], e4.log_id)]
    );
    assert_eq!(
        acks(n.propose(&batch(vec![rmq("u")])))[0].duplicate_of,
        None
    );
    n.store.validate().expect("valid");
}

#[test]
fn window_expires_by_leader_time_and_evicts_the_oldest_over_the_cap() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    n.propose(&batch(vec![idem("p", 0, 0, 1_000)]));
    // 999 ms later: still a retry. 1000 ms after it: expired, stored again.
    assert!(acks(n.propose(&batch(vec![idem("p", 0, 0, 1_999)])))[0]
        .duplicate_of
        .is_some());
    assert!(acks(n.propose(&batch(vec![idem("p", 0, 0, 2_000)])))[0]
        .duplicate_of
        .is_none());
    assert_eq!(len(&n, 0), 2);
    // Cap 3: seq 1..=3 fill it (with the re-stored seq 0 the oldest goes), seq 4 evicts seq 1.
    for s in 1..=4 {
        n.propose(&batch(vec![idem("p", s, 0, 2_000)]));
    }
    assert_eq!(n.store.dedup_window_len(), 3);
    assert!(acks(n.propose(&batch(vec![idem("p", 1, 0, 2_001)])))[0]
        .duplicate_of
        .is_none());
    assert!(acks(n.propose(&batch(vec![idem("p", 4, 0, 2_001)])))[0]
        .duplicate_of
        .is_some());
    // Many short-lived producers: the window stays at its cap.
    for p in 0..50 {
        n.propose(&batch(vec![idem(&format!("short{p}"), 0, 0, 2_002)]));
    }
    assert_eq!(n.store.dedup_window_len(), 3);
}

#[test]
fn batches_without_the_trailer_store_every_copy() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    // As an entry written before dedup existed (or by a leader with it off).
    let old = Command::batch(vec![idem("p", 0, 0, 1), idem("p", 0, 0, 1)]);
    let a = acks(n.propose(&old));
    assert!(a.iter().all(|a| a.duplicate_of.is_none()));
    assert_eq!(len(&n, 0), 2);
    assert_eq!(n.store.dedup_window_len(), 0, "nothing remembered either");
}

#[test]
fn window_survives_restart_from_checkpoint_and_replay() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = open_node(d.path(), small_config(), SEG);
    n.create_topic("t", 1);
    let e0 = n.append(&batch(vec![idem("p", 0, 0, 10)]));
    let a0 = acks(n.sm.apply_entry(&e0).expect("apply"));
    n.store.checkpoint().expect("checkpoint");
    // Applied after the checkpoint: the restart replays it.
    let e1 = n.append(&batch(vec![idem("p", 1, 0, 20)]));
    let a1 = acks(n.sm.apply_entry(&e1).expect("apply"));
    let window = n.store.dedup_window();
    let next = n.next_index;
    n.log.halt_without_flush();
    drop(n);
    let mut n = open_node(d.path(), small_config(), SEG);
    n.next_index = next;
    let from = n.store.watermarks().applied.map_or(0, |l| l.index + 1);
    assert_eq!(from, e1.log_id.index, "the checkpoint covers e0 only");
    for e in n
        .log
        .read_entries(LogIndex::new(from), LogIndex::new(next))
        .expect("read")
    {
        n.sm.apply_entry(&e).expect("replay");
    }
    assert_eq!(n.store.dedup_window(), window);
    let r = acks(n.propose(&batch(vec![idem("p", 0, 0, 30), idem("p", 1, 0, 30)])));
    assert_eq!(
        r,
        vec![as_retry(&a0[0], e0.log_id), as_retry(&a1[0], e1.log_id)]
    );
    assert_eq!(len(&n, 0), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_travels_in_snapshots() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    a.create_topic("t", 1);
    let e = a.append(&batch(vec![idem("p", 5, 0, 10)]));
    let orig = acks(a.sm.apply_entry(&e).expect("apply"));
    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    assert_eq!(b.store.dedup_window(), a.store.dedup_window());
    // The installed node answers a retry exactly as the leader does.
    b.next_index = a.next_index;
    let retry = a.append(&batch(vec![idem("p", 5, 0, 20)]));
    b.append_entry(retry.clone());
    let ra = acks(a.sm.apply_entry(&retry).expect("apply"));
    let rb = acks(b.sm.apply_entry(&retry).expect("apply"));
    assert_eq!(ra, rb);
    assert_eq!(ra, vec![as_retry(&orig[0], e.log_id)]);
    // And after a restart of the installed node (checkpoint written by the install).
    let window = b.store.dedup_window();
    b.store.close().expect("close");
    drop(b);
    let b = open_node(db.path(), small_config(), SEG);
    assert_eq!(b.store.dedup_window(), window);
}
