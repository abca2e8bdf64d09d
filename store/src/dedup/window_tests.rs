//! Unit tests of the dedup window and of the identity properties.

use bytes::Bytes;
use raftmq_raft_log::types::LogId;

use super::*;
use crate::message::Message;
use crate::message::SendIdentity;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

fn send(i: u64, ts: u64) -> StoredSend {
    StoredSend {
        queue_id: QueueId::new(1),
        queue_offset: QueueOffset::new(i),
        phys_offset: PhysOffset::new(1000 + i),
        store_timestamp_ms: ts,
        log_id: LogId::new_term_index(2, 10 + i),
    }
}

const P: DedupParams = DedupParams {
    window_ms: 100,
    max_entries: 3,
};

fn key(i: u64) -> String {
    dedup_key(
        "t",
        &[
            (PRODUCER_ID_PROPERTY, "p"),
            (SEQUENCE_PROPERTY, &i.to_string()),
        ],
    )
    .expect("identity")
}

/// A client message id's key: in the window's table (a sequence key is in runs).
fn uniq(i: u64) -> String {
    dedup_key("t", &[(CLIENT_MESSAGE_ID_PROPERTY, &format!("id{i}"))]).expect("identity")
}

/// Apply's path: a miss hands back the key with its hash, remembered after an expiry; the
/// next lookup of it is a hit with the stored result.
#[test]
fn lookup_then_remember_hashes_once_and_finds_it_next_time() {
    let mut w = DedupWindow::default();
    for i in 0..5u64 {
        let unseen = w.lookup(&key(i)).expect_err("new send");
        w.expire(i * 10, P);
        w.remember(unseen, send(i, i * 10));
        assert_eq!(w.lookup(&key(i)).expect("remembered"), &send(i, i * 10));
        w.validate_all().expect("invariant");
    }
    assert_eq!(w.len(), 3, "capped at max_entries");
    assert!(w.lookup(&key(1)).is_err(), "evicted");
}

#[test]
fn expiry_by_leader_time_and_cap_evict_oldest_first() {
    let mut w = DedupWindow::default();
    for i in 0..3 {
        w.expire(i * 10, P);
        w.insert(&key(i), send(i, i * 10));
    }
    assert_eq!(w.get(&key(1)), Some(&send(1, 10)));
    // Full: one more evicts the oldest only.
    w.expire(30, P);
    assert_eq!((w.len(), w.get(&key(0))), (2, None));
    w.insert(&key(3), send(3, 30));
    // Time: at 110 the send of 10 is 100 ms old: gone; 20 and 30 stay.
    w.expire(110, P);
    assert_eq!(w.get(&key(1)), None);
    assert_eq!(w.get(&key(2)), Some(&send(2, 20)));
    assert_eq!(w.len(), 2);
    w.validate_all().expect("valid");
    // A leader clock that went back expires nothing.
    w.expire(5, P);
    assert_eq!(w.len(), 2);
}

#[test]
fn serde_round_trip_keeps_order_and_lookups() {
    let mut w = DedupWindow::default();
    for i in 0..3 {
        w.insert(&key(i), send(i, i));
    }
    w.expire(
        1000,
        DedupParams {
            window_ms: 999,
            max_entries: 10,
        },
    );
    let json = serde_json::to_string(&w).expect("json");
    let back: DedupWindow = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, w);
    back.validate_all().expect("valid");
    assert_eq!(back.get(&key(2)), Some(&send(2, 2)));
    assert_eq!(back.get(&key(0)), None);
    assert!(serde_json::from_str::<DedupWindow>("{\"x\":1}").is_err());
}

#[test]
fn remove_topic_forgets_only_that_topic() {
    let mut w = DedupWindow::default();
    let other = dedup_key("t2", &[(CLIENT_MESSAGE_ID_PROPERTY, "id1")]).expect("id");
    w.insert(&key(0), send(0, 0));
    w.insert(&other, send(1, 1));
    w.insert(&key(2), send(2, 2));
    w.remove_topic("t");
    assert_eq!(w.len(), 1);
    assert!(w.get(&other).is_some());
    w.validate_all().expect("valid");
}

