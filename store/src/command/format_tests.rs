//! Tests of the command payload format: round trips, truncation, flipped bits, structural errors.

use crate::types::PhysOffset;
use proptest::prelude::*;

use super::*;
use crate::command::pop::Ack;
use crate::command::pop::AckEntry;
use crate::command::pop::ChangeInvisible;
use crate::command::pop::Receive;
use crate::dedup::DedupParams;
use crate::message::format::encode as encode_message;
use crate::message::format::encoded_len;
use crate::message::message_id;
use crate::message::Message;
use crate::types::LogIndex;
use crate::types::QueueId;
use crate::types::QueueOffset;
use raftmq_raft_log::format::ENTRY_HEADER_LEN;

fn msg(i: u8) -> Message {
    let mut m = Message::new(
        "orders",
        QueueId::new(u32::from(i)),
        vec![i; usize::from(i) + 1],
    );
    m.tags = format!("Tag{i}");
    m.keys = vec![format!("key-{i}")];
    m
}

fn all_commands() -> Vec<Command> {
    vec![
        Command::batch(vec![msg(1)]),
        Command::batch(vec![msg(1), msg(2), msg(3)]),
        Command::SendBatch {
            messages: vec![msg(4)],
            auto_create_queues: Some(8),
            dedup: None,
        },
        Command::CreateTopic(TopicConfig::new("orders", 8)),
        Command::UpdateTopic(TopicConfig {
            perm: Permissions {
                read: true,
                write: false,
            },
            ..TopicConfig::new("orders", 4)
        }),
        Command::DeleteTopic {
            topic: "orders".into(),
        },
        Command::CommitOffset(CommitOffset {
            group: "g1".into(),
            topic: "orders".into(),
            queue_id: QueueId::new(3),
            offset: QueueOffset::new(12345),
        }),
        Command::Receive(Receive {
            group: "g1".into(),
            topic: "orders".into(),
            queue_id: QueueId::new(2),
            max_messages: 16,
            invisible_ms: 30_000,
            now_ms: 1_700_000_000_000,
            max_inflight: 4096,
            queue_min: QueueOffset::new(7),
            filter: "TagA || TagB".into(),
            fifo: true,
        }),
        Command::Ack(Ack {
            group: "g1".into(),
            topic: "orders".into(),
            entries: vec![
                AckEntry {
                    queue_id: QueueId::new(2),
                    queue_offset: QueueOffset::new(9),
                    handle: LogIndex::new(41),
                },
                AckEntry {
                    queue_id: QueueId::new(0),
                    queue_offset: QueueOffset::new(3),
                    handle: LogIndex::new(40),
                },
            ],
        }),
        Command::ChangeInvisible(ChangeInvisible {
            group: "g1".into(),
            topic: "orders".into(),
            queue_id: QueueId::new(2),
            queue_offset: QueueOffset::new(9),
            handle: LogIndex::new(41),
            invisible_ms: 5_000,
            now_ms: 1_700_000_000_500,
        }),
        Command::SendBatch {
            messages: vec![msg(5), msg(6)],
            auto_create_queues: None,
            dedup: Some(DedupParams {
                window_ms: 120_000,
                max_entries: 100_000,
            }),
        },
        Command::PutUser(user()),
        Command::DeleteUser {
            name: "alice".into(),
        },
    ]
}

fn user() -> crate::users::User {
    crate::users::User {
        name: "alice".into(),
        access_key: "AKALICE".into(),
        secret: crate::users::SealedSecret(vec![0xA5; 60]),
        role: crate::users::Role::Consumer,
        topics: vec!["orders*".into(), "audit".into()],
        groups: vec!["*".into()],
    }
}

