//! Group commit across producers: SendStreams, and unary requests of several connections,
//! loading the leader at once share entries (`max-group-proposals`), whatever their topics,
//! and every message still gets its own answer: the ack of its own record, or, for one
//! producer's invalid message, its own error while the others' messages are stored.

use std::collections::HashMap;
use std::collections::HashSet;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::raw::read_all;
use cluster_tests::raw::stream_sends;
use cluster_tests::raw::GrpcClient;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::send_stream_reply::Outcome;
use tonic::Code;

const STREAMS: u64 = 4;
const PER_STREAM: u64 = 150;

/// Stream `stream`'s topic: two topics, so merged entries mix them.
fn topic(stream: u64) -> &'static str {
    if stream.is_multiple_of(2) {
        "orders"
    } else {
        "audit"
    }
}

fn body(stream: u64, seq: u64) -> Vec<u8> {
    format!("stream {stream} message {seq}").into_bytes()
}

/// Checks that the ack `r` names a queue offset no other ack named and the record of `topic`
/// with `body`.
async fn check_ack(
    reader: &mut GrpcClient,
    queue_offsets: &mut HashSet<(&'static str, i32, u64)>,
    r: &pb::SendResult,
    topic: &'static str,
    body: &[u8],
) {
    assert!(
        queue_offsets.insert((topic, r.queue_id, r.queue_offset)),
        "two acks name {topic} queue {} offset {}",
        r.queue_id,
        r.queue_offset
    );
    let stored = reader
        .query_by_id(pb::QueryByIdRequest { msg_id: r.msg_id })
        .await
        .expect("stored")
        .into_inner()
        .message
        .expect("message");
    let m = stored.message.expect("body");
    assert_eq!(m.topic, topic);
    assert_eq!(m.body, body, "the ack names its own record");
    assert_eq!(
        (stored.queue_id, stored.queue_offset),
        (r.queue_id, r.queue_offset)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_share_entries_and_each_message_keeps_its_own_ack() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        assert_eq!(c.max_group_proposals, 1, "the default merges");
    })
    .await
    .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let mut reader = cluster.grpc(leader).await.expect("connect");
    let mut merged = false;
    // Merging needs one stream's group to arrive while another's entry is being stored: as a
    // rule it does at once; a few rounds make a slow machine's split arrivals harmless.
    for round in 0..5u64 {
        let mut sends = Vec::new();
        for s in 0..STREAMS {
            let stream = round * STREAMS + s;
            let reqs = (0..PER_STREAM)
                .map(|seq| pb::SendStreamRequest {
                    seq,
                    message: Some(msg(topic(stream), &body(stream, seq))),
                    batch: None,
                })
                .collect();
            let mut c = cluster.grpc(leader).await.expect("connect");
            sends.push(tokio::spawn(async move {
                (stream, stream_sends(&mut c, reqs).await)
            }));
        }
        // A producer whose every message names a queue the topic does not have.
        let bad: Vec<pb::SendStreamRequest> = (0..PER_STREAM / 4)
            .map(|seq| {
                let mut m = msg("orders", b"bad queue");
                m.queue_id = Some(99);
                pb::SendStreamRequest {
                    seq,
                    message: Some(m),
                    batch: None,
                }
            })
            .collect();
        let mut c = cluster.grpc(leader).await.expect("connect");
        let bad = tokio::spawn(async move { stream_sends(&mut c, bad).await });
        let mut streams_of_entry: HashMap<u64, HashSet<u64>> = HashMap::new();
        let mut queue_offsets = HashSet::new();
        for t in sends {
            let (stream, got) = t.await.expect("joined");
            for (seq, o) in got {
                let r = match o {
                    Outcome::Result(r) => r,
                    o => panic!("stream {stream} seq {seq}: {o:?}"),
                };
                let index = r.log_id.as_ref().expect("log id").index;
                streams_of_entry.entry(index).or_default().insert(stream);
                check_ack(
                    &mut reader,
                    &mut queue_offsets,
                    &r,
                    topic(stream),
                    &body(stream, seq),
                )
                .await;
                assert!(!r.duplicate);
            }
        }
        for (seq, o) in bad.await.expect("joined") {
            match o {
                Outcome::Error(e) => assert_eq!(e.code, Code::InvalidArgument as i32, "{e:?}"),
                o => panic!("bad seq {seq} stored: {o:?}"),
            }
        }
        merged = streams_of_entry
            .values()
            .any(|s| s.iter().map(|x| topic(*x)).collect::<HashSet<_>>().len() > 1);
        if merged {
            break;
        }
    }
    assert!(
        merged,
        "no entry held the messages of two topics' streams in 5 rounds"
    );
    cluster.shutdown().await.expect("shutdown");
}

