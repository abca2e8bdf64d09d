//! Keeping every AppendEntries message under the gRPC size limit.
//!
//! openraft bounds a request by entry count (`max_payload_entries`), not bytes, and one entry
//! can be a whole send batch. A request whose encoding exceeds the limit is cut into
//! consecutive parts (each part's `prev_log_id` is the previous part's last entry, and its
//! `leader_commit` is capped at its own last entry), which a follower accepts exactly as if
//! the leader had sent them one after another. The answers are merged back into one.
//!
//! Invariant: the parts carry the original entries, in order, each exactly once.

use openraft::raft::AppendEntriesRequest;
use openraft::raft::AppendEntriesResponse;
use openraft::raft::StreamAppendResult;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::Payload;

use super::append_request::SHARE_MIN_BYTES;
use super::codec;
use super::codec::CodecError;

/// One part of an AppendEntries request: encoded (`P = Vec<u8>`), or a [`Deferred`] one.
#[derive(Debug)]
pub(super) struct Part<P = Vec<u8>> {
    /// The encoded part, or the part and its encoded size.
    pub(super) payload: P,
    /// Its last entry's log id (its `prev_log_id` when it has no entries).
    pub(super) last: Option<LogId>,
}

impl<P> Part<P> {
    /// The same part with its payload turned by `f`.
    pub(super) fn map<Q>(self, f: impl FnOnce(P) -> Q) -> Part<Q> {
        Part {
            payload: f(self.payload),
            last: self.last,
        }
    }
}

/// A part not encoded yet, and the exact size of its encoding: the stream encodes it
/// straight into the gRPC frame ([`super::append_request`]).
#[derive(Debug)]
pub(super) struct Deferred<C: LogTypes> {
    req: AppendEntriesRequest<C>,
    len: usize,
}

impl<C: LogTypes> super::append_request::EncodeLater for Deferred<C> {
    fn len(&self) -> usize {
        self.len
    }

    fn encode_to(&self, sink: &mut dyn FnMut(&[u8])) {
        let mut written = 0;
        let mut count = |b: &[u8]| {
            written += b.len();
            sink(b)
        };
        codec::encode_to("AppendEntriesRequest", &self.req, &mut count)
            .expect("the size pass encoded the same request with the same serializer");
        assert_eq!(
            written, self.len,
            "the encoding is as long as its size pass said"
        );
    }

    /// Each entry's payload (postcard writes a byte string as one piece, after its length) is
    /// a share of the entry's buffer; the rest is copied.
    fn encode_chunks(&self, out: &mut super::append_request::Chunks) {
        let mut payloads = self.req.entries.iter().filter_map(|e| match &e.payload {
            Payload::Normal(app) if app.0.len() >= SHARE_MIN_BYTES => Some(&app.0),
            _ => None,
        });
        let mut next = payloads.next();
        self.encode_to(&mut |piece| match next {
            Some(b) if piece.as_ptr() == b.as_ptr() && piece.len() == b.len() => {
                out.share(b.clone());
                next = payloads.next();
            }
            _ => out.copy(piece),
        });
    }
}

/// Bytes reserved for the `RaftRequest` envelope and gRPC framing.
const ENVELOPE_BYTES: usize = 64 << 10;

/// Encodes `req` into parts of at most `max_message_bytes` (minus the envelope) each; one
/// part when it fits. A single entry larger than that is sent alone (and refused by the
/// receiver's limit: node validation keeps batches smaller).
pub(super) fn encode_append<C: LogTypes>(
    req: AppendEntriesRequest<C>,
    max_message_bytes: usize,
) -> Result<Vec<Part>, CodecError> {
    let limit = max_message_bytes.saturating_sub(ENVELOPE_BYTES).max(1);
    let mut out = Vec::new();
    encode_into(req, limit, &mut out)?;
    Ok(out)
}

/// [`encode_append`]'s parts, measured but not encoded (postcard's size pass only counts a
/// byte string): each is encoded once, where the stream writes its frame.
pub(super) fn plan_append<C: LogTypes>(
    req: AppendEntriesRequest<C>,
    max_message_bytes: usize,
) -> Result<Vec<Part<Deferred<C>>>, CodecError> {
    let limit = max_message_bytes.saturating_sub(ENVELOPE_BYTES).max(1);
    let mut out = Vec::new();
    plan_into(req, limit, &mut out)?;
    Ok(out)
}

fn plan_into<C: LogTypes>(
    req: AppendEntriesRequest<C>,
    limit: usize,
    out: &mut Vec<Part<Deferred<C>>>,
) -> Result<(), CodecError> {
    let last = req.entries.last().map(|e| e.log_id).or(req.prev_log_id);
    let len = codec::encoded_size("AppendEntriesRequest", &req)?;
    if len <= limit || req.entries.len() <= 1 {
        out.push(Part {
            payload: Deferred { req, len },
            last,
        });
        return Ok(());
    }
    let (first, second) = halve(req);
    plan_into(first, limit, out)?;
    plan_into(second, limit, out)
}