#[test]
fn keys_name_topic_kind_and_are_unambiguous() {
    let pk = |t: &str, p: &str, s: &str| {
        dedup_key(t, &[(PRODUCER_ID_PROPERTY, p), (SEQUENCE_PROPERTY, s)])
    };
    assert_ne!(pk("t", "ab", "1"), pk("t", "a", "b1"));
    // The exact bytes: keys sit in checkpoints and snapshots, so their form never changes.
    assert_eq!(
        pk("orders", "p-1", "42").as_deref(),
        Some("p6:orders3:p-142")
    );
    let long = "t".repeat(1234);
    let key = pk(&long, "", "7").expect("identity");
    assert_eq!(key, format!("p1234:{long}0:7"));
    let u = dedup_key("t", &[(CLIENT_MESSAGE_ID_PROPERTY, "id")]);
    assert_eq!(u.as_deref(), Some("u1:t0:id"));
    assert_ne!(pk("t", "p", "1"), pk("u", "p", "1"));
    // A producer id without a sequence is no identity; UNIQ_KEY is, unless empty.
    assert_eq!(dedup_key("t", &[(PRODUCER_ID_PROPERTY, "p")]), None);
    assert_eq!(dedup_key("t", &[(CLIENT_MESSAGE_ID_PROPERTY, "")]), None);
    let u = dedup_key("t", &[(CLIENT_MESSAGE_ID_PROPERTY, "1")]);
    assert!(u.is_some());
    assert_ne!(u, pk("t", "", "1"));
    // Producer id and sequence win over UNIQ_KEY (properties sorted by name).
    let both = dedup_key(
        "t",
        &[
            (PRODUCER_ID_PROPERTY, "p"),
            (SEQUENCE_PROPERTY, "1"),
            (CLIENT_MESSAGE_ID_PROPERTY, "x"),
        ],
    );
    assert_eq!(both, pk("t", "p", "1"));
}

#[test]
fn identity_check_names_the_bad_property() {
    let props = |p: Option<&str>, s: Option<&str>| {
        let mut m = Message::default();
        if let Some(p) = p {
            m.properties
                .insert(PRODUCER_ID_PROPERTY.to_string(), p.to_string());
        }
        if let Some(s) = s {
            m.properties
                .insert(SEQUENCE_PROPERTY.to_string(), s.to_string());
        }
        m
    };
    check_identity(&props(None, None)).expect("no identity");
    check_identity(&props(Some("a1-b.c:d_e"), Some("18446744073709551615"))).expect("ok");
    check_identity(&props(Some("a"), Some("0"))).expect("zero is a sequence");
    assert!(has_identity(&props(Some("a"), Some("0"))));
    for (p, s, named) in [
        (Some("a"), None, SEQUENCE_PROPERTY),
        (None, Some("1"), PRODUCER_ID_PROPERTY),
        (Some(""), Some("1"), PRODUCER_ID_PROPERTY),
        (Some("a b"), Some("1"), PRODUCER_ID_PROPERTY),
        (Some("a"), Some("01"), SEQUENCE_PROPERTY),
        (Some("a"), Some("-1"), SEQUENCE_PROPERTY),
        (Some("a"), Some("+1"), SEQUENCE_PROPERTY),
        (Some("a"), Some(""), SEQUENCE_PROPERTY),
        (Some("a"), Some("1 "), SEQUENCE_PROPERTY),
        (Some("a"), Some("18446744073709551616"), SEQUENCE_PROPERTY),
    ] {
        let e = check_identity(&props(p, s)).expect_err("bad");
        assert!(e.to_string().contains(named), "{e}");
    }
    let long = "x".repeat(MAX_PRODUCER_ID_BYTES + 1);
    assert!(check_identity(&props(Some(&long), Some("1"))).is_err());
}