#[test]
fn put_user_unknown_role_is_corruption() {
    let mut p = Command::PutUser(user())
        .encode()
        .expect("encode")
        .0
        .to_vec();
    // name (2 + 5) and access key (2 + 7) follow the 16-byte header; then the role byte.
    let role_at = 16 + 2 + 5 + 2 + 7;
    assert_eq!(p[role_at], 3);
    p[role_at] = 9;
    let crc = crc32fast::hash(&p[8..]);
    p[4..8].copy_from_slice(&crc.to_le_bytes());
    let e = CommandView::parse(&p).expect_err("role");
    assert!(
        e.is_corruption() && e.to_string().contains("unknown role 9"),
        "{e}"
    );
}

#[test]
fn round_trip_all_kinds() {
    for c in all_commands() {
        let p = c.encode().expect("encode");
        assert_eq!(Command::decode(&p.0).expect("decode"), c);
        assert_eq!(p, c.encode().expect("encode again"), "deterministic");
    }
}

#[test]
fn batch_record_offsets_point_at_records() {
    let ms = vec![msg(1), msg(2), msg(3)];
    let p = Command::batch(ms.clone())
        .encode()
        .expect("encode")
        .0
        .to_vec();
    let offs = record_offsets(&p).expect("offsets");
    assert_eq!(offs[0] as usize, BATCH_FIRST_RECORD_OFFSET);
    for (off, m) in offs.iter().zip(&ms) {
        let rec = encode_message(m).expect("encode");
        assert_eq!(&p[*off as usize..*off as usize + rec.len()], &rec[..]);
        // Each record is independently CRC-valid where it sits.
        assert_eq!(
            &MessageView::parse(&p[*off as usize..])
                .expect("view")
                .to_message(),
            m
        );
    }
    let CommandView::SendBatch { messages: v, .. } = CommandView::parse(&p).expect("parse") else {
        panic!("not a batch")
    };
    assert_eq!(
        v.iter().map(|m| m.offset_in_payload).collect::<Vec<_>>(),
        offs
    );
    assert_eq!(
        message_id(PhysOffset::new(1000), offs[1]).get(),
        1000 + ENTRY_HEADER_LEN as u64 + u64::from(offs[1])
    );
    let admin = Command::DeleteTopic { topic: "t".into() }
        .encode()
        .expect("encode");
    assert!(record_offsets(&admin.0).is_err());
}

#[test]
fn empty_batch_rejected() {
    assert!(Command::batch(vec![]).encode().is_err());
}

#[test]
fn truncated_tail_is_corruption() {
    for c in all_commands() {
        let p = c.encode().expect("encode").0.to_vec();
        for cut in 0..p.len() {
            let e = CommandView::parse(&p[..cut]).expect_err("truncated");
            assert!(e.is_corruption(), "{c:?} cut {cut}: {e}");
        }
    }
}

#[test]
fn every_flipped_bit_is_corruption() {
    for c in all_commands() {
        let p = c.encode().expect("encode").0.to_vec();
        for i in 0..p.len() * 8 {
            let mut b = p.clone();
            b[i / 8] ^= 1 << (i % 8);
            let e = CommandView::parse(&b).expect_err("flipped");
            assert!(e.is_corruption(), "{c:?} bit {i}: {e}");
        }
    }
}

#[test]
fn structural_errors_behind_valid_crc() {
    // A batch whose count claims more records than present, with a recomputed CRC.
    let mut p = Command::batch(vec![msg(1)])
        .encode()
        .expect("encode")
        .0
        .to_vec();
    p[16] = 2;
    let crc = crc32fast::hash(&p[8..]);
    p[4..8].copy_from_slice(&crc.to_le_bytes());
    let e = CommandView::parse(&p).expect_err("count");
    assert!(e.to_string().contains("record 1 of 2 missing"), "{e}");
    // Unknown kind.
    let mut p = Command::DeleteTopic { topic: "t".into() }
        .encode()
        .expect("encode")
        .0
        .to_vec();
    p[9] = 99;
    let crc = crc32fast::hash(&p[8..]);
    p[4..8].copy_from_slice(&crc.to_le_bytes());
    let e = CommandView::parse(&p).expect_err("kind");
    assert!(e.to_string().contains("unknown command kind 99"), "{e}");
}