fn encode_into<C: LogTypes>(
    req: AppendEntriesRequest<C>,
    limit: usize,
    out: &mut Vec<Part>,
) -> Result<(), CodecError> {
    let last = req.entries.last().map(|e| e.log_id).or(req.prev_log_id);
    let hint = size_hint(&req.entries);
    // A request that plainly does not fit is cut before it is encoded: encoding the whole
    // and then each half again cost three encodings of a catch-up's bytes.
    if hint <= limit || req.entries.len() <= 1 {
        let payload = codec::encode_sized("AppendEntriesRequest", &req, hint)?;
        if payload.len() <= limit || req.entries.len() <= 1 {
            out.push(Part { payload, last });
            return Ok(());
        }
    }
    let (first, second) = halve(req);
    encode_into(first, limit, out)?;
    encode_into(second, limit, out)
}

/// `req` cut into two consecutive requests of half its entries each (at least two).
fn halve<C: LogTypes>(
    req: AppendEntriesRequest<C>,
) -> (AppendEntriesRequest<C>, AppendEntriesRequest<C>) {
    let AppendEntriesRequest {
        vote,
        prev_log_id,
        mut entries,
        leader_commit,
    } = req;
    let tail = entries.split_off(entries.len() / 2);
    let first_last = entries.last().map(|e| e.log_id);
    let first = AppendEntriesRequest::<C> {
        vote,
        prev_log_id,
        entries,
        leader_commit: leader_commit.min(first_last),
    };
    let second = AppendEntriesRequest::<C> {
        vote,
        prev_log_id: first_last,
        entries: tail,
        leader_commit,
    };
    (first, second)
}

/// About the encoded size of a request with `entries`: their payloads plus a little per
/// entry (log id, kind, length varint) and for the request's own fields.
pub(super) fn size_hint(entries: &[LogEntry]) -> usize {
    let payloads: usize = entries
        .iter()
        .map(|e| match &e.payload {
            Payload::Normal(app) => app.0.len() + 32,
            _ => 256,
        })
        .sum();
    payloads + 64
}

/// Merges the answers to the parts `[0, i]` of one request (unary path): success only when
/// every part succeeded; a later part's failure keeps what the earlier parts achieved.
pub(super) fn merge_unary<C: LogTypes>(
    i: usize,
    prev_part_last: Option<LogId>,
    resp: AppendEntriesResponse<C>,
) -> Result<(), AppendEntriesResponse<C>> {
    match resp {
        AppendEntriesResponse::Success => Ok(()),
        other if i == 0 => Err(other),
        AppendEntriesResponse::HigherVote(v) => Err(AppendEntriesResponse::HigherVote(v)),
        AppendEntriesResponse::PartialSuccess(p) => Err(AppendEntriesResponse::PartialSuccess(p)),
        AppendEntriesResponse::Conflict => {
            Err(AppendEntriesResponse::PartialSuccess(prev_part_last))
        }
    }
}

/// Merges the stream results of one request's parts (stream path). Returns the result to
/// report and whether the stream must end (a part failed after earlier parts succeeded).
pub(super) fn merge_stream<C: LogTypes>(
    results: &[StreamAppendResult<C>],
) -> (StreamAppendResult<C>, bool) {
    let mut matched = None;
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(m) => matched = Some(*m),
            Err(e) if i == 0 => return (Err(e.clone()), false),
            Err(_) => return (Ok(matched.flatten()), true),
        }
    }
    (Ok(matched.flatten()), false)
}

#[cfg(test)]
pub(super) mod tests {
    use openraft::raft::StreamAppendError;
    use raftmq_raft_log::types::AppPayload;
    use raftmq_raft_log::types::CommittedLeaderId;
    use raftmq_raft_log::types::LeaderId;
    use raftmq_raft_log::types::LogEntry;
    use raftmq_raft_log::types::Payload;
    use raftmq_raft_log::types::PeerNode;
    use raftmq_raft_log::types::Vote;

    use super::*;

    openraft::declare_raft_types!(
        /// Type config of these tests (the transport tests with test doubles, in
        /// `cluster-tests/tests/peer_transport.rs`, declare the same one).
        pub TestConfig:
            D = AppPayload,
            R = u64,
            Node = PeerNode,
            LeaderId = LeaderId,
    );

    pub(in crate::network) fn log_id(index: u64) -> LogId {
        LogId {
            leader_id: CommittedLeaderId::new(1),
            index,
        }
    }

