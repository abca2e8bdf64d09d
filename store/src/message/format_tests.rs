//! Tests of the message record format: round trips, truncation, flipped bits.

use proptest::prelude::*;

use super::*;
use crate::dedup::PRODUCER_ID_PROPERTY;
use crate::dedup::SEQUENCE_PROPERTY;
use crate::message::SendIdentity;
use crate::types::QueueId;

pub(crate) fn sample() -> Message {
    let mut m = Message::new("orders", QueueId::new(3), b"hello body".to_vec());
    m.flags = 7;
    m.born_timestamp_ms = 1_700_000_000_000;
    m.store_timestamp_ms = 1_700_000_000_123;
    m.born_host = "10.0.0.1:5000".into();
    m.tags = "TagA".into();
    m.keys = vec!["k1".into(), "order-42".into()];
    m.properties.insert("b".into(), "2".into());
    m.properties.insert("a".into(), "1".into());
    m
}

#[test]
fn round_trip() {
    let m = sample();
    let bytes = encode(&m).expect("encode");
    assert_eq!(bytes.len(), encoded_len(&m));
    assert_eq!(peek_record_len(&bytes), Some(bytes.len() as u32));
    assert_eq!(decode(&bytes).expect("decode"), m);
    let v = MessageView::parse(&bytes).expect("view");
    assert_eq!(v.topic, "orders");
    assert_eq!(v.keys.iter().collect::<Vec<_>>(), vec!["k1", "order-42"]);
    assert_eq!(v.keys.len(), 2);
    let props: Vec<_> = v.properties.iter().collect();
    assert_eq!(props, vec![("a", "1"), ("b", "2")]);
    assert_eq!(v.properties.len(), 2);
    assert_eq!(v.properties.get("b"), Some("2"));
    assert_eq!(v.properties.get("c"), None);
    assert_eq!(v.properties.get(""), None);
    assert_eq!(v.body, b"hello body");
    let empty = Message::default();
    let bytes = encode(&empty).expect("encode");
    assert_eq!(bytes.len(), MESSAGE_MIN_LEN);
    assert_eq!(decode(&bytes).expect("decode"), empty);
}

#[test]
fn a_message_in_its_record_buffer_shares_the_body_and_equals_the_copy() {
    let rec = bytes::Bytes::from(encode(&sample()).expect("encode"));
    let v = MessageView::parse(&rec).expect("view");
    let shared = v.to_message_in(&rec);
    assert_eq!(shared, v.to_message());
    let at = shared.body.as_ptr() as usize - rec.as_ptr() as usize;
    assert!(
        at + shared.body.len() <= rec.len(),
        "the body is a slice of the record"
    );
    // A buffer the view was not parsed from: the body is copied, nothing panics.
    let other = bytes::Bytes::from(vec![0u8; 4]);
    let copied = v.to_message_in(&other);
    assert_eq!(copied, v.to_message());
    let empty = Message::default();
    let rec = bytes::Bytes::from(encode(&empty).expect("encode"));
    let v = MessageView::parse(&rec).expect("view");
    assert_eq!(v.to_message_in(&rec), empty);
}

#[test]
fn deterministic() {
    let a = encode(&sample()).expect("encode");
    let b = encode(&sample()).expect("encode");
    assert_eq!(a, b);
}

#[test]
fn view_ignores_trailing_bytes() {
    let mut bytes = encode(&sample()).expect("encode");
    let len = bytes.len();
    bytes.extend_from_slice(&[9; 10]);
    let v = MessageView::parse(&bytes).expect("view");
    assert_eq!(v.record_len as usize, len);
    assert!(decode(&bytes).expect_err("trailing").is_corruption());
}

#[test]
fn truncated_tail_is_corruption() {
    let bytes = encode(&sample()).expect("encode");
    for cut in 0..bytes.len() {
        let e = MessageView::parse(&bytes[..cut]).expect_err("truncated");
        assert!(e.is_corruption(), "cut {cut}: {e}");
    }
}

#[test]
fn every_flipped_bit_is_corruption() {
    let bytes = encode(&sample()).expect("encode");
    for i in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        let e = decode(&b).expect_err("flipped");
        assert!(e.is_corruption(), "bit {i}: {e}");
    }
}

#[test]
fn trusted_parse_skips_crc_only() {
    let mut bytes = encode(&sample()).expect("encode");
    let last = bytes.len() - 1;
    bytes[last] ^= 1; // body byte
    assert!(MessageView::parse(&bytes).is_err());
    assert_eq!(
        MessageView::parse_trusted(&bytes)
            .expect("trusted")
            .body
            .len(),
        10
    );
    bytes[4] ^= 1; // magic still checked
    assert!(MessageView::parse_trusted(&bytes).is_err());
}

