//! Request validation on a single-node cluster: every bad request gets a precise status and
//! the node keeps serving.

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::NodeConfig;
use raftmq_proto::v1 as pb;
use tonic::Code;

/// The 20 ms `async` flush interval these tests always ran with (the harness default is 50).
fn flush_every_20ms(c: &mut NodeConfig) {
    c.log.flush_interval_ms = 20;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_precise_statuses() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync], |c| {
        flush_every_20ms(c);
        c.topic_auto_create = false;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    let base = c.clone();
    let send = |m: Option<pb::Message>| {
        let mut c = base.clone();
        async move { c.send(pb::SendRequest { message: m }).await }
    };

    let e = send(None).await.expect_err("missing message");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = send(Some(msg("bad topic!", b"x")))
        .await
        .expect_err("bad name");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = send(Some(msg("unknown", b"x")))
        .await
        .expect_err("unknown topic");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().contains("unknown"), "{e:?}");

    c.create_topic(pb::CreateTopicRequest {
        config: Some(pb::TopicConfig {
            name: "t".into(),
            queue_count: 2,
            perm: 0,
        }),
    })
    .await
    .expect("create");
    let e = c
        .create_topic(pb::CreateTopicRequest {
            config: Some(pb::TopicConfig {
                name: "t".into(),
                queue_count: 2,
                perm: 0,
            }),
        })
        .await
        .expect_err("exists");
    assert_eq!(e.code(), Code::AlreadyExists, "{e:?}");
    let e = send(Some(msg("t", &vec![0u8; 17 << 10])))
        .await
        .expect_err("too big");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("max-message-bytes"), "{e:?}");
    let mut m = msg("t", b"x");
    m.queue_id = Some(5);
    let e = send(Some(m)).await.expect_err("no such queue");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let mut m = msg("t", b"x");
    m.queue_id = Some(-7);
    assert_eq!(
        send(Some(m)).await.expect_err("negative").code(),
        Code::InvalidArgument
    );
    let batch: Vec<pb::Message> = (0..65).map(|_| msg("t", b"x")).collect();
    let e = c
        .send_batch(pb::SendBatchRequest { messages: batch })
        .await
        .expect_err("too many");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = c
        .send_batch(pb::SendBatchRequest { messages: vec![] })
        .await
        .expect_err("empty");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    let ok = send(Some(msg("t", b"ok")))
        .await
        .expect("valid send")
        .into_inner();
    let q = ok.result.expect("result").queue_id;

    let pull = |queue_id: i32, offset: u64| {
        let mut c = base.clone();
        async move {
            c.pull(pb::PullRequest {
                topic: "t".into(),
                queue_id,
                offset,
                ..Default::default()
            })
            .await
        }
    };
    let r = pull(q, 5).await.expect("pull").into_inner();
    assert_eq!(r.status, pb::PullStatus::OffsetTooBig as i32);
    let r = pull(q, 1).await.expect("pull").into_inner();
    assert_eq!(r.status, pb::PullStatus::NoNewMsg as i32);
    let r = pull(q, 0).await.expect("pull").into_inner();
    assert_eq!(r.status, pb::PullStatus::Found as i32);
    let e = pull(-1, 0).await.expect_err("negative queue");
    assert_eq!(e.code(), Code::InvalidArgument);
    let r = c
        .pull(pb::PullRequest {
            topic: "nope".into(),
            ..Default::default()
        })
        .await
        .expect("pull")
        .into_inner();
    assert_eq!(r.status, pb::PullStatus::NoSuchTopic as i32);
    // Long poll: times out with NO_NEW_MSG, bounded.
    let r = c
        .pull(pb::PullRequest {
            topic: "t".into(),
            queue_id: q,
            offset: 1,
            long_poll_timeout_ms: 200,
            ..Default::default()
        })
        .await
        .expect("long poll")
        .into_inner();
    assert_eq!(r.status, pb::PullStatus::NoNewMsg as i32);

    let e = c
        .query_by_id(pb::QueryByIdRequest { msg_id: 12345 })
        .await
        .expect_err("no message");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    c.commit_offset(pb::CommitOffsetRequest {
        group: "g".into(),
        topic: "t".into(),
        queue_id: 0,
        offset: 7,
    })
    .await
    .expect("commit offset");
    let f = c
        .fetch_offset(pb::FetchOffsetRequest {
            group: "g".into(),
            topic: "t".into(),
            queue_id: 0,
        })
        .await
        .expect("fetch")
        .into_inner();
    assert_eq!(f.offset, Some(7));

    let e = c
        .change_membership(pb::ChangeMembershipRequest {
            remove_voters: vec![1],
            ..Default::default()
        })
        .await
        .expect_err("last voter");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    let e = c
        .change_membership(pb::ChangeMembershipRequest {
            remove_voters: vec![9],
            ..Default::default()
        })
        .await
        .expect_err("unknown node");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    let e = c
        .transfer_leader(pb::TransferLeaderRequest {
            to_node_id: Some(9),
        })
        .await
        .expect_err("unknown node");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    let e = c
        .transfer_leader(pb::TransferLeaderRequest { to_node_id: None })
        .await
        .expect_err("no other voter");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");

    let e = c
        .change_membership(pb::ChangeMembershipRequest {
            add_voters: vec![5],
            ..Default::default()
        })
        .await
        .expect_err("not a learner");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    for (id, raft, client) in [(0, "h:1", "h:2"), (5, "nohost", "h:2"), (5, "h:1", "")] {
        let e = c
            .add_learner(pb::AddLearnerRequest {
                node_id: id,
                raft_addr: raft.into(),
                client_addr: client.into(),
                wait_caught_up: false,
            })
            .await
            .expect_err("bad learner");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    }
    let e = c
        .update_topic(pb::UpdateTopicRequest {
            name: "t".into(),
            queue_count: Some(1),
            perm: 0,
        })
        .await
        .expect_err("queues cannot shrink");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = c
        .delete_topic(pb::DeleteTopicRequest {
            name: "nope".into(),
        })
        .await
        .expect_err("no topic");
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    // Still serving.
    send(Some(msg("t", b"still"))).await.expect("node alive");
    cluster.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_does_not_reinitialise_and_keeps_data() {
    let mut cluster = TestCluster::start(&[FlushPolicy::Async], flush_every_20ms)
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    let r = c
        .send(pb::SendRequest {
            message: Some(msg("r", b"kept")),
        })
        .await
        .expect("send")
        .into_inner()
        .result
        .expect("result");
    cluster.stop(1).await.expect("clean shutdown");
    cluster.restart(1).await.expect("node restarts");
    cluster.wait_leader().await.expect("a leader");
    let mut c = cluster.grpc(1).await.expect("connect");
    let m = c
        .query_by_id(pb::QueryByIdRequest { msg_id: r.msg_id })
        .await
        .expect("message kept")
        .into_inner();
    assert_eq!(
        m.message.and_then(|m| m.message).map(|m| m.body.to_vec()),
        Some(b"kept".to_vec())
    );
    let r2 = c
        .send(pb::SendRequest {
            message: Some(msg("r", b"more")),
        })
        .await
        .expect("send after restart")
        .into_inner()
        .result
        .expect("result");
    assert!(r2.msg_id > r.msg_id, "{r2:?} after {r:?}");
    cluster.shutdown().await.expect("clean shutdown");
}

