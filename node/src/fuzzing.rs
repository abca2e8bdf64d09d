//! Fuzz target bodies over the node's decoders of network bytes (the peer codec, the raftmq
//! and RocketMQ protobuf requests through the handlers' conversion and validation, receipt
//! handles), and [`TARGETS`], the one table of every fuzz target of the workspace: the
//! cargo-fuzz binaries in `fuzz/` and the corpus replay test (`node/tests/fuzz_corpus.rs`)
//! call these same functions. Each panics only when a decoder broke its contract (a panic on
//! bad bytes, or a decoded value that does not survive a round trip).

use std::time::Duration;

use openraft::raft::AppendEntriesRequest;
use openraft::raft::AppendEntriesResponse;
use openraft::raft::SnapshotResponse;
use openraft::raft::TransferLeaderRequest;
use openraft::raft::VoteRequest;
use openraft::raft::VoteResponse;
use openraft::storage::SnapshotMeta;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::v1 as pb;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use raftmq_store::command::Command;
use raftmq_store::dedup::check_identity;
use raftmq_store::filter::TagFilter;
use raftmq_store::limits::validate_group_name;
use raftmq_store::limits::validate_user_topic_name;
use raftmq_store::limits::StoreLimits;
use raftmq_store::message::Message;
use raftmq_store::TypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use crate::network::codec;
use crate::pipeline::consume::invisible_ms;
use crate::pipeline::consume::ReceiptHandle;
use crate::pipeline::SubmitBatch;
use crate::rocketmq::message as rmq_message;
use crate::rocketmq::receive as rmq_receive;
use crate::rocketmq::telemetry::to_std;
use crate::service::convert;
use crate::service::read::offset_args;
use crate::service::send::message_in;

/// A fuzz target: its name (the cargo-fuzz binary and `fuzz/corpus/<name>/`) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz target of the workspace.
pub const TARGETS: &[Target] = &[
    ("entry_record", raftmq_raft_log::fuzzing::entry_record),
    ("index_record", raftmq_raft_log::fuzzing::index_record),
    ("segment_scan", raftmq_raft_log::fuzzing::segment_scan),
    ("committed_id", raftmq_raft_log::fuzzing::committed_id),
    ("message_record", raftmq_store::fuzzing::message_record),
    ("command_payload", raftmq_store::fuzzing::command_payload),
    ("snapshot_file", raftmq_store::fuzzing::snapshot_file),
    ("snapshot_chunks", raftmq_store::fuzzing::snapshot_chunks),
    ("consume_queue", raftmq_store::fuzzing::consume_queue),
    ("index_file", raftmq_store::fuzzing::index_file),
    ("checkpoint", raftmq_store::fuzzing::checkpoint),
    ("peer_codec", peer_codec),
    ("client_request", client_request),
    ("rocketmq_request", rocketmq_request),
    ("receipt_handle", receipt_handle),
    ("auth_header", auth_header),
    ("peer_certificate", peer_certificate),
];

/// Fixed clock of the targets (ms since the epoch), so a corpus input always means the same.
const NOW_MS: u64 = 1_700_000_000_000;
/// Body limit of the RocketMQ send checks.
const MAX_BODY: usize = 4 << 20;

/// Decodes `T`; a value re-encodes to bytes that decode and re-encode to the same bytes.
fn postcard_round_trip<T: Serialize + DeserializeOwned>(what: &'static str, bytes: &[u8]) {
    let Ok(v) = codec::decode::<T>(what, bytes) else {
        return;
    };
    let once = codec::encode(what, &v).expect("a decoded value re-encodes");
    let back: T = codec::decode(what, &once).expect("a re-encoded value decodes");
    let twice = codec::encode(what, &back).expect("a decoded value re-encodes");
    assert_eq!(once, twice, "{what} round trip");
}

/// The peer protocol's payloads (postcard). Byte 0 picks the type, as the RPC does.
pub fn peer_codec(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    type C = TypeConfig;
    match pick % 9 {
        0 => postcard_round_trip::<AppendEntriesRequest<C>>("AppendEntriesRequest", bytes),
        1 => postcard_round_trip::<VoteRequest<C>>("VoteRequest", bytes),
        2 => postcard_round_trip::<TransferLeaderRequest<C>>("TransferLeaderRequest", bytes),
        3 => postcard_round_trip::<Vote>("Vote", bytes),
        4 => postcard_round_trip::<SnapshotMeta<CommittedLeaderId, NodeId, PeerNode>>(
            "SnapshotMeta",
            bytes,
        ),
        5 => postcard_round_trip::<AppendEntriesResponse<C>>("AppendEntriesResponse", bytes),
        6 => postcard_round_trip::<VoteResponse<C>>("VoteResponse", bytes),
        7 => postcard_round_trip::<SnapshotResponse<C>>("SnapshotResponse", bytes),
        _ => postcard_round_trip::<openraft::raft::StreamAppendResult<C>>(
            "StreamAppendResult",
            bytes,
        ),
    }
}

