//! The fuzz corpus on stable Rust: every file under `fuzz/corpus/<target>/` goes through its
//! target's body (`raftmq_node::fuzzing::TARGETS`, the code the cargo-fuzz binaries run); a
//! panic in any body fails the test naming the file. `write_seeds` (ignored) regenerates the
//! `seed-*` inputs from the real encoders.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use openraft::raft::AppendEntriesRequest;
use openraft::raft::VoteRequest;
use prost::Message as _;
use raftmq_node::fuzzing::TARGETS;
use raftmq_node::pipeline::consume::ReceiptHandle;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::v1 as pb;
use raftmq_raft_log::format::encode_padding;
use raftmq_raft_log::format::encode_record;
use raftmq_raft_log::format::RecordKind;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Membership;
use raftmq_raft_log::types::Payload;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use raftmq_raft_log::EntryLocation;
use raftmq_store::command::Ack;
use raftmq_store::command::AckEntry;
use raftmq_store::command::ChangeInvisible;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::command::Receive;
use raftmq_store::consume_queue::CqUnit;
use raftmq_store::dedup::DedupParams;
use raftmq_store::dedup::StoredSend;
use raftmq_store::hash::tag_hash;
use raftmq_store::index::IndexConfig;
use raftmq_store::index::IndexStore;
use raftmq_store::message::Message;
use raftmq_store::snapshot::format::encode_header;
use raftmq_store::snapshot::format::encode_manifest;
use raftmq_store::snapshot::format::Manifest;
use raftmq_store::snapshot::format::QueueManifest;
use raftmq_store::snapshot::format::SegmentManifest;
use raftmq_store::state::Checkpoint;
use raftmq_store::topic::TopicConfig;
use raftmq_store::topic::TopicTable;
use raftmq_store::types::LogIndex;
use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use raftmq_store::users::Role;
use raftmq_store::users::SealedSecret;
use raftmq_store::users::User;
use raftmq_store::TypeConfig;

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

#[test]
fn every_corpus_input_replays_through_its_target() {
    let root = corpus_root();
    let mut failed = Vec::new();
    let mut inputs = 0;
    for (name, body) in TARGETS {
        let dir = root.join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus of {name} at {}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "target {name} has no corpus input");
        for f in files {
            let data = std::fs::read(&f).expect("corpus file reads");
            inputs += 1;
            if std::panic::catch_unwind(|| body(&data)).is_err() {
                failed.push(f.display().to_string());
            }
        }
    }
    assert!(failed.is_empty(), "bodies panicked on: {failed:#?}");
    assert!(inputs >= TARGETS.len());
}

#[test]
fn every_corpus_dir_names_a_target() {
    for e in std::fs::read_dir(corpus_root()).expect("fuzz/corpus exists") {
        let name = e.expect("corpus dir").file_name();
        let name = name.to_str().expect("utf-8 name");
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name),
            "fuzz/corpus/{name} is no target"
        );
    }
}

fn message(topic: &str, body: &[u8]) -> Message {
    let mut m = Message::new(topic, QueueId::new(0), body.to_vec());
    m.tags = "TagA".into();
    m.keys = vec!["k1".into(), "order-7".into()];
    m.properties = BTreeMap::from([
        ("RAFTMQ_PRODUCER_ID".to_string(), "p1".to_string()),
        ("RAFTMQ_SEQUENCE".to_string(), "7".to_string()),
    ]);
    m.born_host = "10.0.0.7:5123".into();
    m.born_timestamp_ms = 1_700_000_000_000;
    m.store_timestamp_ms = 1_700_000_000_001;
    m
}

