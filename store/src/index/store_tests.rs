//! Tests of the IndexStore: put, query, roll, collisions, replay, truncation, deletion,
//! recovery, power loss.

use proptest::prelude::*;

use super::*;
use crate::index::format::HEADER_LEN;

fn cfg(slots: u32, units: u32) -> IndexConfig {
    IndexConfig {
        slots_per_file: slots,
        max_units_per_file: units,
    }
}

/// The IndexStore with physical offsets as bare numbers, so the tests read as byte positions.
trait RawPhys {
    fn put_at(&mut self, key: &str, phys: u64, store_ts: TimestampMs) -> Result<IndexPut>;
    fn query_raw(
        &self,
        key: &str,
        begin_ts: TimestampMs,
        end_ts: TimestampMs,
        max: usize,
    ) -> Vec<u64>;
    fn truncate_beyond(&mut self, phys: u64) -> Result<u64>;
    fn delete_below(&mut self, min_phys: u64) -> Result<usize>;
    fn end_raw(&self) -> u64;
}

impl RawPhys for IndexStore {
    fn put_at(&mut self, key: &str, phys: u64, store_ts: TimestampMs) -> Result<IndexPut> {
        self.put(key, PhysOffset::new(phys), store_ts)
    }

    fn query_raw(
        &self,
        key: &str,
        begin_ts: TimestampMs,
        end_ts: TimestampMs,
        max: usize,
    ) -> Vec<u64> {
        let found = self.query(key, begin_ts, end_ts, max);
        found.into_iter().map(PhysOffset::get).collect()
    }

    fn truncate_beyond(&mut self, phys: u64) -> Result<u64> {
        self.truncate_phys_beyond(PhysOffset::new(phys))
    }

    fn delete_below(&mut self, min_phys: u64) -> Result<usize> {
        self.delete_files_below(PhysOffset::new(min_phys))
    }

    fn end_raw(&self) -> u64 {
        self.end_phys().get()
    }
}

fn collide(_: &str) -> u64 {
    42
}

#[test]
fn put_query_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(16, 100)).expect("open");
    assert!(s.query_raw("k", 0, u64::MAX, 10).is_empty());
    for i in 0..10u64 {
        s.put_at(&format!("k{}", i % 3), 100 + i, 1000 + i)
            .expect("put");
    }
    assert_eq!(s.query_raw("k1", 0, u64::MAX, 10), vec![107, 104, 101]);
    assert_eq!(s.query_raw("k1", 0, u64::MAX, 2), vec![107, 104]);
    assert_eq!(s.query_raw("k1", 1002, 1005, 10), vec![104]);
    assert!(s.query_raw("nope", 0, u64::MAX, 10).is_empty());
    assert_eq!(s.end_raw(), 109);
    s.flush().expect("flush");
    drop(s);
    let s = IndexStore::open(d.path(), cfg(16, 100)).expect("reopen");
    assert_eq!(s.query_raw("k1", 0, u64::MAX, 10), vec![107, 104, 101]);
    assert!(IndexStore::open(d.path(), cfg(8, 100))
        .expect_err("geometry")
        .is_corruption());
}

#[test]
fn rolls_when_full_and_queries_newest_first() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(4, 3)).expect("open");
    for i in 0..8u64 {
        s.put_at("k", 10 * i + 1, 1000 + i).expect("put");
    }
    assert_eq!(s.file_count(), 3);
    assert_eq!(
        s.query_raw("k", 0, u64::MAX, 100),
        vec![71, 61, 51, 41, 31, 21, 11, 1]
    );
    assert_eq!(s.query_raw("k", 1002, 1004, 100), vec![41, 31, 21]);
    assert_eq!(s.query_raw("k", 0, u64::MAX, 4), vec![71, 61, 51, 41]);
}

#[test]
fn forced_collisions_return_all_candidates() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open_with_hasher(d.path(), cfg(4, 100), collide).expect("open");
    s.put_at("a", 1, 5).expect("put");
    s.put_at("b", 2, 5).expect("put");
    s.put_at("c", 2, 5).expect("put");
    // Same hash, same phys: replay-equivalent, not stored twice.
    assert_eq!(s.query_raw("a", 0, u64::MAX, 10), vec![2, 1]);
    assert_eq!(
        s.query_raw("zzz", 0, u64::MAX, 10),
        vec![2, 1],
        "exact check is the caller's"
    );
}

#[test]
fn slot_collisions_keep_hashes_apart() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(1, 100)).expect("open");
    for (i, k) in ["a", "b", "c", "a"].iter().enumerate() {
        s.put_at(k, i as u64 + 1, 0).expect("put");
    }
    assert_eq!(s.query_raw("a", 0, u64::MAX, 10), vec![4, 1]);
    assert_eq!(s.query_raw("b", 0, u64::MAX, 10), vec![2]);
}