/// Decodes a protobuf `M`; a value re-encodes to bytes that decode equal.
fn proto<M: prost::Message + Default + PartialEq>(bytes: &[u8]) -> Option<M> {
    let m = M::decode(bytes).ok()?;
    let back = M::decode(m.encode_to_vec().as_slice()).expect("a re-encoded request decodes");
    assert!(back == m, "protobuf round trip");
    Some(m)
}

/// Sends as the handlers take them: wire -> store message, `SubmitBatch` validation, then
/// the `SendBatch` entry the leader would propose, which must decode to the same messages.
fn send_path(msgs: Vec<pb::Message>) {
    let limits = StoreLimits::default();
    let n = msgs.len();
    let items = msgs.into_iter().map(message_in);
    let Ok(batch) = SubmitBatch::validate_parts(
        items,
        Instant::now(),
        limits.max_batch_messages as usize,
        &limits,
        StoreLimits::check_message,
    ) else {
        return;
    };
    assert_eq!(batch.len(), n);
    store_entry(batch.messages().to_vec());
}

/// Encodes validated messages as one entry; it must decode to them.
fn store_entry(messages: Vec<Message>) {
    for m in &messages {
        let _ = check_identity(m);
    }
    let cmd = Command::batch(messages.clone());
    let Ok(payload) = cmd.encode() else { return };
    let back = Command::decode(&payload.0).expect("an encoded batch decodes");
    // The identity fields read back as the properties the record holds them as.
    let stored = messages.into_iter().map(Message::identity_in_properties);
    assert_eq!(
        back,
        Command::batch(stored.collect()),
        "send entry round trip"
    );
}

/// raftmq client requests (protobuf) through the handlers' conversion and argument checks.
/// Byte 0 picks the request type.
pub fn client_request(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    match pick % 8 {
        0 => {
            if let Some(r) = proto::<pb::SendRequest>(bytes) {
                send_path(r.message.into_iter().collect());
            }
        }
        1 => {
            if let Some(r) = proto::<pb::SendBatchRequest>(bytes) {
                send_path(r.messages);
            }
        }
        2 => {
            if let Some(r) = proto::<pb::SendStreamRequest>(bytes) {
                send_path(r.message.into_iter().collect());
                send_path(r.batch.map(|b| b.messages).unwrap_or_default());
            }
        }
        3 => {
            if let Some(r) = proto::<pb::PullRequest>(bytes) {
                let _ = raftmq_store::limits::validate_topic_name(&r.topic);
                let _ = convert::queue_id("queue_id", r.queue_id);
                let _ = TagFilter::parse(&r.tag_expression).map(|f| f.matches_tag("a"));
            }
        }
        4 => {
            if let Some(r) = proto::<pb::QueryByKeyRequest>(bytes) {
                let _ = raftmq_store::limits::validate_topic_name(&r.topic);
            }
        }
        5 => {
            if let Some(r) = proto::<pb::CommitOffsetRequest>(bytes) {
                let _ = offset_args(&r.group, &r.topic, r.queue_id);
            }
        }
        6 => {
            if let Some(r) = proto::<pb::CreateTopicRequest>(bytes) {
                if let Some(c) = r.config {
                    let _ = validate_user_topic_name(&c.name);
                    let _ = convert::perm_in(c.perm);
                }
            }
        }
        _ => {
            if let Some(r) = proto::<pb::UpdateTopicRequest>(bytes) {
                let _ = validate_user_topic_name(&r.name);
                let _ = convert::perm_in(r.perm);
            }
        }
    }
}