#[test]
fn identity_fields_are_checked_like_the_properties() {
    let fields = |producer: &str| Message {
        identity: Some(SendIdentity {
            producer: Bytes::copy_from_slice(producer.as_bytes()),
            sequence: u64::MAX,
        }),
        ..Message::default()
    };
    check_identity(&fields("a1-b.c:d_e")).expect("ok");
    assert!(has_identity(&fields("a")));
    assert!(!has_identity(&Message::default()));
    for bad in ["", "a b", "é", &"x".repeat(MAX_PRODUCER_ID_BYTES + 1)] {
        let e = check_identity(&fields(bad)).expect_err("bad producer id");
        assert!(e.to_string().contains("producer id"), "{e}");
    }
    // Every byte value: exactly [A-Za-z0-9._:-] allowed.
    for b in 0..=255u8 {
        let mut m = fields("a");
        if let Some(id) = m.identity.as_mut() {
            id.producer = Bytes::copy_from_slice(&[b'a', b]);
        }
        let allowed = b.is_ascii_alphanumeric() || b"._:-".contains(&b);
        assert_eq!(check_identity(&m).is_ok(), allowed, "byte {b:#04x}");
    }
    // Fields and either property: given twice, refused (the record could hold only one).
    for name in [PRODUCER_ID_PROPERTY, SEQUENCE_PROPERTY] {
        let mut m = fields("a");
        m.properties.insert(name.to_string(), "1".to_string());
        let e = check_identity(&m).expect_err("twice");
        assert!(
            e.to_string().contains("given twice") && e.to_string().contains(name),
            "{e}"
        );
    }
}

#[test]
fn decimal_writes_every_u64() {
    let mut digits = [0u8; 20];
    for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX / 10, u64::MAX] {
        assert_eq!(decimal(n, &mut digits), n.to_string());
    }
}

#[test]
fn evicted_positions_never_match_and_are_dropped_in_passes() {
    let p = DedupParams {
        window_ms: 1_000_000,
        max_entries: 100,
    };
    let mut w = DedupWindow::default();
    for i in 0..1_000u64 {
        w.expire(i, p);
        assert_eq!(w.get(&uniq(i)), None);
        w.insert(&uniq(i), send(i, i));
        // Live positions: the newest 100; evicted ones stay in the table for a while but
        // never answer, and at most as many as live ones (64 at least) are kept.
        assert!(w.table_len() <= 2 * 100 + 1, "{} positions", w.table_len());
        if i % 97 == 0 {
            w.validate_all().expect("valid");
        }
    }
    for i in 0..900 {
        assert_eq!(w.get(&uniq(i)), None, "evicted {i} answered");
    }
    for i in 900..1_000 {
        assert_eq!(w.get(&uniq(i)), Some(&send(i, i)), "live {i}");
    }
    // A key evicted and sent again is remembered anew (its old position does not match).
    w.expire(2_000, p);
    w.insert(&uniq(5), send(5, 2_000));
    assert_eq!(w.get(&uniq(5)), Some(&send(5, 2_000)));
    w.validate_all().expect("valid");
    // Serde keeps only the live sends.
    let json = serde_json::to_string(&w).expect("ser");
    let back: DedupWindow = serde_json::from_str(&json).expect("de");
    assert_eq!(back, w);
    assert_eq!(back.table_len(), back.len());
    // Sequence keys in order are in runs, not in the table.
    let mut seqs = DedupWindow::default();
    for i in 0..1_000u64 {
        seqs.expire(i, p);
        seqs.insert(&key(i), send(i, i));
    }
    assert_eq!((seqs.len(), seqs.table_len()), (100, 0));
    seqs.validate_all().expect("valid");
}

/// Keys share one buffer: evicted ones are dropped from its front once they are many, and
/// every remembered key is still found (and nothing else) across those compactions.
#[test]
fn evicted_keys_are_compacted_away_and_lookups_stay_right() {
    let p = DedupParams {
        window_ms: u64::MAX,
        max_entries: 1000,
    };
    let mut w = DedupWindow::default();
    for i in 0..20_000u64 {
        w.expire(i, p);
        w.insert(&key(i), send(i, i));
        if i % 997 == 0 {
            w.validate_all().expect("invariant");
            assert_eq!(w.get(&key(i)), Some(&send(i, i)));
            assert_eq!(
                w.get(&key(i.saturating_sub(999))),
                Some(&send(i.saturating_sub(999), i.saturating_sub(999)))
            );
            if i >= 1000 {
                assert_eq!(w.get(&key(i - 1000)), None, "evicted");
            }
        }
    }
    assert_eq!(w.len(), 1000);
    // The buffer holds about the live keys (plus up to as many evicted ones), not all 20,000.
    let live: usize = (19_000..20_000u64).map(|i| key(i).len()).sum();
    assert!(
        w.keys_len() <= (2 * live).max(64 << 10) + 64,
        "{} bytes kept",
        w.keys_len()
    );
    let copy = w.clone();
    assert_eq!(copy, w);
    copy.validate_all().expect("a clone is whole");
}

