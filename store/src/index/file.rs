//! One IndexFile: header, hash slots and chained units in a mapped file.

use std::path::Path;

use crate::error::Result;
use crate::error::StoreError;
use crate::index::format::slot_pos;
use crate::index::format::unit_pos;
use crate::index::format::IndexHeader;
use crate::index::format::IndexUnit;
use crate::index::format::HEADER_LEN;
use crate::index::format::SLOT_LEN;
use crate::index::format::UNIT_LEN;
use crate::mapped_file::MappedFile;
use crate::types::PhysOffset;
use crate::types::TimestampMs;

/// Most index units one key query reads, over all files (units of other keys sharing a slot
/// count too). Hard-coded: a query answers at most 1024 messages from 4x as many candidates,
/// and the slots keep chains short (units per slot is about units / slots), so only a
/// degenerate chain reaches it; it bounds what one client call costs under the state lock.
pub(crate) const MAX_WALK_STEPS: u32 = 1 << 16;

/// One IndexFile.
#[derive(Debug)]
pub(crate) struct IndexFile {
    seq: u64,
    file: MappedFile,
    /// Invariant: equals the decoded on-disk header after every completed put.
    header: IndexHeader,
}

impl IndexFile {
    /// Creates a new empty file.
    pub(crate) fn create(path: &Path, seq: u64, slots: u32, max_units: u32) -> Result<Self> {
        let header = IndexHeader::empty(slots, max_units);
        let file = MappedFile::create(path, header.file_len(), &header.encode())?;
        Ok(IndexFile { seq, file, header })
    }

    /// Opens a file of the given geometry. `replay` re-validates every unit and rebuilds the
    /// slots (for the active file after a crash); otherwise only the header is checked.
    pub(crate) fn open(
        path: &Path,
        seq: u64,
        slots: u32,
        max_units: u32,
        replay: bool,
    ) -> Result<Self> {
        let want = IndexHeader::empty(slots, max_units).file_len();
        let file = MappedFile::open(path, want)?;
        let name = || path.display().to_string();
        let header =
            IndexHeader::decode(&file.bytes()[..HEADER_LEN]).map_err(|e| e.locate(name(), 0))?;
        if header.slot_count != slots || header.max_units != max_units {
            return Err(StoreError::corruption(
                name(),
                8,
                format!(
                    "geometry {}x{} differs from the configured {slots}x{max_units}",
                    header.slot_count, header.max_units
                ),
            ));
        }
        let mut f = IndexFile { seq, file, header };
        if replay {
            f.rebuild_prefix(f.header.unit_count)?;
        }
        Ok(f)
    }

    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    pub(crate) fn header(&self) -> &IndexHeader {
        &self.header
    }

    pub(crate) fn is_full(&self) -> bool {
        self.header.unit_count >= self.header.max_units
    }

    /// True if a unit with timestamp `ts` can go into this file (its delta fits a `u32`).
    pub(crate) fn accepts_ts(&self, ts: TimestampMs) -> bool {
        self.header.unit_count == 0
            || ts.saturating_sub(self.header.begin_ts_ms) <= u64::from(u32::MAX)
    }

    fn slot_of(&self, hash: u64) -> u32 {
        (hash % u64::from(self.header.slot_count)) as u32
    }

