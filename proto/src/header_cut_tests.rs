use std::collections::VecDeque;

use crate::codec::StrictProstCodec;
use crate::v1::RaftRequest;
use futures::StreamExt;
use http_body::Body as _;
use tonic::codec::Codec;

use super::*;

/// A body handing out `frames` as DATA frames, then `trailers` if any.
struct Frames {
    frames: VecDeque<Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        Poll::Ready(match this.frames.pop_front() {
            Some(data) => Some(Ok(Frame::data(data))),
            None => this.trailers.take().map(|t| Ok(Frame::trailers(t))),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && self.trailers.is_none()
    }
}

/// A deterministic pseudo-random sequence (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// gRPC messages of `sizes` bytes (each filled with its index), framed, as one stream.
fn stream_of(sizes: &[u32]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        out.push(0);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend(std::iter::repeat_n(i as u8, size as usize));
    }
    out
}

/// Where each prefix of a message of `CUT_FROM` bytes or more ends in `stream_of(sizes)`.
fn large_prefix_ends(sizes: &[u32]) -> Vec<usize> {
    let mut at = 0;
    let mut ends = Vec::new();
    for &size in sizes {
        at += 5;
        if size >= CUT_FROM {
            ends.push(at);
        }
        at += size as usize;
    }
    ends
}

/// `stream` in frames ending at `bounds` (ascending, each inside the stream).
fn frames_at(stream: &[u8], bounds: &[usize]) -> VecDeque<Bytes> {
    let mut frames = VecDeque::new();
    let mut from = 0;
    for &b in bounds.iter().chain(std::iter::once(&stream.len())) {
        frames.push_back(Bytes::copy_from_slice(&stream[from..b]));
        from = b;
    }
    frames
}

/// Every frame `HeaderCut` hands out over `frames` (and the trailers, if any).
async fn cut_frames(frames: VecDeque<Bytes>) -> (Vec<Bytes>, Option<http::HeaderMap>) {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let mut cut = HeaderCut::new(Body::new(Frames {
        frames,
        trailers: Some(trailers),
    }));
    let mut out = Vec::new();
    let mut got_trailers = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut cut).poll_frame(cx)).await {
        match frame.expect("a frame").into_data() {
            Ok(data) => out.push(data),
            Err(frame) => got_trailers = frame.into_trailers().ok(),
        }
    }
    assert!(cut.is_end_stream());
    (out, got_trailers)
}

#[tokio::test]
async fn frames_end_after_each_large_prefix_and_nowhere_else_new() {
    let mut rng = Rng(7);
    for round in 0..200 {
        let sizes: Vec<u32> = (0..1 + rng.below(12))
            .map(|_| match rng.below(4) {
                0 => 0,
                1 => rng.below(u64::from(CUT_FROM)) as u32,
                2 => CUT_FROM,
                _ => CUT_FROM + rng.below(40_000) as u32,
            })
            .collect();
        let stream = stream_of(&sizes);
        let mut bounds: Vec<usize> = (0..rng.below(8))
            .map(|_| 1 + rng.below(stream.len() as u64 - 1) as usize)
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let (out, trailers) = cut_frames(frames_at(&stream, &bounds)).await;
        assert_eq!(
            out.concat(),
            stream,
            "round {round}: the bytes are the stream's"
        );
        assert_eq!(
            trailers.and_then(|t| t.get("grpc-status").cloned()),
            Some(http::HeaderValue::from_static("0")),
            "round {round}: the trailers pass through"
        );
        let mut ends: Vec<usize> = out
            .iter()
            .scan(0, |at, f| {
                *at += f.len();
                Some(*at)
            })
            .collect();
        ends.pop(); // the stream's end
        ends.retain(|e| !bounds.contains(e));
        ends.dedup();
        let mut wanted = large_prefix_ends(&sizes);
        wanted.retain(|e| !bounds.contains(e) && *e != stream.len());
        assert_eq!(
            ends, wanted,
            "round {round}: sizes {sizes:?}, bounds {bounds:?}"
        );
    }
}

#[tokio::test]
async fn a_prefix_split_across_frames_is_still_found() {
    let sizes = [10, 5000, 3, 9000];
    let stream = stream_of(&sizes);
    // Each frame one byte: every prefix straddles frames.
    let bounds: Vec<usize> = (1..stream.len()).collect();
    let (out, _) = cut_frames(frames_at(&stream, &bounds)).await;
    assert_eq!(out.concat(), stream);
    assert!(
        out.iter().all(|f| f.len() == 1),
        "one-byte frames stay one byte"
    );
}

#[tokio::test]
async fn a_truncated_or_empty_stream_passes_through() {
    let mut stream = stream_of(&[8000, 8000]);
    stream.truncate(8005 + 3); // the second prefix cut short
    let (out, _) = cut_frames(frames_at(&stream, &[])).await;
    assert_eq!(out.concat(), stream);
    assert_eq!(out.first().map(Bytes::len), Some(5));
    let (out, trailers) = cut_frames(VecDeque::new()).await;
    assert!(out.is_empty());
    assert!(trailers.is_some());
}

#[tokio::test]
async fn tonic_decodes_what_the_cut_body_hands_it() {
    let requests: Vec<RaftRequest> = [0usize, 100, 6000, 70_000, 4095, 4096, 130_000, 1]
        .iter()
        .enumerate()
        .map(|(i, &n)| RaftRequest {
            cluster_id: format!("c{i}"),
            from_node_id: i as u64,
            to_node_id: 3,
            codec: 0,
            payload: vec![i as u8; n].into(),
        })
        .collect();
    let mut stream = Vec::new();
    for r in &requests {
        let bytes = prost::Message::encode_to_vec(r);
        stream.push(0);
        stream.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        stream.extend_from_slice(&bytes);
    }
    // The whole stream in one frame, then in frames of 1000 bytes.
    for bounds in [vec![], (1..stream.len() / 1000).map(|i| i * 1000).collect()] {
        let body = HeaderCut::new(Body::new(Frames {
            frames: frames_at(&stream, &bounds),
            trailers: None,
        }));
        let decoder = StrictProstCodec::<(), RaftRequest>::default().decoder();
        let decoded: Vec<RaftRequest> = tonic::Streaming::new_request(decoder, body, None, None)
            .map(|r| r.expect("a request"))
            .collect()
            .await;
        assert_eq!(decoded, requests);
    }
}
