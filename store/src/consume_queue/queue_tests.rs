//! Tests of one ConsumeQueue: put, read, roll, idempotence, truncation, retention, reset,
//! recovery, power loss.

use proptest::prelude::*;

use std::path::Path;

use super::*;
use crate::consume_queue::config::ConsumeQueueConfig;

/// Physical offset `n`.
fn ph(n: u64) -> PhysOffset {
    PhysOffset::new(n)
}

/// Queue offset `n`.
fn o(n: u64) -> QueueOffset {
    QueueOffset::new(n)
}

fn cfg(n: u32) -> ConsumeQueueConfig {
    ConsumeQueueConfig { units_per_file: n }
}

fn u(phys: u64) -> CqUnit {
    CqUnit {
        phys_offset: ph(phys),
        size: 10,
        tag_hash: phys * 7,
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .collect();
    v.sort();
    v
}

fn open(dir: &Path, n: u32) -> ConsumeQueue {
    ConsumeQueue::open(dir, "t", QueueId::new(0), &cfg(n)).expect("open")
}

#[test]
fn put_read_roll_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    assert!(q.is_empty() && q.max_offset().get() == 0 && files(d.path()).is_empty());
    for i in 0..10u64 {
        assert_eq!(
            q.put(o(i), u(100 + i * 10)).expect("put"),
            PutOutcome::Appended
        );
    }
    assert_eq!(
        files(d.path()),
        [
            "00000000000000000000",
            "00000000000000000004",
            "00000000000000000008"
        ]
    );
    assert_eq!(q.read(o(3), 3).expect("read"), vec![u(130), u(140), u(150)]);
    assert_eq!(q.read(o(8), 100).expect("read").len(), 2);
    assert!(q.read(o(10), 5).expect("at max").is_empty());
    assert!(matches!(
        q.read(o(11), 1),
        Err(StoreError::OffsetOutOfRange {
            offset,
            min,
            max,
            ..
        }) if (offset, min, max) == (o(11), o(0), o(10))
    ));
    assert_eq!(q.get(o(9)).expect("get"), u(190));
    assert!(q.get(o(10)).is_err());
    assert_eq!(q.last_unit(), Some(u(190)));
    assert_eq!(q.offset_of_phys(ph(150)), Some(o(5)));
    assert_eq!(q.offset_of_phys(ph(151)), None);
    assert_eq!(q.offset_of_phys(ph(10_000)), None);
    assert_eq!(q.first_offset_at_or_after_phys(ph(151)), o(6));
    q.flush().expect("flush");
    drop(q);
    let q = open(d.path(), 4);
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (0, 10));
    assert_eq!(q.read(o(0), 100).expect("read").len(), 10);
    q.validate().expect("valid");
}

#[test]
fn put_is_idempotent_and_strict() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    q.put(o(0), u(100)).expect("put");
    q.put(o(1), u(200)).expect("put");
    assert_eq!(
        q.put(o(0), u(100)).expect("replay"),
        PutOutcome::AlreadyPresent
    );
    assert!(matches!(
        q.put(o(1), u(300)),
        Err(StoreError::Conflict { .. })
    ));
    let e = q.put(o(3), u(300)).expect_err("gap");
    assert!(
        matches!(
            e,
            StoreError::OffsetOutOfRange {
                offset,
                max,
                ..
            } if (offset, max) == (o(3), o(2))
        ),
        "{e}"
    );
    assert!(matches!(
        q.put(o(2), u(200)),
        Err(StoreError::PhysOffsetOrder { .. })
    ));
    assert!(q.put(o(2), CqUnit { size: 0, ..u(300) }).is_err());
    assert_eq!(q.max_offset().get(), 2);
}

#[test]
fn truncate_phys_beyond_cuts_tail_and_files() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    for i in 0..10u64 {
        q.put(o(i), u(100 + i * 10)).expect("put");
    }
    assert_eq!(q.truncate_phys_beyond(ph(1000)).expect("noop"), 0);
    assert_eq!(q.truncate_phys_beyond(ph(145)).expect("cut"), 5);
    assert_eq!(q.max_offset().get(), 5);
    assert_eq!(files(d.path()).len(), 2);
    // Exactly at a file boundary: the file holding the new max stays, blank.
    assert_eq!(q.truncate_phys_beyond(ph(140)).expect("cut"), 1);
    assert_eq!(q.max_offset().get(), 4);
    assert_eq!(files(d.path()).len(), 2);
    q.put(o(4), u(141)).expect("re-put after cut");
    drop(q);
    let mut q = open(d.path(), 4);
    assert_eq!(q.max_offset().get(), 5);
    assert_eq!(q.truncate_phys_beyond(ph(0)).expect("all"), 5);
    assert!(q.is_empty());
    drop(q);
    let q = open(d.path(), 4);
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (0, 0));
}

