//! Group commit across producers: SendStreams loading the leader at once share entries
//! (`max-group-proposals`), whatever their topics, and every message still gets its own
//! answer: the ack of its own record, or, for one producer's invalid message, its own error
//! while the others' messages are stored.

use std::collections::HashMap;
use std::collections::HashSet;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::raw::stream_sends;
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
                    Outcome::Error(e) => panic!("stream {stream} seq {seq}: {e:?}"),
                };
                let index = r.log_id.as_ref().expect("log id").index;
                streams_of_entry.entry(index).or_default().insert(stream);
                assert!(
                    queue_offsets.insert((topic(stream), r.queue_id, r.queue_offset)),
                    "two acks name {} queue {} offset {}",
                    topic(stream),
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
                assert_eq!(m.topic, topic(stream));
                assert_eq!(
                    m.body,
                    body(stream, seq),
                    "the ack of seq {seq} names its own record"
                );
                assert_eq!(
                    (stored.queue_id, stored.queue_offset),
                    (r.queue_id, r.queue_offset)
                );
                assert!(!r.duplicate);
            }
        }
        for (seq, o) in bad.await.expect("joined") {
            match o {
                Outcome::Error(e) => assert_eq!(e.code, Code::InvalidArgument as i32, "{e:?}"),
                Outcome::Result(r) => panic!("bad seq {seq} stored: {r:?}"),
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