/// RocketMQ 5 requests (protobuf) through the service's checks and conversions. Byte 0
/// picks the request type.
pub fn rocketmq_request(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    match pick % 4 {
        0 => {
            let Some(r) = proto::<rmq::SendMessageRequest>(bytes) else {
                return;
            };
            let mut stored = Vec::new();
            for m in r.messages {
                if let Ok(inc) = rmq_message::incoming_at(m, MAX_BODY, NOW_MS) {
                    if StoreLimits::default().check_message(&inc.message).is_ok() {
                        stored.push(inc.message);
                    }
                }
            }
            if !stored.is_empty() {
                store_entry(stored);
            }
        }
        1 => {
            let Some(r) = proto::<rmq::ReceiveMessageRequest>(bytes) else {
                return;
            };
            let timeout = Some(Duration::from_secs(30));
            if let Ok(c) = rmq_receive::check(&r, timeout, &["g".to_string()]) {
                assert!(c.req.max_messages >= 1);
                assert!(c.poll <= Duration::from_secs(30));
                let _ = validate_group_name(&c.req.group);
                TagFilter::parse(&c.req.filter).expect("a checked filter parses");
                invisible_ms(c.req.invisible).expect("a checked invisible time is in range");
            }
        }
        2 => {
            let Some(r) = proto::<rmq::AckMessageRequest>(bytes) else {
                return;
            };
            for e in &r.entries {
                receipt_handle(e.receipt_handle.as_bytes());
            }
        }
        _ => {
            let Some(r) = proto::<rmq::ChangeInvisibleDurationRequest>(bytes) else {
                return;
            };
            receipt_handle(r.receipt_handle.as_bytes());
            if let Some(d) = to_std(r.invisible_duration.as_ref()) {
                let _ = invisible_ms(d);
            }
        }
    }
}

/// A receipt handle as a client sends it back (ack, change invisibility). A handle that
/// parses re-encodes to one that parses equal.
pub fn receipt_handle(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(h) = ReceiptHandle::decode(s) {
        let text = h.encode();
        assert_eq!(
            ReceiptHandle::decode(&text).expect("a re-encoded handle parses"),
            h
        );
    }
}

/// The two metadata values that authenticate a client call (`authorization` and
/// `x-mq-date-time`, from the raftmq and RocketMQ client APIs). Byte 0 is where the first
/// value ends. A parsed `authorization` re-formats to a value that parses equal; a parsed
/// date-time formats to RFC 3339 that parses to the same instant (each where the re-formatted
/// value is within bounds); checking a signature never panics, whatever its length.
pub fn auth_header(data: &[u8]) {
    use raftmq_proto::signature;
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let (auth, date) = rest.split_at(usize::from(cut).min(rest.len()));
    let date = String::from_utf8_lossy(date);
    if let Ok(auth) = std::str::from_utf8(auth) {
        if let Ok(a) = signature::parse_authorization(auth) {
            assert!(!a.access_key.is_empty() && a.signature.len() == 20);
            let text = format!(
                "MQv2-HMAC-SHA1 Credential={}, SignedHeaders=x-mq-date-time, Signature={}",
                a.access_key,
                hex::encode(&a.signature)
            );
            if text.len() <= signature::MAX_AUTHORIZATION_BYTES {
                assert_eq!(signature::parse_authorization(&text), Ok(a.clone()));
            }
            let _ = signature::verify_signature(b"secret", &date, &a.signature);
        }
    }
    let _ = signature::verify_signature(b"secret", &date, rest);
    if let Ok(t) = signature::parse_date_time(&date) {
        if let Ok(text) = t.format(&time::format_description::well_known::Rfc3339) {
            let back = signature::parse_date_time(&text).expect("RFC 3339 of a parsed time parses");
            assert_eq!(back, t, "date-time round trip");
        }
    }
}

/// A peer's certificate (DER) as the peer port's member check reads it, and a member URI.
/// Fields that parse come from inside the input; the check answers a node id or a reason.
pub fn peer_certificate(data: &[u8]) {
    use crate::tls::x509;
    if let Ok(f) = x509::parse(data) {
        assert!(f.uris.iter().all(|u| u.len() <= data.len()));
        assert!(f.dns.iter().all(|d| d.len() <= data.len()));
    }
    let der = tokio_rustls::rustls::pki_types::CertificateDer::from(data.to_vec());
    let _ = crate::tls::named_member("c", &der);
    if let Ok(uri) = std::str::from_utf8(data) {
        if let Some((cluster, id)) = crate::tls::parse_member_uri(uri) {
            let again = crate::tls::member_uri(cluster, id);
            assert_eq!(crate::tls::parse_member_uri(&again), Some((cluster, id)));
        }
    }
}