proptest! {
    #[test]
    fn prop_random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = CommandView::parse(&bytes);
        let _ = record_offsets(&bytes);
    }

    #[test]
    fn prop_batch_offsets(sizes in prop::collection::vec(0usize..50, 1..10)) {
        let ms: Vec<Message> = sizes.iter().map(|s| Message::new("t", QueueId::new(0), vec![7; *s])).collect();
        let p = Command::batch(ms.clone()).encode().expect("encode").0.to_vec();
        let offs = record_offsets(&p).expect("offsets");
        prop_assert_eq!(offs.len(), ms.len());
        for (o, m) in offs.iter().zip(&ms) {
            prop_assert_eq!(&MessageView::parse(&p[*o as usize..]).expect("view").to_message(), m);
        }
    }
}

#[test]
fn auto_create_flag_round_trips_and_zero_is_refused() {
    let c = Command::SendBatch {
        messages: vec![msg(1)],
        auto_create_queues: Some(16),
        dedup: None,
    };
    let p = c.encode().expect("encode").0.to_vec();
    assert_eq!(&p[20..24], &16u32.to_le_bytes());
    let CommandView::SendBatch {
        auto_create_queues, ..
    } = CommandView::parse(&p).expect("parse")
    else {
        panic!("batch expected")
    };
    assert_eq!(auto_create_queues, Some(16));
    let p = Command::batch(vec![msg(1)])
        .encode()
        .expect("encode")
        .0
        .to_vec();
    assert_eq!(&p[20..24], &0u32.to_le_bytes());
    let zero = Command::SendBatch {
        messages: vec![msg(1)],
        auto_create_queues: Some(0),
        dedup: None,
    };
    assert!(zero.encode().is_err());
}