fn commands() -> Vec<Command> {
    let batch = Command::SendBatch {
        messages: vec![
            message("t", b"hello"),
            Message::new("t", QueueId::new(1), vec![]),
        ],
        auto_create_queues: Some(4),
        dedup: Some(DedupParams {
            window_ms: 60_000,
            max_entries: 100,
        }),
    };
    vec![
        Command::batch(vec![message("t", b"one")]),
        batch,
        Command::CreateTopic(TopicConfig::new("t", 4)),
        Command::UpdateTopic(TopicConfig::new("t", 8)),
        Command::DeleteTopic { topic: "t".into() },
        Command::CommitOffset(CommitOffset {
            group: "g".into(),
            topic: "t".into(),
            queue_id: QueueId::new(1),
            offset: QueueOffset::new(42),
        }),
        Command::Receive(Receive {
            group: "g".into(),
            topic: "t".into(),
            queue_id: QueueId::new(0),
            max_messages: 32,
            invisible_ms: 30_000,
            now_ms: 1_700_000_000_000,
            max_inflight: 1000,
            queue_min: QueueOffset::new(0),
            filter: "TagA || TagB".into(),
            fifo: true,
        }),
        Command::Ack(Ack {
            group: "g".into(),
            topic: "t".into(),
            entries: vec![AckEntry {
                queue_id: QueueId::new(0),
                queue_offset: QueueOffset::new(3),
                handle: LogIndex::new(9),
            }],
        }),
        Command::ChangeInvisible(ChangeInvisible {
            group: "g".into(),
            topic: "t".into(),
            queue_id: QueueId::new(0),
            queue_offset: QueueOffset::new(3),
            handle: LogIndex::new(9),
            invisible_ms: 10_000,
            now_ms: 1_700_000_000_000,
        }),
        Command::PutUser(user()),
        Command::DeleteUser {
            name: "shop".into(),
        },
    ]
}

/// A producer user with a sealed secret of the right shape (nonce, ciphertext, tag).
fn user() -> User {
    User {
        name: "shop".into(),
        access_key: "AKSHOP01".into(),
        secret: SealedSecret(vec![7; 12 + 64 + 16]),
        role: Role::Producer,
        topics: vec!["orders*".into()],
        groups: vec!["g-*".into()],
    }
}

fn membership() -> Membership {
    let nodes = BTreeMap::from([
        (
            1u64,
            PeerNode {
                raft_addr: "127.0.0.1:7001".into(),
                client_addr: "127.0.0.1:8001".into(),
            },
        ),
        (2u64, PeerNode::default()),
    ]);
    Membership::new(vec![BTreeSet::from([1u64, 2])], nodes).expect("valid membership")
}

/// A CommitLog of `entries` from physical offset 0 (one 4 KiB segment, then padding).
fn segment(entries: &[(u64, u64, Vec<u8>)]) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    for (term, index, payload) in entries {
        let phys = out.len() as u64;
        encode_record(RecordKind::Normal, *term, *index, phys, payload, &mut out).expect("encodes");
    }
    let end = out.len() as u64;
    (out, end)
}

/// A whole snapshot of one segment holding one SendBatch entry, with its queue unit.
fn snapshot() -> Vec<u8> {
    let payload = Command::batch(vec![message("t", b"snap")])
        .encode()
        .expect("encodes")
        .0
        .to_vec();
    let (seg, end) = segment(&[(1, 1, payload.clone())]);
    let rec = 48 + 24;
    let size = (payload.len() - 24) as u32;
    let unit = CqUnit {
        phys_offset: PhysOffset::new(rec),
        size,
        tag_hash: tag_hash("TagA"),
    };
    let mut m = snapshot_manifest();
    m.dispatched_phys_end = PhysOffset::new(end);
    m.log_end_phys = Some(PhysOffset::new(end));
    m.segments = vec![SegmentManifest {
        start: PhysOffset::new(0),
        len: end,
        crc: crc32fast::hash(&seg),
    }];
    snapshot_of(&m, &unit.encode(), &seg)
}