#[test]
fn replay_is_idempotent() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(8, 2)).expect("open");
    assert_eq!(s.put_at("a", 10, 0).expect("put"), IndexPut::Added);
    assert_eq!(s.put_at("b", 10, 0).expect("put"), IndexPut::Added);
    // The file is full now; replaying keys of phys 10 must look into the sealed file.
    assert_eq!(s.put_at("a", 10, 0).expect("put"), IndexPut::AlreadyIndexed);
    assert_eq!(s.put_at("b", 10, 0).expect("put"), IndexPut::AlreadyIndexed);
    assert_eq!(s.put_at("x", 5, 0).expect("put"), IndexPut::AlreadyIndexed);
    assert!(s.put_at("x", 0, 0).is_err(), "phys 0 is never a message");
    assert_eq!(s.put_at("c", 10, 0).expect("put"), IndexPut::Added);
    assert_eq!(s.file_count(), 2);
    assert_eq!(s.query_raw("a", 0, u64::MAX, 10), vec![10]);
}

#[test]
fn truncate_and_delete() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(4, 3)).expect("open");
    for i in 0..8u64 {
        s.put_at("k", 10 * i + 1, 1000 + i).expect("put");
    }
    assert_eq!(s.truncate_beyond(45).expect("truncate"), 3);
    assert_eq!(s.file_count(), 2);
    assert_eq!(s.query_raw("k", 0, u64::MAX, 100), vec![41, 31, 21, 11, 1]);
    assert_eq!(s.truncate_beyond(1000).expect("noop"), 0);
    s.put_at("k", 45, 2000).expect("put after truncate");
    drop(s);
    let mut s = IndexStore::open(d.path(), cfg(4, 3)).expect("reopen");
    assert_eq!(
        s.query_raw("k", 0, u64::MAX, 100),
        vec![45, 41, 31, 21, 11, 1]
    );
    assert_eq!(s.delete_below(20).expect("delete"), 0);
    assert_eq!(s.delete_below(22).expect("delete"), 1);
    assert_eq!(s.query_raw("k", 0, u64::MAX, 100), vec![45, 41, 31]);
    assert_eq!(s.delete_below(1000).expect("delete"), 1);
    assert_eq!(s.file_count(), 0);
    s.put_at("k", 2000, 0).expect("put");
    assert_eq!(s.query_raw("k", 0, u64::MAX, 100), vec![2000]);
    assert_eq!(s.truncate_beyond(0).expect("all"), 1);
    assert_eq!(s.file_count(), 0);
}

#[test]
fn recovery_cuts_units_past_header_and_broken_chains() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(4, 10)).expect("open");
    for i in 0..5u64 {
        s.put_at(&format!("k{i}"), i + 1, 0).expect("put");
    }
    drop(s);
    let p = d.path().join("00000000000000000000");
    let mut b = std::fs::read(&p).expect("read");
    // Break the chain link of unit 4 (its `prev` field): units 4 and 5 are cut.
    let unit4 = HEADER_LEN + 4 * 4 + 24 * 3;
    b[unit4 + 20] ^= 0x40;
    std::fs::write(&p, &b).expect("write");
    let s = IndexStore::open(d.path(), cfg(4, 10)).expect("reopen");
    assert_eq!(s.end_raw(), 3);
    assert_eq!(s.query_raw("k3", 0, u64::MAX, 10), Vec::<u64>::new());
    assert_eq!(s.query_raw("k2", 0, u64::MAX, 10), vec![3]);
    drop(s);
    // A flipped header bit is a corruption error naming the file.
    let mut b = std::fs::read(&p).expect("read");
    b[20] ^= 1;
    std::fs::write(&p, &b).expect("write");
    let e = IndexStore::open(d.path(), cfg(4, 10)).expect_err("header");
    assert!(
        e.to_string().contains("00000000000000000000") && e.is_corruption(),
        "{e}"
    );
}

#[test]
fn new_file_when_time_delta_overflows() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(4, 10)).expect("open");
    s.put_at("k", 1, 0).expect("put");
    s.put_at("k", 2, u64::from(u32::MAX)).expect("put");
    assert_eq!(s.file_count(), 1);
    s.put_at("k", 3, u64::from(u32::MAX) + 1).expect("put");
    assert_eq!(s.file_count(), 2);
    assert_eq!(
        s.query_raw("k", u64::from(u32::MAX), u64::MAX, 10),
        vec![3, 2]
    );
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u8),
    Truncate(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..6, 0u8..3).prop_map(|(k, d)| Op::Put(k, d)),
        1 => any::<u8>().prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
    ]
}