#[test]
fn dedup_trailer_layout_and_old_batches_decode_without_it() {
    let params = DedupParams {
        window_ms: 0x0102_0304_0506_0708,
        max_entries: 77,
    };
    let with = |dedup| Command::SendBatch {
        messages: vec![msg(1), msg(2)],
        auto_create_queues: None,
        dedup,
    };
    // An entry as written before the trailer existed: header, count, auto-create, records.
    let old = with(None).encode().expect("encode").0.to_vec();
    let records: usize = [msg(1), msg(2)].iter().map(encoded_len).sum();
    assert_eq!(old.len(), BATCH_FIRST_RECORD_OFFSET + records);
    let Command::SendBatch { dedup, .. } = Command::decode(&old).expect("old decodes") else {
        panic!("batch expected")
    };
    assert_eq!(dedup, None);
    // The trailer: 16 bytes after the last record; the records stay where they were.
    let new = with(Some(params)).encode().expect("encode").0.to_vec();
    assert_eq!(new.len(), old.len() + 16);
    assert_eq!(&new[16..old.len()], &old[16..]);
    let t = &new[old.len()..];
    assert_eq!(&t[..4], b"DDUP");
    assert_eq!(&t[4..12], &params.window_ms.to_le_bytes());
    assert_eq!(&t[12..16], &77u32.to_le_bytes());
    assert_eq!(Command::decode(&new).expect("decode"), with(Some(params)));
    assert_eq!(
        record_offsets(&new).expect("offsets"),
        record_offsets(&old).expect("offsets")
    );
    // Zero bounds are refused when encoding, and are corruption when decoding.
    for bad in [
        DedupParams {
            window_ms: 0,
            max_entries: 1,
        },
        DedupParams {
            window_ms: 1,
            max_entries: 0,
        },
    ] {
        assert!(with(Some(bad)).encode().is_err());
        let mut b = new.clone();
        let at = old.len();
        b[at + 4..at + 12].copy_from_slice(&bad.window_ms.to_le_bytes());
        b[at + 12..at + 16].copy_from_slice(&bad.max_entries.to_le_bytes());
        let crc = crc32fast::hash(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(CommandView::parse(&b)
            .expect_err("zero bound")
            .is_corruption());
    }
    // Bytes after the last record that are not a trailer are corruption.
    for extra in [1usize, 15, 17] {
        let mut b = old.clone();
        b.extend(std::iter::repeat_n(0x44u8, extra));
        let body_len = (b.len() - COMMAND_HEADER_LEN) as u32;
        b[12..16].copy_from_slice(&body_len.to_le_bytes());
        let crc = crc32fast::hash(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(
            CommandView::parse(&b).expect_err("junk").is_corruption(),
            "{extra}"
        );
    }
}

#[test]
fn pop_bodies_byte_layout_and_refusals() {
    let ack = |entries: Vec<AckEntry>| {
        Command::Ack(Ack {
            group: "g".into(),
            topic: "t".into(),
            entries,
        })
    };
    let e = AckEntry {
        queue_id: QueueId::new(1),
        queue_offset: QueueOffset::new(2),
        handle: LogIndex::new(3),
    };
    let p = ack(vec![e]).encode().expect("encode").0.to_vec();
    assert_eq!(p[9], CommandKind::Ack as u8);
    // group "g" (2 + 1), topic "t" (2 + 1), count, one 20-byte entry.
    assert_eq!(p.len(), COMMAND_HEADER_LEN + 3 + 3 + 4 + 20);
    assert_eq!(&p[22..26], &1u32.to_le_bytes());
    assert_eq!(&p[38..46], &3u64.to_le_bytes());
    assert!(ack(vec![]).encode().is_err(), "empty ack");
    // A count larger than the entries present, CRC recomputed: corruption, no huge alloc.
    let mut b = p.clone();
    b[22..26].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc32fast::hash(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    let err = CommandView::parse(&b).expect_err("count");
    assert!(err.to_string().contains("ack count"), "{err}");
    let Command::Receive(mut r) = all_commands()[7].clone() else {
        panic!("receive expected")
    };
    r.max_messages = 0;
    assert!(Command::Receive(r).encode().is_err(), "receive of nothing");
}

/// `payload` with its body cut by `cut` bytes (or `extra` appended), length and CRC fixed.
fn reframe(payload: &[u8], cut: usize, extra: &[u8]) -> Vec<u8> {
    let mut b = payload[..payload.len() - cut].to_vec();
    b.extend_from_slice(extra);
    let body_len = (b.len() - COMMAND_HEADER_LEN) as u32;
    b[12..16].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32fast::hash(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn receive_flags_trail_and_old_entries_decode() {
    let Command::Receive(fifo) = all_commands()[7].clone() else {
        panic!("receive expected")
    };
    let plain = Receive {
        fifo: false,
        ..fifo.clone()
    };
    let p = Command::Receive(fifo.clone())
        .encode()
        .expect("encode")
        .0
        .to_vec();
    assert_eq!(p[p.len() - 1], 0x01, "flags byte last, FIFO bit set");
    let q = Command::Receive(plain.clone())
        .encode()
        .expect("encode")
        .0
        .to_vec();
    assert_eq!(p.len(), q.len() + 1, "no flags byte when no flag is set");
    // An entry of the format before `flags` (the body ends after the filter) is exactly a
    // non-FIFO one: the FIFO payload without its flags byte.
    let old = reframe(&p, 1, &[]);
    assert_eq!(old, q, "non-FIFO bytes are the old format's");
    assert_eq!(
        Command::decode(&old).expect("old entry decodes"),
        Command::Receive(plain.clone())
    );
    // A present flags byte of 0 (never written) still means no flag.
    assert_eq!(
        Command::decode(&reframe(&q, 0, &[0x00])).expect("decodes"),
        Command::Receive(plain)
    );
    // Unknown flag bits and bytes after the flags are corruption.
    let e = CommandView::parse(&reframe(&p, 1, &[0x03])).expect_err("unknown bit");
    assert!(
        e.is_corruption() && e.to_string().contains("unknown receive flags"),
        "{e}"
    );
    let e = CommandView::parse(&reframe(&p, 0, &[0x01])).expect_err("trailing");
    assert!(
        e.is_corruption() && e.to_string().contains("trailing"),
        "{e}"
    );
}