    fn slot(&self, s: u32) -> u32 {
        let at = slot_pos(s);
        let b = &self.file.bytes()[at..at + SLOT_LEN];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn set_slot(&mut self, s: u32, n: u32) {
        let at = slot_pos(s);
        self.file.write(at, &n.to_le_bytes());
    }

    fn unit(&self, n: u32) -> IndexUnit {
        let at = unit_pos(self.header.slot_count, n);
        IndexUnit::decode(&self.file.bytes()[at..at + UNIT_LEN])
            .expect("slice is exactly one unit long")
    }

    fn write_header(&mut self) {
        let b = self.header.encode();
        self.file.write(0, &b);
    }

    /// Appends a unit. The caller checks `!is_full()`, `accepts_ts(ts)` and that `phys` is not
    /// below the last unit's.
    pub(crate) fn put(&mut self, hash: u64, phys: PhysOffset, ts: TimestampMs) {
        assert!(!self.is_full(), "caller rolls to a new file when full");
        debug_assert!(self.header.unit_count == 0 || phys >= self.header.end_phys);
        let h = &mut self.header;
        if h.unit_count == 0 {
            h.begin_ts_ms = ts;
            h.end_ts_ms = ts;
            h.begin_phys = phys;
        }
        let delta = u32::try_from(ts.saturating_sub(h.begin_ts_ms)).unwrap_or(u32::MAX);
        let n = h.unit_count + 1;
        let s = self.slot_of(hash);
        let prev = self.slot(s);
        let unit = IndexUnit {
            key_hash: hash,
            phys_offset: phys,
            time_delta_ms: delta,
            prev,
        };
        let at = unit_pos(self.header.slot_count, n);
        self.file.write(at, &unit.encode());
        self.set_slot(s, n);
        let h = &mut self.header;
        h.unit_count = n;
        h.end_phys = phys;
        h.end_ts_ms = h.end_ts_ms.max(ts);
        if prev == 0 {
            h.used_slots += 1;
        }
        self.write_header();
    }

    /// Walks the chain of `hash` newest first, calling `f(unit)` until it returns false or
    /// `steps` units (of any key sharing the slot) were read; each read takes one from
    /// `steps`. Stops at a link that does not point to an older unit (corruption guard: no
    /// loops).
    fn walk(&self, hash: u64, steps: &mut u32, mut f: impl FnMut(&IndexUnit) -> bool) {
        let mut n = self.slot(self.slot_of(hash));
        let mut bound = self.header.unit_count + 1;
        while n != 0 && n < bound && *steps > 0 {
            *steps -= 1;
            let u = self.unit(n);
            if u.key_hash == hash && !f(&u) {
                return;
            }
            bound = n;
            n = u.prev;
        }
    }

    /// Appends to `out` (newest first) the physical offsets of units with `hash` stored in
    /// `[begin_ts, end_ts]`, until `out` holds `max` entries, `steps` units were read (see
    /// [`walk`](Self::walk)), or the chain reaches a unit of any key stored before
    /// `begin_ts`: units are appended in store-time order, so nothing older can match (as
    /// RocketMQ's IndexFile walk; a leader whose clock lagged its predecessor's may have
    /// stamped a few milliseconds out of order).
    pub(crate) fn query(
        &self,
        hash: u64,
        range: (TimestampMs, TimestampMs),
        max: usize,
        steps: &mut u32,
        out: &mut Vec<PhysOffset>,
    ) {
        let (begin_ts, end_ts) = range;
        let base = self.header.begin_ts_ms;
        let mut n = self.slot(self.slot_of(hash));
        let mut bound = self.header.unit_count + 1;
        while n != 0 && n < bound && *steps > 0 && out.len() < max {
            *steps -= 1;
            let u = self.unit(n);
            let ts = base.saturating_add(u64::from(u.time_delta_ms));
            if ts < begin_ts {
                return;
            }
            if u.key_hash == hash && ts <= end_ts && out.last() != Some(&u.phys_offset) {
                out.push(u.phys_offset);
            }
            bound = n;
            n = u.prev;
        }
    }

    /// True if a unit `(hash, phys)` exists among the units at `phys` (`phys` must be the file's
    /// `end_phys`: only the newest units are looked at).
    pub(crate) fn contains_at_end(&self, hash: u64, phys: PhysOffset) -> bool {
        let mut found = false;
        let mut steps = MAX_WALK_STEPS;
        self.walk(hash, &mut steps, |u| {
            found = u.phys_offset == phys;
            !found && u.phys_offset >= phys
        });
        found
    }

    /// Keeps units `1..=keep` that form valid chains (see the format docs), blanks the rest,
    /// rebuilds slots and header. Returns the number of units kept.
    pub(crate) fn rebuild_prefix(&mut self, keep: u32) -> Result<u32> {
        let slots = self.header.slot_count;
        let mut heads = vec![0u32; slots as usize];
        let mut h = IndexHeader::empty(slots, self.header.max_units);
        let begin_ts = self.header.begin_ts_ms;
        for n in 1..=keep.min(self.header.max_units) {
            let u = self.unit(n);
            let s = (u.key_hash % u64::from(slots)) as usize;
            let blank = u == IndexUnit::default();
            if blank || u.prev != heads[s] || (n > 1 && u.phys_offset < h.end_phys) {
                break;
            }
            if n == 1 {
                h.begin_phys = u.phys_offset;
                h.begin_ts_ms = begin_ts;
            }
            h.used_slots += u32::from(heads[s] == 0);
            heads[s] = n;
            h.unit_count = n;
            h.end_phys = u.phys_offset;
            h.end_ts_ms = h
                .end_ts_ms
                .max(begin_ts.saturating_add(u64::from(u.time_delta_ms)));
        }
        let changed = h != self.header;
        for (s, head) in heads.iter().enumerate() {
            if self.slot(s as u32) != *head {
                self.set_slot(s as u32, *head);
            }
        }
        let from = unit_pos(slots, h.unit_count + 1);
        self.file.zero_from(from);
        self.header = h;
        self.write_header();
        self.file.flush()?;
        if changed {
            tracing::warn!(seq = self.seq, units = h.unit_count, "index file units cut");
        }
        Ok(h.unit_count)
    }

    /// Number of units whose physical offset is below `phys` (units are ordered).
    pub(crate) fn units_below(&self, phys: PhysOffset) -> u32 {
        let (mut lo, mut hi) = (0u32, self.header.unit_count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.unit(mid + 1).phys_offset < phys {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn remove(self) -> Result<()> {
        self.file.remove()
    }
}