#[test]
fn error_names_source_and_offset() {
    let mut bytes = encode(&sample()).expect("encode");
    bytes[4] = 0;
    let e = decode(&bytes)
        .expect_err("magic")
        .locate("commitlog/00000000000000000000", 1000);
    let s = e.to_string();
    assert!(
        s.starts_with("corruption in commitlog/00000000000000000000 at offset 1004: bad magic"),
        "{s}"
    );
}

#[test]
fn oversized_field_rejected_without_output() {
    let mut m = sample();
    m.tags = "x".repeat(70_000);
    let mut out = vec![1, 2, 3];
    assert!(encode_into(&m, &mut out).is_err());
    assert_eq!(out, vec![1, 2, 3]);
}

#[test]
fn unsorted_properties_rejected() {
    // Build a record with two equal property names by hand-patching: encode {a,b}, rename b->a.
    let mut m = Message::default();
    m.properties.insert("a".into(), String::new());
    m.properties.insert("b".into(), String::new());
    let mut bytes = encode(&m).expect("encode");
    let pos = bytes.len() - 4 - 2 - 1; // body len (4), value len (2), name byte 'b'
    assert_eq!(bytes[pos], b'b');
    bytes[pos] = b'a';
    let crc = crc32fast::hash(&bytes[MESSAGE_CRC_START..]);
    bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    let e = decode(&bytes).expect_err("dup");
    assert!(e.to_string().contains("strictly increasing"), "{e}");
}