fn weak_hash(k: &str) -> u64 {
    u64::from(k.as_bytes()[0] % 3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn prop_index_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        let d = tempfile::tempdir().expect("tempdir");
        let c = cfg(2, 4);
        let mut s = IndexStore::open_with_hasher(d.path(), c.clone(), weak_hash).expect("open");
        let mut model: Vec<(String, u64)> = Vec::new();
        let mut phys = 1u64;
        for op in &ops {
            match op {
                Op::Put(k, dp) => {
                    phys += u64::from(*dp);
                    let key = format!("{}", (b'a' + k) as char);
                    let r = s.put_at(&key, phys, phys).expect("put");
                    let dup = model.iter().any(|(mk, mp)| *mp == phys && weak_hash(mk) == weak_hash(&key));
                    prop_assert_eq!(r == IndexPut::AlreadyIndexed, dup);
                    if !dup {
                        model.push((key, phys));
                    }
                }
                Op::Truncate(f) => {
                    let p = 1 + (phys - 1) * u64::from(*f) / 255;
                    s.truncate_beyond(p).expect("truncate");
                    model.retain(|(_, mp)| *mp < p);
                    phys = p;
                }
                Op::Reopen => {
                    s = IndexStore::open_with_hasher(d.path(), c.clone(), weak_hash).expect("reopen");
                }
            }
            s.validate().expect("valid");
            for k in 0..6u8 {
                let key = format!("{}", (b'a' + k) as char);
                let mut want: Vec<u64> = model.iter().rev()
                    .filter(|(mk, _)| weak_hash(mk) == weak_hash(&key)).map(|(_, p)| *p).collect();
                want.dedup();
                let mut got = s.query_raw(&key, 0, u64::MAX, usize::MAX);
                got.dedup();
                prop_assert_eq!(got, want, "key {} after {:?}", key, op);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Power loss: after a flush, more keys are indexed; the active (last) file then keeps an
    /// arbitrary mix of flushed and unflushed 4 KiB pages (sealed files were flushed at roll).
    /// Recovery keeps every flushed unit and yields a prefix of what was indexed.
    #[test]
    fn prop_power_loss_keeps_flushed_prefix(n1 in 0u64..300, n2 in 0u64..300, seed in any::<u64>()) {
        const PAGE: usize = 4096;
        let d = tempfile::tempdir().expect("tempdir");
        let live = d.path().join("live");
        let c = cfg(64, 200);
        let key = |i: u64| format!("k{}", i % 7);
        let mut s = IndexStore::open(&live, c.clone()).expect("open");
        for i in 0..n1 {
            s.put_at(&key(i), 10 + i, 1000 + i).expect("put");
        }
        s.flush().expect("flush");
        let read_all = |dir: &std::path::Path| -> std::collections::BTreeMap<String, Vec<u8>> {
            let mut m = std::collections::BTreeMap::new();
            for e in std::fs::read_dir(dir).expect("dir") {
                let e = e.expect("entry");
                m.insert(e.file_name().into_string().expect("utf8"), std::fs::read(e.path()).expect("read"));
            }
            m
        };
        let durable = read_all(&live);
        for i in n1..n1 + n2 {
            s.put_at(&key(i), 10 + i, 1000 + i).expect("put");
        }
        drop(s);
        let current = read_all(&live);
        let crashed = d.path().join("crashed");
        std::fs::create_dir_all(&crashed).expect("mkdir");
        let mut rng = seed | 1;
        let last = current.keys().next_back().cloned();
        for (name, cur) in &current {
            let mut out = if Some(name) == last.as_ref() {
                // A file created after the flush was created complete with its header.
                durable.get(name).cloned().unwrap_or_else(|| {
                    let mut z = vec![0; cur.len()];
                    z[..HEADER_LEN].copy_from_slice(&crate::index::format::IndexHeader::empty(64, 200).encode());
                    z
                })
            } else {
                cur.clone()
            };
            if Some(name) == last.as_ref() {
                for p in (0..cur.len()).step_by(PAGE) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if rng & 1 == 1 {
                        let e = (p + PAGE).min(cur.len());
                        out[p..e].copy_from_slice(&cur[p..e]);
                    }
                }
            }
            std::fs::write(crashed.join(name), &out).expect("write");
        }
        let s = IndexStore::open(&crashed, c).expect("recover");
        s.validate().expect("valid");
        let kept = if n1 + n2 == 0 { 0 } else { s.end_raw().saturating_sub(9) };
        prop_assert!(kept >= n1, "flushed units lost: kept {} < {}", kept, n1);
        prop_assert!(kept <= n1 + n2);
        for k in 0..7u64 {
            let want: Vec<u64> = (0..kept).rev().filter(|i| i % 7 == k).map(|i| 10 + i).collect();
            prop_assert_eq!(s.query_raw(&format!("k{k}"), 0, u64::MAX, usize::MAX), want);
        }
    }
}

#[test]
fn a_walk_stops_at_the_time_range_and_at_its_step_bound() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = IndexStore::open(d.path(), cfg(16, 5000)).expect("open");
    for i in 0..2000u64 {
        s.put_at("k", 100 + i, 10_000 + i).expect("put");
    }
    let f = s.files.last().expect("one file");
    let hash = (s.hasher)("k");
    let (mut steps, mut out) = (MAX_WALK_STEPS, Vec::new());
    f.query(hash, (11_990, 11_999), 100, &mut steps, &mut out);
    assert_eq!(out.len(), 10);
    // 10 matches, then the first unit before the range ends the walk.
    assert_eq!(MAX_WALK_STEPS - steps, 11, "walked past the time range");
    let (mut steps, mut out) = (25, Vec::new());
    f.query(hash, (0, u64::MAX), 1000, &mut steps, &mut out);
    assert_eq!((out.len(), steps), (25, 0), "the step bound holds");
    // The bound spans files: a query never reads more than MAX_WALK_STEPS units.
    assert_eq!(s.query_raw("k", 0, u64::MAX, 5000).len(), 2000);
}