/// A lookup's key waits at the end of the buffer until the next lookup: keys of hits and of
/// sends never remembered do not pile up, and a stale miss is not remembered.
#[test]
fn tentative_keys_are_dropped_unless_remembered() {
    let mut w = DedupWindow::default();
    w.insert(&key(1), send(1, 1));
    let kept = w.keys_len();
    assert_eq!(w.lookup(&key(1)).ok(), Some(&send(1, 1)), "a hit");
    assert!(w.lookup(&key(2)).is_err(), "a miss, never remembered");
    assert!(w.lookup(&key(2)).is_err(), "still a miss");
    let last = key(2).len();
    assert_eq!(
        w.keys_len(),
        kept + last,
        "no tentative key left but the last one"
    );
    // A miss made stale by a later lookup is refused, not remembered under the wrong key.
    let stale = w.lookup(&key(3)).expect_err("new");
    let fresh = w.lookup(&key(4)).expect_err("new");
    w.remember(stale, send(3, 3));
    assert_eq!((w.len(), w.get(&key(3))), (1, None));
    w.remember(fresh, send(4, 4));
    assert_eq!(w.get(&key(4)), Some(&send(4, 4)));
    w.validate_all().expect("invariant");
}

mod model {
    //! The window against a plain list of (key, send), oldest first, under random sends,
    //! expiries, topic deletions and copies: long keys, so evicted keys get compacted away.
    //! The keys: sequences of a few producers (ids ending in a digit), in order and out of
    //! it, with retries; client message ids; and sequences with a leading zero.
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::super::*;
    use super::send;
    use crate::dedup::CLIENT_MESSAGE_ID_PROPERTY;
    use crate::dedup::PRODUCER_ID_PROPERTY;
    use crate::dedup::SEQUENCE_PROPERTY;

    #[derive(Clone, Debug)]
    enum Op {
        /// A message of topic `topic` with identity `id` arriving `dt` ms after the last one;
        /// dispatched (remembered on a miss) unless `refused`.
        Send {
            topic: u8,
            id: u8,
            dt: u8,
            refused: bool,
        },
        /// The next `n` sequences of producer `producer` of topic `topic`, `dt` ms apart
        /// (a producer's usual run).
        Next {
            topic: u8,
            producer: u8,
            n: u8,
            dt: u8,
        },
        RemoveTopic(u8),
        /// Replace the window with a copy (clone, or its serde form).
        Copy {
            serde: bool,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            60 => (0..3u8, 0..64u8, 0..40u8, any::<bool>()).prop_map(|(topic, id, dt, r)| {
                Op::Send { topic, id, dt, refused: r && id % 4 == 0 }
            }),
            20 => (0..3u8, 0..3u8, 1..12u8, 0..20u8).prop_map(|(topic, producer, n, dt)| {
                Op::Next { topic, producer, n, dt }
            }),
            1 => (0..3u8).prop_map(Op::RemoveTopic),
            1 => any::<bool>().prop_map(|serde| Op::Copy { serde }),
        ]
    }

    /// Identities 0..48: producer `id / 16`, sequence `id % 16`; 48..56: client message ids;
    /// 56..64: sequences with a leading zero (in the table, as client message ids).
    fn key_of(topic: u8, id: u8) -> String {
        let t = format!("t{topic}");
        match id {
            0..48 => seq_key(&t, id / 16, u64::from(id % 16)),
            48..56 => {
                dedup_key(&t, &[(CLIENT_MESSAGE_ID_PROPERTY, &format!("m{id}"))]).expect("identity")
            }
            _ => dedup_key(
                &t,
                &[
                    (PRODUCER_ID_PROPERTY, &producer(0)),
                    (SEQUENCE_PROPERTY, &format!("0{id}")),
                ],
            )
            .expect("identity"),
        }
    }

    /// A long producer id (so keys get compacted), ending in a digit as the sequence begins.
    fn producer(p: u8) -> String {
        format!("p{p}").repeat(1500)
    }