/// A record of `keys` with its CRC made valid again after `patch` changed its bytes.
fn patched(keys: &[&str], patch: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let m = Message {
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        ..Message::default()
    };
    let mut bytes = encode(&m).expect("encode");
    patch(&mut bytes);
    let crc = crc32fast::hash(&bytes[MESSAGE_CRC_START..]);
    bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Where the first key's bytes start in a record of [`Message::default`]'s empty strings:
/// header, three empty strings, the key count, the key's length.
const FIRST_KEY_AT: usize = MESSAGE_HEADER_LEN + 3 * 2 + 2 + 2;

#[test]
fn strings_of_128_to_255_bytes_parse_too() {
    // Their length prefix is not UTF-8, so the strings are checked one by one.
    let mut m = sample();
    m.keys = vec!["k".repeat(128), "é".repeat(100), "x".into()];
    m.properties.insert("p".repeat(200), "v".repeat(255));
    let bytes = encode(&m).expect("encode");
    let v = MessageView::parse(&bytes).expect("view");
    let keys: Vec<_> = v.keys.iter().collect();
    assert_eq!(keys, m.keys.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        v.properties.get(&"p".repeat(200)),
        Some("v".repeat(255).as_str())
    );
    assert_eq!(decode(&bytes).expect("decode"), m);
}

#[test]
fn a_key_that_is_not_utf8_is_corruption_at_the_key() {
    let bytes = patched(&["ab"], |b| b[FIRST_KEY_AT] = 0xff);
    let e = MessageView::parse(&bytes).expect_err("not UTF-8");
    let s = e.to_string();
    assert!(
        s.contains(&format!("offset {FIRST_KEY_AT}: key is not UTF-8")),
        "{s}"
    );
    assert!(MessageView::parse_trusted(&bytes).is_err());
}

#[test]
fn a_character_split_by_a_length_prefix_is_corruption() {
    // The first key ends in 0xc3 and the second key's length is 169 (0xa9 0x00): read as one
    // text, 0xc3 0xa9 is "é", but the first key alone is not UTF-8.
    let second = "y".repeat(169);
    let bytes = patched(&["ab", &second], |b| b[FIRST_KEY_AT + 1] = 0xc3);
    assert_eq!(bytes[FIRST_KEY_AT + 2], 0xa9, "the second key's length");
    let e = MessageView::parse(&bytes).expect_err("split");
    let s = e.to_string();
    assert!(
        s.contains(&format!("offset {FIRST_KEY_AT}: key is not UTF-8")),
        "{s}"
    );
}

#[test]
fn a_property_value_that_is_not_utf8_is_corruption() {
    let mut m = Message::default();
    m.properties.insert("a".into(), "bc".into());
    let mut bytes = encode(&m).expect("encode");
    let at = bytes.len() - 4 - 1; // body length, then the value's last byte
    assert_eq!(bytes[at], b'c');
    bytes[at] = 0x80;
    let crc = crc32fast::hash(&bytes[MESSAGE_CRC_START..]);
    bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    let e = decode(&bytes).expect_err("value");
    assert!(e.to_string().contains("property value is not UTF-8"), "{e}");
}

fn arb_message() -> impl Strategy<Value = Message> {
    (
        "[a-z%|_-]{0,20}",
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        ".{0,10}",
        prop::collection::vec(".{0,8}", 0..4),
        prop::collection::btree_map(".{0,5}", ".{0,5}", 0..4),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(
            |(topic, queue_id, flags, ts, tags, keys, properties, body)| Message {
                topic,
                queue_id: QueueId::new(queue_id),
                flags,
                born_timestamp_ms: ts,
                store_timestamp_ms: ts.wrapping_add(1),
                born_host: "h:1".into(),
                tags,
                keys,
                properties,
                body: body.into(),
                identity: None,
            },
        )
}

#[test]
fn identity_fields_go_between_the_properties_in_name_order() {
    let mut m = sample();
    for k in ["A", "RAFTMQ_Q", "RAFTMQ_R", "Z"] {
        m.properties.insert(k.into(), "v".into());
    }
    m.identity = Some(SendIdentity {
        producer: "prod-1".into(),
        sequence: 0,
    });
    let bytes = encode(&m).expect("encode");
    assert_eq!(bytes.len(), encoded_len(&m));
    let back = decode(&bytes).expect("decode");
    assert_eq!(back, m.clone().identity_in_properties());
    assert_eq!(back.properties[PRODUCER_ID_PROPERTY], "prod-1");
    assert_eq!(back.properties[SEQUENCE_PROPERTY], "0");
    // A map entry with an identity name as well: refused, nothing written.
    m.properties.insert(SEQUENCE_PROPERTY.into(), "0".into());
    let mut out = Vec::new();
    let e = encode_into(&m, &mut out).expect_err("twice");
    assert!(e.to_string().contains(SEQUENCE_PROPERTY), "{e}");
    assert!(out.is_empty(), "nothing appended");
}

#[test]
fn encoded_len_counts_every_sequence_length() {
    for sequence in [0, 1, 9, 10, 99, 100, 999_999, 1_000_000, u64::MAX] {
        let mut m = sample();
        m.identity = Some(SendIdentity {
            producer: "p".into(),
            sequence,
        });
        let bytes = encode(&m).expect("encode");
        assert_eq!(bytes.len(), encoded_len(&m), "sequence {sequence}");
    }
}

proptest! {
    #[test]
    fn prop_identity_fields_give_the_bytes_of_the_properties(
        m in arb_message(),
        producer in "[A-Za-z0-9._:-]{1,20}",
        sequence in any::<u64>(),
    ) {
        let mut fields = m;
        fields.identity = Some(SendIdentity { producer: producer.into(), sequence });
        let props = fields.clone().identity_in_properties();
        let bytes = encode(&fields).expect("encode fields");
        prop_assert_eq!(bytes.len(), encoded_len(&fields));
        prop_assert_eq!(&bytes, &encode(&props).expect("encode properties"));
        prop_assert_eq!(decode(&bytes).expect("decode"), props);
    }

    #[test]
    fn prop_round_trip(m in arb_message()) {
        let bytes = encode(&m).expect("encode");
        prop_assert_eq!(decode(&bytes).expect("decode"), m);
    }

    #[test]
    fn prop_long_strings_round_trip(
        m in arb_message(),
        keys in prop::collection::vec(".{0,90}", 0..3),
        value in ".{0,150}",
    ) {
        // Up to about 360 bytes a string: length prefixes of every kind, UTF-8 or not.
        let mut m = m;
        m.keys = keys;
        m.properties.insert("long".into(), value);
        let bytes = encode(&m).expect("encode");
        prop_assert_eq!(decode(&bytes).expect("decode"), m);
    }

    #[test]
    fn prop_random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = MessageView::parse(&bytes);
        let _ = MessageView::parse_trusted(&bytes);
    }

    #[test]
    fn prop_mutated_record_never_panics(m in arb_message(), idx in any::<usize>(), val in any::<u8>()) {
        let mut bytes = encode(&m).expect("encode");
        let i = idx % bytes.len();
        bytes[i] = val;
        let _ = MessageView::parse_trusted(&bytes);
        if let Ok(d) = decode(&bytes) {
            // Only an unchanged byte can still decode under a valid CRC.
            prop_assert_eq!(d, m);
        }
    }
}
