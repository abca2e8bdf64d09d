use futures::StreamExt as _;
use http_body::Body as _;
use openraft::raft::AppendEntriesRequest;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::Payload;
use raftmq_raft_log::types::Vote;

use super::*;
use crate::network::codec;
use crate::network::framed::FramedBody;
use crate::network::split::tests::log_id;
use crate::network::split::tests::TestConfig;

/// A request body of the given frames, then the end.
fn body(frames: Vec<Bytes>) -> Body {
    Body::new(FramedBody::new(futures::stream::iter([frames])))
}

/// `message` as a gRPC message: prefix and bytes.
fn grpc(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// `bytes` cut at `cuts` (positions, ascending) into frames.
fn cut(bytes: &[u8], cuts: &[usize]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain([bytes.len()].iter()) {
        out.push(Bytes::copy_from_slice(&bytes[at..c]));
        at = c;
    }
    out
}

async fn messages(frames: Vec<Bytes>, max: usize) -> Vec<Result<Vec<u8>, Status>> {
    Messages::new(body(frames), max)
        .map(|m| m.map(|pieces| pieces.concat()))
        .collect()
        .await
}

fn request(payload: &[u8]) -> RaftRequest {
    RaftRequest {
        cluster_id: "c1".into(),
        from_node_id: 1,
        to_node_id: 2,
        codec: codec::CODEC as i32,
        payload: Bytes::copy_from_slice(payload),
    }
}

/// Messages come out whole however the body's frames cut them, prefixes included.
#[tokio::test]
async fn messages_come_out_whole_at_any_frame_cut() {
    let (a, b, c) = (vec![7u8; 300], Vec::new(), (0..=255u8).collect::<Vec<_>>());
    let stream: Vec<u8> = [grpc(&a), grpc(&b), grpc(&c)].concat();
    for first in 0..stream.len() {
        for second in [first, (first + 3).min(stream.len()), stream.len()] {
            let got = messages(cut(&stream, &[first, second]), 1 << 20).await;
            let got: Vec<Vec<u8>> = got.into_iter().map(|m| m.expect("decodes")).collect();
            assert_eq!(
                got,
                [a.clone(), b.clone(), c.clone()],
                "cut at {first}, {second}"
            );
        }
    }
}

/// A message's bytes are slices of the frames, not copies.
#[tokio::test]
async fn message_pieces_are_slices_of_the_frames() {
    let frames = vec![
        Bytes::from(grpc(&[])[..PREFIX].to_vec()),
        Bytes::from(vec![9u8; 5000]),
    ];
    let mut frames = frames;
    frames[0] = Bytes::from(vec![0, 0, 0, 0x13, 0x88]);
    let payload_at = frames[1].as_ptr();
    let mut m = Messages::new(body(frames), 1 << 20);
    let pieces = m.next().await.expect("a message").expect("decodes");
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].as_ptr(), payload_at);
    assert!(m.next().await.is_none());
}

/// What tonic refuses is refused the same way, and the stream ends there.
#[tokio::test]
async fn bad_framing_is_refused_as_tonic_refuses_it() {
    let too_long = messages(vec![Bytes::from(grpc(&[1; 11]))], 10).await;
    assert_eq!(too_long.len(), 1);
    let status = too_long[0].as_ref().expect_err("over the limit");
    assert_eq!(status.code(), tonic::Code::OutOfRange);
    assert!(
        status
            .message()
            .contains("found 11 bytes, the limit is: 10"),
        "{status:?}"
    );

    let mut compressed = grpc(b"x");
    compressed[0] = 1;
    let got = messages(vec![Bytes::from(compressed)], 10).await;
    assert_eq!(
        got[0].as_ref().expect_err("compressed").code(),
        tonic::Code::Internal
    );

    let truncated = grpc(b"hello");
    let got = messages(vec![Bytes::from(truncated[..7].to_vec())], 10).await;
    let status = got[0].as_ref().expect_err("cut short");
    assert_eq!(status.code(), tonic::Code::Internal);
    assert_eq!(status.message(), "Unexpected EOF decoding stream.");
    let got = messages(vec![Bytes::from_static(&[0, 0])], 10).await;
    assert!(got[0].is_err(), "a prefix cut short");
    assert!(messages(Vec::new(), 10).await.is_empty());
}