    fn request(n: u64, entry_bytes: usize) -> AppendEntriesRequest<TestConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: Some(log_id(9)),
            entries: (10..10 + n)
                .map(|i| LogEntry {
                    log_id: log_id(i),
                    payload: Payload::Normal(AppPayload::from(vec![i as u8; entry_bytes])),
                })
                .collect(),
            leader_commit: Some(log_id(9 + n)),
        }
    }

    #[test]
    fn small_request_is_one_part() {
        let parts = encode_append(request(3, 10), 1 << 20).expect("encodes");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].last, Some(log_id(12)));
    }

    #[test]
    fn large_request_is_cut_into_chained_parts() {
        // Limit 64 KiB + 10 KiB of payload room; 16 entries of 3 KiB = 48 KiB.
        let parts = encode_append(request(16, 3 << 10), (64 << 10) + (10 << 10)).expect("encodes");
        assert!(parts.len() >= 4, "{} parts", parts.len());
        let mut expect_prev = Some(log_id(9));
        let mut seen = Vec::new();
        for p in &parts {
            assert!(p.payload.len() <= 10 << 10);
            let r: AppendEntriesRequest<TestConfig> =
                codec::decode("AppendEntriesRequest", &p.payload).expect("decodes");
            assert_eq!(r.prev_log_id, expect_prev, "chained");
            let last = r.entries.last().map(|e| e.log_id);
            assert_eq!(p.last, last);
            assert!(r.leader_commit <= last, "commit capped at the part's end");
            seen.extend(r.entries.iter().map(|e| e.log_id.index));
            expect_prev = last;
        }
        assert_eq!(
            seen,
            (10..26).collect::<Vec<_>>(),
            "every entry once, in order"
        );
    }

    #[test]
    fn planned_parts_are_the_encoded_parts() {
        use super::super::append_request::EncodeLater;
        for (n, bytes, limit) in [(3, 10, 1 << 20), (16, 3 << 10, (64 << 10) + (10 << 10))] {
            let eager = encode_append(request(n, bytes), limit).expect("encodes");
            let planned = plan_append(request(n, bytes), limit).expect("measures");
            assert_eq!(planned.len(), eager.len(), "the same cuts");
            for (p, e) in planned.iter().zip(&eager) {
                assert_eq!((p.payload.len(), p.last), (e.payload.len(), e.last));
                let mut out = Vec::new();
                p.payload.encode_to(&mut |b| out.extend_from_slice(b));
                assert_eq!(out, e.payload);
            }
        }
    }

    #[test]
    fn framed_parts_share_the_large_payloads() {
        use super::super::append_request::Chunks;
        use super::super::append_request::EncodeLater;
        // Entries of 1, 8 and 20 KiB: the two from SHARE_MIN_BYTES on go as their own buffers.
        let mut req = request(3, 0);
        let sizes = [1 << 10, SHARE_MIN_BYTES, 20 << 10];
        for (e, n) in req.entries.iter_mut().zip(sizes) {
            e.payload = Payload::Normal(AppPayload::from(vec![n as u8; n]));
        }
        let bufs: Vec<*const u8> = req.entries[1..]
            .iter()
            .map(|e| match &e.payload {
                Payload::Normal(app) => app.0.as_ptr(),
                _ => unreachable!(),
            })
            .collect();
        let planned = plan_append(req, 1 << 20).expect("measures");
        let part = &planned[0].payload;
        let mut chunks = Chunks::default();
        part.encode_chunks(&mut chunks);
        let chunks = chunks.finish();
        let mut whole = Vec::new();
        part.encode_to(&mut |b| whole.extend_from_slice(b));
        assert_eq!(chunks.concat(), whole, "the same bytes");
        let shared: Vec<*const u8> = chunks
            .iter()
            .filter(|c| c.len() >= SHARE_MIN_BYTES)
            .map(|c| c.as_ptr())
            .collect();
        assert_eq!(
            shared, bufs,
            "the large payloads are the entries' own buffers"
        );
    }

    #[test]
    fn merging_answers() {
        type R = AppendEntriesResponse<TestConfig>;
        assert!(merge_unary::<TestConfig>(0, None, R::Success).is_ok());
        assert_eq!(
            merge_unary::<TestConfig>(0, None, R::Conflict),
            Err(R::Conflict)
        );
        assert_eq!(
            merge_unary::<TestConfig>(2, Some(log_id(5)), R::Conflict),
            Err(R::PartialSuccess(Some(log_id(5))))
        );

        let ok = |i| -> StreamAppendResult<TestConfig> { Ok(Some(log_id(i))) };
        let conflict: StreamAppendResult<TestConfig> = Err(StreamAppendError::Conflict(log_id(3)));
        assert_eq!(merge_stream(&[ok(3), ok(7)]), (ok(7), false));
        assert_eq!(
            merge_stream(std::slice::from_ref(&conflict)),
            (conflict.clone(), false)
        );
        assert_eq!(merge_stream(&[ok(3), conflict]), (ok(3), true));
    }
}