#[test]
fn delete_below_phys_keeps_last_file() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    for i in 0..10u64 {
        q.put(o(i), u(100 + i * 10)).expect("put");
    }
    assert_eq!(q.delete_below_phys(ph(125)).expect("delete"), 0);
    assert_eq!(q.min_offset().get(), 3);
    assert!(q.read(o(2), 1).is_err());
    assert_eq!(q.delete_below_phys(ph(180)).expect("delete"), 2);
    assert_eq!(q.min_offset().get(), 8);
    assert_eq!(files(d.path()), ["00000000000000000008"]);
    assert_eq!(q.delete_below_phys(ph(10_000)).expect("delete"), 0);
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (10, 10));
    drop(q);
    // Reopen recomputes min from the files; the caller re-applies the retention point.
    let mut q = open(d.path(), 4);
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (8, 10));
    q.delete_below_phys(ph(10_000)).expect("delete");
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (10, 10));
    q.put(o(10), u(500)).expect("append continues");
}

#[test]
fn reset_to_survives_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    q.reset_to(o(1000)).expect("reset");
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (1000, 1000));
    drop(q);
    let mut q = open(d.path(), 4);
    assert_eq!((q.min_offset().get(), q.max_offset().get()), (1000, 1000));
    q.put(o(1000), u(5)).expect("put");
    assert!(q.reset_to(o(0)).is_err());
}

#[test]
fn recovery_stops_at_torn_or_non_monotonic_unit() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    for i in 0..7u64 {
        q.put(o(i), u(100 + i * 10)).expect("put");
    }
    drop(q);
    // Unit 5 (second file, slot 1) goes backwards: recovery keeps 0..5 and blanks the rest.
    let p = d.path().join("00000000000000000004");
    let mut b = std::fs::read(&p).expect("read");
    b[CQ_UNIT_LEN..CQ_UNIT_LEN + 8].copy_from_slice(&1u64.to_le_bytes());
    std::fs::write(&p, &b).expect("write");
    let q = open(d.path(), 4);
    assert_eq!(q.max_offset().get(), 5);
    q.validate().expect("valid");
    drop(q);
    // A blank unit in the middle of the first file: later files are removed.
    let p = d.path().join("00000000000000000000");
    let mut b = std::fs::read(&p).expect("read");
    b[2 * CQ_UNIT_LEN..3 * CQ_UNIT_LEN].fill(0);
    std::fs::write(&p, &b).expect("write");
    let q = open(d.path(), 4);
    assert_eq!(q.max_offset().get(), 2);
    assert_eq!(files(d.path()), ["00000000000000000000"]);
}

#[test]
fn open_rejects_bad_dirs() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("junk"), b"x").expect("write");
    assert!(ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(4))
        .expect_err("junk")
        .is_corruption());
    let d = tempfile::tempdir().expect("tempdir");
    let mut q = open(d.path(), 4);
    for i in 0..9u64 {
        q.put(o(i), u(100 + i)).expect("put");
    }
    drop(q);
    assert!(ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(8))
        .expect_err("size")
        .is_corruption());
    std::fs::remove_file(d.path().join("00000000000000000004")).expect("rm");
    let e = ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(4)).expect_err("gap");
    assert!(e.to_string().contains("gap"), "{e}");
    assert!(ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(0)).is_err());
}

#[derive(Clone, Debug)]
enum Op {
    Put(u32),
    Truncate(u8),
    DeleteBelow(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u32..50).prop_map(Op::Put),
        1 => any::<u8>().prop_map(Op::Truncate),
        1 => any::<u8>().prop_map(Op::DeleteBelow),
        1 => Just(Op::Reopen),
    ]
}

/// The model: all units ever kept, the min offset, and the retention point.
#[derive(Default)]
struct Model {
    units: Vec<CqUnit>,
    min: u64,
    min_phys: u64,
    next_phys: u64,
}

impl Model {
    /// A physical offset between the retention point and the next write position.
    fn pick(&self, f: u8) -> u64 {
        self.min_phys + (self.next_phys - self.min_phys) * u64::from(f) / 255
    }