const CONNECTIONS: u64 = 4;
const BATCHES: u64 = 8;
const BATCH: u64 = 16;

/// Unary `SendBatch` requests of several connections loading the leader at once share
/// entries too, and each request stays whole: its messages in one entry, in order, stored
/// together or not at all. A request with one bad message is refused as a whole (its good
/// message is not stored), while the requests it shared an entry with are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_of_several_connections_share_entries_and_each_stays_whole() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        c.default_queue_count = 4;
    })
    .await
    .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let mut reader = cluster.grpc(leader).await.expect("connect");
    for round in 0..5u64 {
        let mut sends = Vec::new();
        for conn in 0..CONNECTIONS {
            // One connection per producer: a producer's own requests never wait for each
            // other, another's do.
            let c = cluster.grpc(leader).await.expect("connect");
            for b in 0..BATCHES {
                let batch = (round * CONNECTIONS + conn) * BATCHES + b;
                let messages = (0..BATCH)
                    .map(|seq| msg(topic(batch), &body(batch, seq)))
                    .collect();
                let mut c = c.clone();
                sends.push(tokio::spawn(async move {
                    let req = pb::SendBatchRequest { messages };
                    (conn, batch, c.send_batch(req).await)
                }));
            }
        }
        // A producer whose batches each hold one good message and one naming a queue the
        // topic does not have.
        let bad_conn = cluster.grpc(leader).await.expect("connect");
        let bad: Vec<_> = (0..BATCHES)
            .map(|b| {
                let mut wrong = msg("orders", b"bad queue");
                wrong.queue_id = Some(99);
                let good = msg("orders", format!("round {round} bad batch {b}").as_bytes());
                let mut c = bad_conn.clone();
                tokio::spawn(async move {
                    let req = pb::SendBatchRequest {
                        messages: vec![good, wrong],
                    };
                    c.send_batch(req).await
                })
            })
            .collect();
        let mut connections_of_entry: HashMap<u64, HashSet<u64>> = HashMap::new();
        let mut queue_offsets = HashSet::new();
        for t in sends {
            let (conn, batch, reply) = t.await.expect("joined");
            let results = reply
                .unwrap_or_else(|e| panic!("batch {batch}: {e:?}"))
                .into_inner()
                .results;
            assert_eq!(results.len() as u64, BATCH, "one result per message");
            let index = results[0].log_id.as_ref().expect("log id").index;
            connections_of_entry.entry(index).or_default().insert(conn);
            let mut last_offset_of_queue = HashMap::new();
            for (seq, r) in results.iter().enumerate() {
                let at = r.log_id.as_ref().expect("log id").index;
                assert_eq!(at, index, "batch {batch} seq {seq} in another entry");
                if let Some(prev) = last_offset_of_queue.insert(r.queue_id, r.queue_offset) {
                    assert!(prev < r.queue_offset, "batch {batch} out of order");
                }
                check_ack(
                    &mut reader,
                    &mut queue_offsets,
                    r,
                    topic(batch),
                    &body(batch, seq as u64),
                )
                .await;
            }
        }
        for t in bad {
            let e = t
                .await
                .expect("joined")
                .expect_err("a bad batch is refused");
            assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        }
        let prefix = format!("round {round} bad batch");
        let orders = read_all(&mut reader, "orders", 4).await.expect("read");
        assert!(
            !orders.iter().any(|m| m.3.starts_with(prefix.as_bytes())),
            "a refused batch's good message was stored"
        );
        if connections_of_entry.values().any(|c| c.len() > 1) {
            cluster.shutdown().await.expect("shutdown");
            return;
        }
    }
    panic!("no entry held the batches of two connections in 5 rounds");
}