/// A request decodes to prost's fields, its payload as slices, at any cut.
#[test]
fn requests_decode_as_prost_decodes_them() {
    let req = request(&[3u8; 700]);
    let bytes = req.encode_to_vec();
    for at in 0..=bytes.len() {
        let parsed = parse_request(cut(&bytes, &[at])).expect("decodes");
        assert_eq!(parsed.payload.concat(), req.payload.to_vec(), "cut at {at}");
        assert_eq!(
            parsed.fields,
            RaftRequest {
                payload: Bytes::new(),
                ..req.clone()
            }
        );
    }
    // Unknown fields are skipped, as prost skips them.
    let mut with_unknown = bytes.clone();
    with_unknown.extend_from_slice(&[0x48, 0x05]);
    let parsed = parse_request(vec![Bytes::from(with_unknown)]).expect("decodes");
    assert_eq!(parsed.fields.to_node_id, 2);
    // Malformed: INVALID_ARGUMENT naming the message, as the tonic route answers.
    for bad in [
        &bytes[..bytes.len() - 1],
        &[0x2a, 0x05, 1][..],
        &[0x08][..],
        &[0x2b][..],
    ] {
        let status = parse_request(vec![Bytes::copy_from_slice(bad)]).expect_err("malformed");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bad:?}");
        assert!(status
            .message()
            .starts_with("malformed protobuf message (RaftRequest)"));
        assert!(
            RaftRequest::decode(bad).is_err(),
            "prost refuses {bad:?} too"
        );
    }
}

/// An AppendEntries request in pieces decodes to the same value, its payloads that lie in
/// one piece as slices of it.
#[test]
fn append_entries_decode_from_pieces() {
    let payloads = [
        vec![1u8; 9000],
        Vec::new(),
        vec![2u8; 40],
        vec![3u8; 12_000],
    ];
    let entries = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| LogEntry {
            log_id: log_id(i as u64 + 1),
            payload: Payload::Normal(AppPayload::from(p.clone())),
        })
        .collect::<Vec<_>>();
    let rpc = AppendEntriesRequest::<TestConfig> {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        entries,
        leader_commit: Some(log_id(4)),
    };
    let bytes = Bytes::from(codec::encode("r", &rpc).expect("encodes"));
    let whole: AppendEntriesRequest<TestConfig> =
        codec::decode_shared("r", &bytes).expect("decodes");
    // Where each payload lies in the encoding.
    let offsets: Vec<usize> = whole
        .entries
        .iter()
        .map(|e| match &e.payload {
            Payload::Normal(p) if !p.0.is_empty() => {
                p.0.as_ptr() as usize - bytes.as_ptr() as usize
            }
            _ => 0,
        })
        .collect();
    let inside = |piece: &Bytes, p: &[u8]| {
        let (s, a) = (piece.as_ptr() as usize, p.as_ptr() as usize);
        a >= s && a + p.len() <= s + piece.len()
    };
    for at in (0..=bytes.len()).step_by(97).chain([bytes.len() / 2]) {
        for second in [at, (at + 4000).min(bytes.len())] {
            let pieces = cut(&bytes, &[at, second]);
            let got: AppendEntriesRequest<TestConfig> =
                codec::decode_parts("r", &pieces).expect("decodes");
            assert_eq!(
                format!("{got:?}"),
                format!("{whole:?}"),
                "cut at {at}, {second}"
            );
            let got_bytes: Vec<Vec<u8>> = got.entries.iter().map(payload_of).collect();
            assert_eq!(got_bytes, payloads, "cut at {at}, {second}");
            for (entry, &off) in got.entries.iter().zip(&offsets) {
                let Payload::Normal(AppPayload(p)) = &entry.payload else {
                    continue;
                };
                if p.is_empty() {
                    continue;
                }
                let in_one = ![at, second].iter().any(|&c| off < c && c < off + p.len());
                let shared = pieces.iter().any(|piece| inside(piece, p));
                assert_eq!(shared, in_one, "cut at {at}, {second}, payload at {off}");
            }
        }
    }
    let short = cut(&bytes[..bytes.len() - 1], &[10]);
    assert!(codec::decode_parts::<AppendEntriesRequest<TestConfig>>("r", &short).is_err());
    let mut long = bytes.to_vec();
    long.push(0);
    let long = cut(&long, &[10]);
    assert!(codec::decode_parts::<AppendEntriesRequest<TestConfig>>("r", &long).is_err());
}