/// The manifest of a one-topic snapshot at log id 1-1 with one unit in `t/0` (segments and
/// log end are the caller's).
fn snapshot_manifest() -> Manifest {
    let mut topics = TopicTable::new();
    topics.create(TopicConfig::new("t", 1)).expect("creates");
    Manifest {
        last_log_id: Some(LogId::new_term_index(1, 1)),
        membership: Default::default(),
        topics,
        offsets: Default::default(),
        receive: Default::default(),
        dedup: Default::default(),
        users: Default::default(),
        dispatched_phys_end: PhysOffset::new(0),
        log_end_phys: None,
        segment_bytes: 4096,
        queues: vec![QueueManifest {
            topic: "t".into(),
            queue_id: QueueId::new(0),
            min_offset: QueueOffset::new(0),
            max_offset: QueueOffset::new(1),
        }],
        segments: Vec::new(),
    }
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut s: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let batch = Command::batch(vec![message("t", b"x")])
        .encode()
        .expect("encodes")
        .0
        .to_vec();
    // entry_record: phys, then the record.
    for (kind, payload) in [
        (RecordKind::Normal, batch.clone()),
        (RecordKind::Blank, Vec::new()),
        (
            RecordKind::Membership,
            serde_json::to_vec(&membership()).expect("json"),
        ),
    ] {
        let mut v = 4096u64.to_le_bytes().to_vec();
        let mut rec = Vec::new();
        encode_record(kind, 2, 5, 4096, &payload, &mut rec).expect("encodes");
        v.extend_from_slice(&rec);
        s.push(("entry_record", v));
    }
    let mut pad = 0u64.to_le_bytes().to_vec();
    pad.extend_from_slice(&encode_padding(0, 64));
    pad.resize(8 + 64, 0);
    s.push(("entry_record", pad));
    // index_record.
    let loc = EntryLocation {
        index: 5,
        phys: 4096,
        term: 2,
        size: 48 + batch.len() as u32,
    };
    let mut v = Vec::new();
    loc.encode(&mut v);
    s.push(("index_record", v));
    // committed_id: both slots written, the newer one (sequence 3) in slot 1.
    s.push((
        "committed_id",
        raftmq_raft_log::fuzzing::committed_id_file(&[
            (2, Some(LogId::new_term_index(2, 5))),
            (3, Some(LogId::new_term_index(2, 9))),
        ]),
    ));
    // segment_scan: head, trusted records, segments.
    let (seg, _) = segment(&[
        (1, 1, batch.clone()),
        (1, 2, b"ab".to_vec()),
        (2, 3, vec![]),
    ]);
    let mut head = vec![0u8; 18];
    head.extend_from_slice(&seg);
    s.push(("segment_scan", head.clone()));
    let mut two = vec![0u8; 18];
    let mut full = seg.clone();
    let pad_at = full.len() as u64;
    full.extend_from_slice(&encode_padding(pad_at, (4096 - pad_at) as u32));
    full.resize(4096, 0);
    encode_record(RecordKind::Normal, 2, 4, 4096, b"next", &mut full).expect("encodes");
    two.extend_from_slice(&full);
    s.push(("segment_scan", two));
    let mut trusted = vec![1u8, 0];
    trusted.resize(18, 0);
    EntryLocation {
        index: 1,
        phys: 0,
        term: 1,
        size: 48 + batch.len() as u32,
    }
    .encode(&mut trusted);
    trusted.extend_from_slice(&seg);
    s.push(("segment_scan", trusted));
    // message_record.
    s.push((
        "message_record",
        raftmq_store::message::format::encode(&message("t", b"body")).expect("encodes"),
    ));
    // command_payload.
    for c in commands() {
        s.push(("command_payload", c.encode().expect("encodes").0.to_vec()));
    }
    // snapshot_file and snapshot_chunks.
    let snap = snapshot();
    s.push(("snapshot_file", snap.clone()));
    let mut chunks = Vec::new();
    for c in snap.chunks(700) {
        chunks.push(0u8);
        chunks.extend_from_slice(&(c.len() as u16).to_le_bytes());
        chunks.extend_from_slice(c);
    }
    s.push(("snapshot_chunks", chunks));
    // consume_queue.
    let mut cq = Vec::new();
    for i in 1..=3u64 {
        let u = CqUnit {
            phys_offset: PhysOffset::new(i * 100),
            size: 80,
            tag_hash: tag_hash("TagA"),
        };
        cq.extend_from_slice(&u.encode());
    }
    s.push(("consume_queue", cq));
    // index_file.
    let dir = tempfile::tempdir().expect("tempdir");
    let (slots, units) = raftmq_store::fuzzing::FUZZ_INDEX_GEOMETRY;
    let cfg = IndexConfig {
        slots_per_file: slots,
        max_units_per_file: units,
    };
    fn first_byte(k: &str) -> u64 {
        k.bytes().next().map_or(0, u64::from)
    }
    let mut idx = IndexStore::open_with_hasher(dir.path(), cfg, first_byte).expect("opens");
    for (i, k) in ["a", "b", "a", "c"].iter().enumerate() {
        idx.put(k, PhysOffset::new(100 * (i as u64 + 1)), 1500 + i as u64)
            .expect("puts");
    }
    idx.flush().expect("flushes");
    drop(idx);
    let file = dir.path().join(format!("{:020}", 0));
    s.push(("index_file", std::fs::read(file).expect("index file")));
    // checkpoint.
    let mut c = Checkpoint {
        last_applied: Some(LogId::new_term_index(1, 9)),
        ..Checkpoint::default()
    };
    c.topics.create(TopicConfig::new("t", 2)).expect("creates");
    c.users.put(user()).expect("puts");
    // As older nodes wrote it (JSON), then the binary file with a dedup window.
    s.push(("checkpoint", serde_json::to_vec(&c).expect("json")));
    for i in 0..3u64 {
        let send = StoredSend {
            queue_id: QueueId::new(1),
            queue_offset: QueueOffset::new(i),
            phys_offset: PhysOffset::new(64 * i),
            store_timestamp_ms: 1_700_000_000_000,
            log_id: LogId::new_term_index(1, 9),
        };
        c.dedup.insert(&format!("p1:t3:abc{i}"), send);
    }
    let mut bytes = Vec::new();
    c.encode(&mut bytes).expect("encodes");
    s.push(("checkpoint", bytes));
    // peer_codec: selector, then postcard.
    let enc = |pick: u8, b: Vec<u8>| [vec![pick], b].concat();
    let vote = Vote::new_committed(2, 1);
    let append = AppendEntriesRequest::<TypeConfig> {
        vote,
        prev_log_id: Some(LogId::new_term_index(1, 4)),
        entries: vec![
            LogEntry {
                log_id: LogId::new_term_index(2, 5),
                payload: Payload::Normal(AppPayload::from(batch.clone())),
            },
            LogEntry {
                log_id: LogId::new_term_index(2, 6),
                payload: Payload::Membership(membership()),
            },
            LogEntry {
                log_id: LogId::new_term_index(2, 7),
                payload: Payload::Blank,
            },
        ],
        leader_commit: Some(LogId::new_term_index(1, 4)),
    };
    s.push((
        "peer_codec",
        enc(0, postcard::to_stdvec(&append).expect("pc")),
    ));
    let vr = VoteRequest::<TypeConfig>::new(vote, Some(LogId::new_term_index(1, 4)));
    s.push(("peer_codec", enc(1, postcard::to_stdvec(&vr).expect("pc"))));
    s.push((
        "peer_codec",
        enc(3, postcard::to_stdvec(&vote).expect("pc")),
    ));
    // client_request: selector, then protobuf.
    let pm = pb::Message {
        topic: "t".into(),
        queue_id: Some(1),
        tags: "TagA".into(),
        keys: vec!["k".into()],
        properties: [("a".to_string(), "b".to_string())].into(),
        body: b"hello".to_vec().into(),
        born_timestamp_ms: 1,
        born_host: "h:1".into(),
        ..Default::default()
    };
    let send = pb::SendRequest {
        message: Some(pm.clone()),
    };
    s.push(("client_request", enc(0, send.encode_to_vec())));
    let sb = pb::SendBatchRequest {
        messages: vec![pm.clone(), pm],
    };
    s.push(("client_request", enc(1, sb.encode_to_vec())));
    let pull = pb::PullRequest {
        topic: "t".into(),
        queue_id: 0,
        offset: 0,
        max_count: 32,
        max_bytes: 0,
        tag_expression: "TagA || TagB".into(),
        long_poll_timeout_ms: 0,
    };
    s.push(("client_request", enc(3, pull.encode_to_vec())));
    // rocketmq_request.
    let res = |n: &str| {
        Some(rmq::Resource {
            name: n.into(),
            ..Default::default()
        })
    };
    let rm = rmq::Message {
        topic: res("t"),
        user_properties: [("a".to_string(), "b".to_string())].into(),
        system_properties: Some(rmq::SystemProperties {
            tag: Some("TagA".into()),
            keys: vec!["k".into()],
            message_id: "01ABCDEF".into(),
            message_type: rmq::MessageType::Normal as i32,
            born_timestamp: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            born_host: "h".into(),
            ..Default::default()
        }),
        body: b"hi".to_vec().into(),
    };
    let sm = rmq::SendMessageRequest { messages: vec![rm] };
    s.push(("rocketmq_request", enc(0, sm.encode_to_vec())));
    let recv = rmq::ReceiveMessageRequest {
        group: res("g"),
        message_queue: Some(rmq::MessageQueue {
            topic: res("t"),
            id: 0,
            ..Default::default()
        }),
        filter_expression: Some(rmq::FilterExpression {
            r#type: rmq::FilterType::Tag as i32,
            expression: "TagA".into(),
        }),
        batch_size: 16,
        invisible_duration: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        long_polling_timeout: Some(prost_types::Duration {
            seconds: 20,
            nanos: 0,
        }),
        ..Default::default()
    };
    s.push(("rocketmq_request", enc(1, recv.encode_to_vec())));
    let handle = ReceiptHandle {
        topic: "t".into(),
        queue_id: QueueId::new(0),
        queue_offset: QueueOffset::new(3),
        handle: LogIndex::new(9),
        invisible_until_ms: 1_700_000_030_000,
    }
    .encode();
    let ack = rmq::AckMessageRequest {
        group: res("g"),
        topic: res("t"),
        entries: vec![rmq::AckMessageEntry {
            message_id: "01ABCDEF".into(),
            receipt_handle: handle.clone(),
            ..Default::default()
        }],
    };
    s.push(("rocketmq_request", enc(2, ack.encode_to_vec())));
    let ci = rmq::ChangeInvisibleDurationRequest {
        group: res("g"),
        topic: res("t"),
        receipt_handle: handle.clone(),
        invisible_duration: Some(prost_types::Duration {
            seconds: 10,
            nanos: 0,
        }),
        message_id: "01ABCDEF".into(),
        ..Default::default()
    };
    s.push(("rocketmq_request", enc(3, ci.encode_to_vec())));
    s.push(("receipt_handle", handle.into_bytes()));
    // auth_header: where the authorization ends, authorization, date-time.
    let at = time::OffsetDateTime::from_unix_timestamp(1_764_000_000).expect("time");
    let (date, auth) = raftmq_proto::signature::sign("AKSHOP01", "secret", at);
    s.push((
        "auth_header",
        [vec![auth.len() as u8], auth.into_bytes(), date.into_bytes()].concat(),
    ));
    let compact = "MQv2-HMAC-SHA1 Credential=AK1,SignedHeaders=X-MQ-DATE-TIME,Signature=00112233445566778899AABBCCDDEEFF00112233";
    s.push((
        "auth_header",
        [
            vec![compact.len() as u8],
            compact.into(),
            b"20251124T160000Z".to_vec(),
        ]
        .concat(),
    ));
    // peer_certificate: a member certificate (DER) of cluster "c", and a member URI.
    s.push(("peer_certificate", member_certificate()));
    s.push(("peer_certificate", b"raftmq://c/node/2".to_vec()));
    s
}

