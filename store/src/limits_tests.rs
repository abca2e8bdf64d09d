//! Tests of [`super`]: name rules and limits.

use super::*;

#[test]
fn topic_names() {
    validate_topic_name("orders").expect("plain");
    validate_topic_name("%RETRY%g1").expect("system allowed internally");
    validate_topic_name("ns%a|b_c-D9").expect("all chars");
    let e = validate_topic_name("a b").expect_err("space");
    assert_eq!(
        e.to_string(),
        "invalid argument: topic name 'a b' contains ' ' at position 1; allowed: letters \
         a-z A-Z, digits 0-9, '%', '|', '_', '-'"
    );
    assert!(validate_topic_name("").is_err());
    assert!(validate_topic_name("é").is_err());
    assert!(validate_topic_name(".").is_err());
    validate_topic_name(&"a".repeat(127)).expect("127 ok");
    let e = validate_topic_name(&"a".repeat(128)).expect_err("too long");
    assert!(e.to_string().contains("128 characters; at most 127"), "{e}");
}

#[test]
fn reserved_topics_and_groups() {
    for t in [
        "rmq_sys_x",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "%RETRY%g",
        "%DLQ%g",
        "TBW102",
    ] {
        let e = validate_user_topic_name(t).expect_err(t);
        assert!(e.to_string().contains("reserved"), "{e}");
    }
    validate_user_topic_name("rmq_user").expect("not reserved");
    validate_group_name("g-1").expect("ok");
    assert!(validate_group_name("CID_RMQ_SYS_x").is_err());
    assert!(validate_group_name(&"g".repeat(256)).is_err());
}