fn payload_of(entry: &LogEntry) -> Vec<u8> {
    match &entry.payload {
        Payload::Normal(p) => p.0.to_vec(),
        _ => Vec::new(),
    }
}

/// Every frame of `body` until its end.
async fn frames_of(mut body: ReplyBody) -> Vec<Frame<Bytes>> {
    let mut frames = Vec::new();
    while let Some(f) = futures::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        frames.push(f.expect("a frame"));
    }
    assert!(body.is_end_stream());
    frames
}

fn status_of(frame: &Frame<Bytes>) -> Status {
    Status::from_header_map(frame.trailers_ref().expect("trailers")).expect("a status")
}

/// The answer: replies ready together in one frame as gRPC messages, then `grpc-status` in
/// the trailers; an error ends it with its status after the replies before it.
#[tokio::test]
async fn answers_end_with_the_status_in_trailers() {
    let reply = |p: Vec<u8>| RaftReply { payload: p };
    let replies = futures::stream::iter([
        Ok(reply(vec![1, 2, 3])),
        Ok(reply(vec![4])),
        Err(Status::invalid_argument("bad request")),
        Ok(reply(vec![5])),
    ]);
    let frames = frames_of(ReplyBody::new(Box::pin(replies), 100)).await;
    assert_eq!(
        frames.len(),
        2,
        "the replies, then the trailers; nothing after the error"
    );
    let data = frames[0].data_ref().expect("data");
    let want = [
        grpc(&reply(vec![1, 2, 3]).encode_to_vec()),
        grpc(&reply(vec![4]).encode_to_vec()),
    ];
    assert_eq!(&data[..], &want.concat()[..]);
    let status = status_of(&frames[1]);
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "bad request");

    let frames = frames_of(ReplyBody::new(Box::pin(futures::stream::empty()), 100)).await;
    assert_eq!(frames.len(), 1);
    assert_eq!(status_of(&frames[0]).code(), tonic::Code::Ok);

    // Over the limit: the replies before it, then OUT_OF_RANGE.
    let big = futures::stream::iter([Ok(reply(vec![7])), Ok(reply(vec![0; 200]))]);
    let frames = frames_of(ReplyBody::new(Box::pin(big), 100)).await;
    assert_eq!(frames.len(), 2);
    assert_eq!(
        &frames[0].data_ref().expect("data")[..],
        &grpc(&reply(vec![7]).encode_to_vec())[..]
    );
    assert_eq!(status_of(&frames[1]).code(), tonic::Code::OutOfRange);

    // Many replies ready at once: frames of about YIELD_BYTES, all of them in order.
    let many = futures::stream::iter((0..100u8).map(move |i| Ok(reply(vec![i; 1000]))));
    let frames = frames_of(ReplyBody::new(Box::pin(many), 2000)).await;
    let data: Vec<u8> = frames
        .iter()
        .filter_map(|f| f.data_ref())
        .flatten()
        .copied()
        .collect();
    let want: Vec<u8> = (0..100u8)
        .flat_map(|i| grpc(&reply(vec![i; 1000]).encode_to_vec()))
        .collect();
    assert_eq!(data, want);
    assert!(
        frames.len() > 3 && frames.len() < 10,
        "{} frames",
        frames.len()
    );
    assert_eq!(
        status_of(frames.last().expect("trailers")).code(),
        tonic::Code::Ok
    );
}

/// A reply that is not ready yet leaves the body pending, and what was ready goes out first.
#[tokio::test]
async fn a_pending_reply_sends_what_is_ready() {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let mut body = ReplyBody::new(Box::pin(rx), 100);
    let poll = |body: &mut ReplyBody| {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        Pin::new(body).poll_frame(&mut cx)
    };
    assert!(poll(&mut body).is_pending());
    tx.unbounded_send(Ok(RaftReply { payload: vec![9] }))
        .expect("sent");
    match poll(&mut body) {
        Poll::Ready(Some(Ok(f))) => assert!(f.is_data()),
        other => panic!("{other:?}"),
    }
    assert!(poll(&mut body).is_pending());
    drop(tx);
    match poll(&mut body) {
        Poll::Ready(Some(Ok(f))) => assert_eq!(status_of(&f).code(), tonic::Code::Ok),
        other => panic!("{other:?}"),
    }
    assert!(matches!(poll(&mut body), Poll::Ready(None)));
}