    fn apply(&mut self, op: &Op, q: &mut ConsumeQueue, dir: &Path) {
        match op {
            Op::Put(size) => {
                let unit = CqUnit {
                    phys_offset: ph(self.next_phys),
                    size: *size,
                    tag_hash: 1,
                };
                q.put(o(self.units.len() as u64), unit).expect("put");
                self.units.push(unit);
                self.next_phys += u64::from(*size);
            }
            Op::Truncate(f) => {
                let p = self.pick(*f);
                q.truncate_phys_beyond(ph(p)).expect("truncate");
                while self.units.last().is_some_and(|u| u.phys_offset >= ph(p)) {
                    self.units.pop();
                }
                self.min = self.min.min(self.units.len() as u64);
                self.next_phys = p;
            }
            Op::DeleteBelow(f) => {
                let p = self.pick(*f);
                q.delete_below_phys(ph(p)).expect("delete");
                self.min_phys = p;
                let below = self.units.iter().filter(|u| u.phys_offset < ph(p)).count() as u64;
                self.min = self.min.max(below);
            }
            Op::Reopen => {
                let mut re =
                    ConsumeQueue::open(dir, "t", QueueId::new(0), &cfg(3)).expect("reopen");
                re.delete_below_phys(ph(self.min_phys))
                    .expect("re-apply retention");
                *q = re;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn prop_queue_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut q = ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(3)).expect("open");
        let mut m = Model::default();
        for op in &ops {
            m.apply(op, &mut q, d.path());
            prop_assert_eq!(q.min_offset().get(), m.min, "after {:?}", op);
            prop_assert_eq!(q.max_offset().get(), m.units.len() as u64, "after {:?}", op);
            let got = q.read(o(m.min), usize::MAX).expect("read");
            prop_assert_eq!(&got[..], &m.units[m.min as usize..]);
            q.validate().expect("valid");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A torn write (a blanked unit) or a stale unit (physical offset going backwards) in the
    /// last two files: recovery keeps exactly the units before it.
    #[test]
    fn prop_recovery_keeps_prefix_before_damage(n in 1u64..20, at in any::<prop::sample::Index>(), blank in any::<bool>()) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut q = ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(3)).expect("open");
        for i in 0..n {
            q.put(o(i), u(100 + i * 10)).expect("put");
        }
        drop(q);
        // Damage within the files recovery validates (the last two).
        let files = n.div_ceil(3);
        let tail_start = files.saturating_sub(2) * 3;
        let bad = tail_start + at.index((n - tail_start) as usize) as u64;
        let p = d.path().join(crate::consume_queue::format::file_name(bad / 3 * 3));
        let mut b = std::fs::read(&p).expect("read");
        let pos = (bad % 3) as usize * CQ_UNIT_LEN;
        if blank {
            b[pos..pos + CQ_UNIT_LEN].fill(0);
        } else {
            b[pos..pos + 8].copy_from_slice(&50u64.to_le_bytes());
        }
        std::fs::write(&p, &b).expect("write");
        let q = ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg(3)).expect("reopen");
        q.validate().expect("valid");
        if bad == 0 {
            // The first unit is damaged: a blank one is skipped as a leading hole (the min moves),
            // a backwards one is still a valid first unit.
            let want = match (blank, n) {
                (true, 1) => (0, 0), // nothing valid left: an empty queue at the file start
                (true, _) => (1, n),
                (false, _) => (0, n),
            };
            prop_assert_eq!((q.min_offset().get(), q.max_offset().get()), want);
        } else {
            prop_assert_eq!(q.max_offset().get(), bad);
            let got = q.read(o(q.min_offset().get()), usize::MAX).expect("read");
            let want: Vec<CqUnit> = (0..bad).map(|i| u(100 + i * 10)).collect();
            prop_assert_eq!(got, want);
        }
    }
}

/// The bytes of every file in `dir`.
fn image(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    files(dir)
        .into_iter()
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).expect("read");
            (n, b)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Power loss: after a flush, more units are appended; the disk then keeps an arbitrary
    /// subset of the unflushed 4 KiB pages. Recovery keeps every flushed unit and yields a
    /// prefix of what was written.
    #[test]
    fn prop_power_loss_keeps_flushed_prefix(n1 in 1u64..700, n2 in 0u64..700, seed in any::<u64>()) {
        const PAGE: usize = 4096;
        let d = tempfile::tempdir().expect("tempdir");
        let live = d.path().join("live");
        let mut q = ConsumeQueue::open(&live, "t", QueueId::new(0), &cfg(300)).expect("open");
        let unit = |i: u64| CqUnit { phys_offset: ph(1 + i * 10), size: 10, tag_hash: i };
        for i in 0..n1 {
            q.put(o(i), unit(i)).expect("put");
        }
        q.flush().expect("flush");
        let durable = image(&live);
        for i in n1..n1 + n2 {
            q.put(o(i), unit(i)).expect("put");
        }
        let current = image(&live);
        drop(q);
        // Build the crash image. Every file but the last was flushed when the next one was
        // created and not written since: it is current. The last file holds, per page, the
        // durable or the current bytes (zeros if created after the flush: its creation was
        // fsynced).
        let crashed = d.path().join("crashed");
        std::fs::create_dir_all(&crashed).expect("mkdir");
        let mut rng = seed | 1;
        let last = current.keys().next_back().cloned().expect("a file");
        for (name, cur) in &current {
            let old = if *name == last {
                durable.get(name).cloned().unwrap_or_else(|| vec![0; cur.len()])
            } else {
                cur.clone()
            };
            let mut out = old.clone();
            for p in (0..cur.len()).step_by(PAGE) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng & 1 == 1 {
                    let e = (p + PAGE).min(cur.len());
                    out[p..e].copy_from_slice(&cur[p..e]);
                }
            }
            std::fs::write(crashed.join(name), &out).expect("write");
        }
        let q = ConsumeQueue::open(&crashed, "t", QueueId::new(0), &cfg(300)).expect("recover");
        q.validate().expect("valid");
        prop_assert_eq!(q.min_offset().get(), 0);
        prop_assert!(q.max_offset().get() >= n1, "flushed units lost: max {} < {}", q.max_offset().get(), n1);
        prop_assert!(q.max_offset().get() <= n1 + n2);
        let got = q.read(o(0), usize::MAX).expect("read");
        let want: Vec<CqUnit> = (0..q.max_offset().get()).map(unit).collect();
        prop_assert_eq!(got, want);
    }
}