    fn seq_key(topic: &str, p: u8, seq: u64) -> String {
        let seq = seq.to_string();
        dedup_key(
            topic,
            &[
                (PRODUCER_ID_PROPERTY, &producer(p)),
                (SEQUENCE_PROPERTY, &seq),
            ],
        )
        .expect("identity")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn window_matches_a_plain_list(ops in proptest::collection::vec(op(), 1..400), max in 1..30u32) {
            let params = DedupParams { window_ms: 300, max_entries: max };
            let mut w = DedupWindow::default();
            let mut model: VecDeque<(String, StoredSend)> = VecDeque::new();
            let mut now = 0u64;
            let mut n = 0u64;
            // Per topic and producer, the next sequence of `Op::Next` (from 10: above and
            // among the `Op::Send` ones).
            let mut next = [[10u64; 3]; 3];
            for op in ops {
                let sends = match op {
                    Op::Send { topic, id, dt, refused } => vec![(key_of(topic, id), dt, refused)],
                    Op::Next { topic, producer, n, dt } => (0..n)
                        .map(|_| {
                            let seq = &mut next[usize::from(topic)][usize::from(producer)];
                            *seq += 1;
                            (seq_key(&format!("t{topic}"), producer, *seq - 1), dt, false)
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                for (key, dt, refused) in sends {
                    now += u64::from(dt);
                    n += 1;
                    while model.front().is_some_and(|(_, s)| {
                        s.store_timestamp_ms + params.window_ms <= now
                            || model.len() >= max as usize
                    }) {
                        model.pop_front();
                    }
                    w.expire(now, params);
                    let want = model.iter().find(|(k, _)| *k == key).map(|(_, s)| *s);
                    match (w.lookup(&key), want) {
                        (Ok(got), Some(want)) => prop_assert_eq!(*got, want),
                        (Err(unseen), None) => {
                            if !refused {
                                w.remember(unseen, send(n, now));
                                model.push_back((key, send(n, now)));
                            }
                        }
                        (got, want) => prop_assert!(false, "lookup {:?}, model {:?}", got.ok(), want),
                    }
                    w.validate().map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
                match op {
                    Op::Send { .. } | Op::Next { .. } => {}
                    Op::RemoveTopic(t) => {
                        let topic = format!("t{t}");
                        w.remove_topic(&topic);
                        let prefix = format!("{}:{topic}", topic.len());
                        model.retain(|(k, _)| !k[1..].starts_with(&prefix));
                    }
                    Op::Copy { serde: false } => w = w.clone(),
                    Op::Copy { serde: true } => {
                        let json = serde_json::to_string(&w).expect("json");
                        w = serde_json::from_str(&json).expect("parse");
                    }
                }
                prop_assert_eq!(w.len(), model.len());
                w.validate_all().map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            for (k, s) in &model {
                prop_assert_eq!(w.get(k), Some(s));
            }
        }
    }
}

/// A batch's path: its keys hashed and prefetched first, then looked up with those hashes;
/// a key twice in one batch is a hit the second time, as with `lookup`.
#[test]
fn lookups_with_prefetched_hashes_are_lookups() {
    let mut w = DedupWindow::default();
    w.insert(&key(1), send(1, 0));
    let mut scratch = String::new();
    let batch = [key(1), key(2), key(2)];
    let hashes: Vec<u64> = batch
        .iter()
        .map(|k| w.hash_with(&mut scratch, |s| s.push_str(k)))
        .collect();
    assert_eq!(hashes[1], hashes[2]);
    w.prefetch(hashes.iter().copied());
    let hit = w.lookup_hashed(Some(hashes[0]), |s| s.push_str(&batch[0]));
    assert_eq!(hit.ok(), Some(&send(1, 0)));
    let unseen = w
        .lookup_hashed(Some(hashes[1]), |s| s.push_str(&batch[1]))
        .expect_err("new key");
    w.remember(unseen, send(2, 0));
    let again = w.lookup_hashed(Some(hashes[2]), |s| s.push_str(&batch[2]));
    assert_eq!(again.ok(), Some(&send(2, 0)));
    assert_eq!(w.len(), 2);
    w.validate_all().expect("valid");
}