fn batch_of(tag: &str, n: u64) -> pb::SendBatchRequest {
    pb::SendBatchRequest {
        messages: (0..n)
            .map(|i| msg("orders", format!("{tag} {i}").as_bytes()))
            .collect(),
    }
}

/// Checks that a batch's results name its messages in order, all in one entry.
async fn check_batch(
    reader: &mut GrpcClient,
    queue_offsets: &mut HashSet<(&'static str, i32, u64)>,
    results: &[pb::SendResult],
    tag: &str,
    n: u64,
) {
    assert_eq!(results.len() as u64, n, "{results:?}");
    let entries: HashSet<_> = results.iter().map(|r| r.log_id).collect();
    assert_eq!(entries.len(), 1, "one entry: {results:?}");
    for (i, r) in results.iter().enumerate() {
        let body = format!("{tag} {i}");
        check_ack(reader, queue_offsets, r, "orders", body.as_bytes()).await;
    }
}

/// Batches on a `SendStream` are answered as `SendBatch` answers them: each whole in one
/// entry, its results in order, beside single sends on the same stream; a batch with one bad
/// message is refused whole, as is a request with both `message` and `batch` or an empty
/// batch; a follower relays a batch and its answer names the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_on_a_send_stream_are_answered_as_send_batch() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        c.default_queue_count = 4;
    })
    .await
    .expect("cluster starts");
    let (leader, follower) = cluster.leader_and_follower().await.expect("roles");
    let mut reader = cluster.grpc(leader).await.expect("connect");
    let mut queue_offsets = HashSet::new();
    let mut bad = batch_of("bad", 3);
    bad.messages[1].queue_id = Some(99);
    let request = |seq, message, batch| pb::SendStreamRequest {
        seq,
        message,
        batch,
    };
    let reqs = vec![
        request(1, None, Some(batch_of("one", 5))),
        request(2, Some(msg("orders", b"single")), None),
        request(3, None, Some(bad)),
        request(4, Some(msg("orders", b"both")), Some(batch_of("both", 2))),
        request(5, None, Some(pb::SendBatchRequest { messages: vec![] })),
    ];
    let mut lead = cluster.grpc(leader).await.expect("connect");
    let mut got = stream_sends(&mut lead, reqs).await;
    match got.remove(&1) {
        Some(Outcome::Batch(b)) => {
            check_batch(&mut reader, &mut queue_offsets, &b.results, "one", 5).await
        }
        o => panic!("seq 1: {o:?}"),
    }
    match got.remove(&2) {
        Some(Outcome::Result(r)) => {
            check_ack(&mut reader, &mut queue_offsets, &r, "orders", b"single").await
        }
        o => panic!("seq 2: {o:?}"),
    }
    for seq in [3, 4, 5] {
        match got.remove(&seq) {
            Some(Outcome::Error(e)) => {
                assert_eq!(e.code, Code::InvalidArgument as i32, "seq {seq}: {e:?}");
                assert!(e.detail.is_some_and(|d| d.not_applied), "seq {seq}");
            }
            o => panic!("seq {seq}: {o:?}"),
        }
    }

    let mut relay = cluster.grpc(follower).await.expect("connect");
    let reqs = vec![request(1, None, Some(batch_of("relayed", 3)))];
    let mut answers = relay
        .send_stream(futures::stream::iter(reqs))
        .await
        .expect("stream")
        .into_inner();
    let a = answers.message().await.expect("answer").expect("one");
    assert_eq!(a.leader_addr, cluster.client_addr(leader));
    match a.outcome {
        Some(Outcome::Batch(b)) => {
            check_batch(&mut reader, &mut queue_offsets, &b.results, "relayed", 3).await
        }
        o => panic!("relayed: {o:?}"),
    }
    drop(answers);

    // Nothing of the refused requests was stored.
    let stored = read_all(&mut reader, "orders", 4).await.expect("read");
    assert_eq!(stored.len(), 5 + 1 + 3, "{stored:?}");
    cluster.shutdown().await.expect("shutdown");
}