#[test]
fn limits_validate_names_field() {
    StoreLimits::default().validate().expect("defaults valid");
    let l = StoreLimits {
        max_message_bytes: 0,
        ..StoreLimits::default()
    };
    let e = l.validate().expect_err("zero message size");
    assert!(
        matches!(
            e,
            StoreError::Config {
                field: "max-message-bytes",
                ..
            }
        ),
        "{e}"
    );
    let l = StoreLimits {
        max_batch_bytes: 1 << 20,
        ..StoreLimits::default()
    };
    let e = l.validate().expect_err("batch below message size");
    assert!(
        matches!(
            e,
            StoreError::Config {
                field: "max-batch-bytes",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn send_limit_ranges() {
    type Breaker = fn(&mut StoreLimits);
    let cases: [(&str, Breaker); 5] = [
        ("max-message-bytes", |l| l.max_message_bytes = 1023),
        ("max-message-bytes", |l| {
            l.max_message_bytes = (64 << 20) + 1
        }),
        ("max-batch-messages", |l| l.max_batch_messages = 65_537),
        ("max-batch-bytes", |l| l.max_batch_bytes = (4 << 20) - 1),
        ("max-batch-bytes", |l| l.max_batch_bytes = (256 << 20) + 1),
    ];
    for (want, brk) in cases {
        let mut l = StoreLimits::default();
        brk(&mut l);
        match l.validate().expect_err(want) {
            StoreError::Config { field, .. } => assert_eq!(field, want),
            other => panic!("expected Config, got {other}"),
        }
    }
    let edges = StoreLimits {
        max_message_bytes: 1024,
        max_batch_messages: 65_536,
        max_batch_bytes: 1024,
        ..StoreLimits::default()
    };
    edges.validate().expect("range edges are valid");
}

#[test]
fn limits_serde_kebab_case_and_defaults() {
    let l: StoreLimits = serde_json::from_str(r#"{"max-message-bytes": 1024}"#).expect("parse");
    assert_eq!(l.max_message_bytes, 1024);
    let d = StoreLimits::default();
    assert_eq!(
        (d.max_message_bytes, d.max_batch_messages, d.max_batch_bytes),
        (4 << 20, 1024, 16 << 20),
        "the node's send-limit defaults"
    );
    assert_eq!(l.max_tag_bytes, StoreLimits::default().max_tag_bytes);
    assert!(serde_json::from_str::<StoreLimits>(r#"{"max_message_bytes": 1}"#).is_err());
}

#[test]
fn check_message_limits() {
    let l = StoreLimits {
        max_message_bytes: 16,
        max_keys_per_message: 1,
        max_properties_total_bytes: 5,
        ..StoreLimits::default()
    };
    let mut m = Message::new("t", crate::types::QueueId::new(0), b"1234".to_vec());
    m.tags = "ab".into();
    m.keys = vec!["k".into()];
    m.properties.insert("p".into(), "v".into());
    assert_eq!(message_bytes(&m), 4 + 2 + 1 + 2 + 1);
    m.body = b"1234567890".to_vec().into();
    l.check_message(&m).expect("fits");
    m.body = b"1234567890x".to_vec().into();
    let e = l.check_message(&m).expect_err("size");
    assert_eq!(
        e.to_string(),
        "invalid argument: message is 17 bytes; max-message-bytes is 16"
    );
    m.body.truncate(4);
    m.properties.clear();
    m.keys = vec!["a".into(), "b".into()];
    assert!(l
        .check_message(&m)
        .expect_err("keys")
        .to_string()
        .contains("max-keys-per-message"));
    m.keys = vec![String::new()];
    assert!(l
        .check_message(&m)
        .expect_err("empty key")
        .to_string()
        .contains("empty"));
    m.keys.clear();
    m.properties.insert("abc".into(), "def".into());
    assert!(l
        .check_message(&m)
        .expect_err("props")
        .to_string()
        .contains("in total"));
    m.properties.clear();
    m.topic = "%DLQ%x".into();
    assert!(l.check_message(&m).is_err());
}

#[test]
fn identity_fields_count_as_their_two_properties() {
    use crate::dedup::PRODUCER_ID_PROPERTY;
    use crate::dedup::SEQUENCE_PROPERTY;
    use crate::message::SendIdentity;
    let mut fields = Message::new("t", crate::types::QueueId::new(0), b"body".to_vec());
    fields.identity = Some(SendIdentity {
        producer: "p1".into(),
        sequence: 12_345,
    });
    let props = fields.clone().identity_in_properties();
    assert_eq!(message_bytes(&fields), message_bytes(&props));
    let total = PRODUCER_ID_PROPERTY.len() + SEQUENCE_PROPERTY.len() + "p1".len() + 5;
    for (max_properties, max_total, ok) in
        [(2, total, true), (1, total, false), (2, total - 1, false)]
    {
        let l = StoreLimits {
            max_properties,
            max_properties_total_bytes: max_total as u32,
            ..StoreLimits::default()
        };
        for m in [&fields, &props] {
            assert_eq!(l.check_message(m).is_ok(), ok, "{l:?} {m:?}");
        }
    }
}

#[test]
fn check_batch_and_queues() {
    let l = StoreLimits::default();
    assert!(l.check_batch(0, 0).is_err());
    l.check_batch(1, 100).expect("ok");
    assert!(l.check_batch(1025, 100).is_err());
    l.check_batch(1, 8 << 20)
        .expect("8 MiB fits the 16 MiB default");
    assert!(l.check_batch(1, (16 << 20) + 1).is_err());
    assert!(l.check_queue_count("write queue count", 0).is_err());
    l.check_queue_count("write queue count", 8).expect("ok");
}

#[test]
fn errors_quote_client_input_bounded() {
    assert_eq!(quote("orders"), "'orders'");
    let huge = "a".repeat(60 << 20);
    let q = quote(&huge);
    assert!(q.len() < 100, "{q}");
    assert!(q.ends_with("...' (62914560 bytes)"), "{q}");
    // Multi-byte input is cut on a character boundary.
    let wide = "é".repeat(100);
    assert_eq!(quote(&wide), format!("'{}...' (200 bytes)", "é".repeat(64)));
    for e in [
        validate_topic_name(&huge).expect_err("too long"),
        validate_group_name(&format!("{huge} ")).expect_err("too long"),
        validate_topic_name(&format!("{} x", "a".repeat(100))).expect_err("bad char"),
        crate::filter::TagFilter::parse(&huge).expect_err("too long an expression"),
        crate::filter::TagFilter::parse(&format!("{} || *", "a".repeat(1000)))
            .expect_err("bad tag"),
    ] {
        let m = e.to_string();
        assert!(
            m.len() < 400,
            "{} bytes: {}",
            m.len(),
            &m[..400.min(m.len())]
        );
    }
}

#[test]
fn topic_count_is_bounded() {
    let l = StoreLimits {
        max_topics: 2,
        ..StoreLimits::default()
    };
    l.check_new_topic(1).expect("room for one more");
    let e = l.check_new_topic(2).expect_err("full");
    assert!(matches!(
        e,
        StoreError::LimitReached {
            setting: "max-topics",
            max: 2,
            ..
        }
    ));
    assert!(e.to_string().contains("max-topics is 2"), "{e}");
    assert_eq!(StoreLimits::default().max_topics, 10_000);
    let bad = StoreLimits {
        max_topics: 0,
        ..StoreLimits::default()
    };
    let e = bad.validate().expect_err("zero topics");
    assert!(e.to_string().contains("max-topics"), "{e}");
}