/// A node certificate as `raftmq cert node` issues it: URI SAN `raftmq://c/node/2`, an IP and
/// a DNS name, signed by a CA.
fn member_certificate() -> Vec<u8> {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    p.subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    p.subject_alt_names.push(rcgen::SanType::URI(
        rcgen::Ia5String::try_from("raftmq://c/node/2".to_string()).expect("ascii"),
    ));
    p.signed_by(&key, &ca, &ca_key)
        .expect("leaf")
        .der()
        .to_vec()
}

/// The seeds are valid inputs (so the fuzzer starts deep in each decoder, not at its first
/// check).
#[test]
fn the_seeds_decode() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (target, bytes) in seeds() {
        match target {
            "entry_record" => {
                let phys = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
                let room = (bytes.len() - 8) as u64;
                raftmq_raft_log::format::decode_record(&bytes[8..], phys, room).expect("decodes");
            }
            "message_record" => {
                raftmq_store::message::format::decode(&bytes).expect("decodes");
            }
            "command_payload" => {
                Command::decode(&bytes).expect("decodes");
            }
            "snapshot_file" => {
                let path = dir.path().join("s.snap");
                std::fs::write(&path, &bytes).expect("writes");
                let f = raftmq_store::SnapshotFile::open(&path).expect("opens");
                let rx = raftmq_store::SnapshotReceiver::new(dir.path().join("rx"), 1 << 20, 4096);
                rx.verify(f, Some(LogId::new_term_index(1, 1)))
                    .expect("verifies");
            }
            "receipt_handle" => {
                ReceiptHandle::decode(std::str::from_utf8(&bytes).expect("utf-8")).expect("parses");
            }
            "checkpoint" if bytes[0] == b'{' => {
                serde_json::from_slice::<Checkpoint>(&bytes).expect("decodes");
            }
            "checkpoint" => {
                Checkpoint::decode(&bytes).expect("decodes");
            }
            "auth_header" => {
                let end = 1 + usize::from(bytes[0]);
                let auth = std::str::from_utf8(&bytes[1..end]).expect("utf-8");
                raftmq_proto::signature::parse_authorization(auth).expect("parses");
                let date = std::str::from_utf8(&bytes[end..]).expect("utf-8");
                raftmq_proto::signature::parse_date_time(date).expect("parses");
            }
            "peer_certificate" if bytes[0] == 0x30 => {
                let der = tokio_rustls::rustls::pki_types::CertificateDer::from(bytes.clone());
                let id = raftmq_node::tls::named_member("c", &der).expect("a member");
                assert_eq!(id, 2);
            }
            _ => {}
        }
    }
}