/// Bytes that are not a valid `SendRequest` (field 1 as a varint instead of a message).
#[derive(Clone, PartialEq, prost::Message)]
struct NotASendRequest {
    #[prost(uint64, tag = "1")]
    message: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_protobuf_is_refused_and_the_node_keeps_serving() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync], flush_every_20ms)
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", cluster.client_addr(1)))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<NotASendRequest, pb::SendReply>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/raftmq.v1.RaftMq/Send");
    let e = grpc
        .unary(
            tonic::Request::new(NotASendRequest { message: 5 }),
            path,
            codec,
        )
        .await
        .expect_err("malformed");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(
        e.message()
            .contains("malformed protobuf message (SendRequest)"),
        "{e:?}"
    );
    // On a SendStream: the good message before it is answered, then the stream ends with
    // INVALID_ARGUMENT naming the message type.
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<NotASendRequest, pb::SendStreamReply>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/raftmq.v1.RaftMq/SendStream");
    // Field 1 of SendStreamRequest is `seq` (a varint): a length-delimited field 2 holding
    // garbage makes the message undecodable.
    let good = NotASendRequest { message: 7 };
    let resp = grpc
        .streaming(
            tonic::Request::new(futures::stream::iter([good])),
            path.clone(),
            codec,
        )
        .await
        .expect("stream opens");
    let mut answers = resp.into_inner();
    let first = answers.message().await.expect("an answer").expect("one");
    assert_eq!(first.seq, 7);
    assert!(
        matches!(
            first.outcome,
            Some(pb::send_stream_reply::Outcome::Error(ref e)) if e.code == Code::InvalidArgument as i32
        ),
        "a request without a message is refused alone: {first:?}"
    );
    let bad = BadStreamRequest {
        message: vec![0xff, 0xff, 0xff],
    };
    let codec = tonic_prost::ProstCodec::<BadStreamRequest, pb::SendStreamReply>::default();
    grpc.ready().await.expect("ready");
    let resp = grpc
        .streaming(
            tonic::Request::new(futures::stream::iter([bad])),
            path,
            codec,
        )
        .await
        .expect("stream opens");
    let e = resp
        .into_inner()
        .message()
        .await
        .expect_err("undecodable request ends the stream");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("SendStreamRequest"), "{e:?}");

    let mut c = cluster.grpc(1).await.expect("connect");
    c.send(pb::SendRequest {
        message: Some(msg("after", b"ok")),
    })
    .await
    .expect("still serving");
    cluster.shutdown().await.expect("clean shutdown");
}

/// A `SendStreamRequest` whose `message` (field 2) holds bytes that are no protobuf message.
#[derive(Clone, PartialEq, prost::Message)]
struct BadStreamRequest {
    #[prost(bytes = "vec", tag = "2")]
    message: Vec<u8>,
}