/// A snapshot of manifest `m` and unit bytes `units` (correct prefix CRC), then `tail`.
fn snapshot_of(m: &Manifest, units: &[u8], tail: &[u8]) -> Vec<u8> {
    let manifest = encode_manifest(m).expect("encodes");
    let mut out = encode_header(manifest.len() as u64).to_vec();
    out.extend_from_slice(&manifest);
    out.extend_from_slice(units);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(tail);
    out
}

/// Inputs that made a body panic before its fix (named after the bug).
fn regressions() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut r = Vec::new();
    // rocketmq/message.rs timestamp_ms: i64::MAX seconds + 999 ms overflowed.
    let mut sys = rmq::SystemProperties {
        message_id: "01ABCDEF".into(),
        born_timestamp: Some(prost_types::Timestamp {
            seconds: i64::MAX,
            nanos: 999_999_999,
        }),
        ..Default::default()
    };
    let req = |sys: rmq::SystemProperties| {
        let m = rmq::Message {
            topic: Some(rmq::Resource {
                name: "t".into(),
                ..Default::default()
            }),
            system_properties: Some(sys),
            ..Default::default()
        };
        [
            vec![0u8],
            rmq::SendMessageRequest { messages: vec![m] }.encode_to_vec(),
        ]
        .concat()
    };
    r.push((
        "rocketmq_request",
        "regress-born-timestamp-overflow",
        req(sys.clone()),
    ));
    sys.born_timestamp = None;
    sys.message_type = rmq::MessageType::Delay as i32;
    sys.delivery_timestamp = Some(prost_types::Timestamp {
        seconds: i64::MIN,
        nanos: -999_999_999,
    });
    r.push((
        "rocketmq_request",
        "regress-delivery-timestamp-overflow",
        req(sys),
    ));
    // snapshot/verify.rs: a segment (or a unit) ending past u64::MAX overflowed.
    let start = PhysOffset::new(u64::MAX / 4096 * 4096);
    let mut m = snapshot_manifest();
    m.segments = vec![SegmentManifest {
        start,
        len: 4096,
        crc: 0,
    }];
    m.log_end_phys = Some(start);
    m.queues.clear();
    r.push((
        "snapshot_file",
        "regress-segment-end-overflow",
        snapshot_of(&m, &[], &[]),
    ));
    let tail = vec![7u8; 100];
    let mut m = snapshot_manifest();
    m.segments = vec![SegmentManifest {
        start: PhysOffset::new(0),
        len: 100,
        crc: crc32fast::hash(&tail),
    }];
    m.log_end_phys = Some(PhysOffset::new(100));
    let unit = CqUnit {
        phys_offset: PhysOffset::new(u64::MAX - 1),
        size: 10,
        tag_hash: 0,
    };
    let snap = snapshot_of(&m, &unit.encode(), &tail);
    r.push(("snapshot_file", "regress-unit-end-overflow", snap));
    // recovery.rs follows(): the entry after index u64::MAX overflowed.
    let mut b = vec![0u8; 18];
    let mut rec = Vec::new();
    encode_record(RecordKind::Blank, 1, u64::MAX, 0, &[], &mut rec).expect("encodes");
    let next = rec.len() as u64;
    encode_record(RecordKind::Blank, 1, 5, next, &[], &mut rec).expect("encodes");
    b.extend_from_slice(&rec);
    r.push(("segment_scan", "regress-index-max-successor", b));
    r
}

/// Regenerates `fuzz/corpus/<target>/seed-<n>` from the real encoders (and the
/// `regress-*` inputs of the bugs fixed so far):
/// `cargo test -p raftmq-node --test fuzz_corpus -- --ignored write_seeds`.
#[test]
#[ignore = "rewrites the checked-in seeds"]
fn write_seeds() {
    let root = corpus_root();
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for (target, bytes) in seeds() {
        let i = n.entry(target).or_default();
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        std::fs::write(dir.join(format!("seed-{i}")), bytes).expect("writes seed");
        *i += 1;
    }
    for (target, name, bytes) in regressions() {
        std::fs::write(root.join(target).join(name), bytes).expect("writes regression");
    }
}
