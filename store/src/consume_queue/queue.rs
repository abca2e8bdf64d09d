//! One queue's ConsumeQueue: contiguous fixed-size segment files of [`CqUnit`]s.

use std::path::PathBuf;

use crate::consume_queue::format::file_name;
use crate::consume_queue::format::CqUnit;
use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::consume_queue::segment::Segment;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::mapped_file::MappedFile;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Result of [`ConsumeQueue::put`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The unit was appended.
    Appended,
    /// The same unit was already at that offset (replay): nothing written.
    AlreadyPresent,
}

/// The ConsumeQueue of one `topic/queue_id`.
///
/// Offsets `[min_offset, max_offset)` hold valid units: non-zero size, strictly increasing
/// physical offsets. Writes are appends at `max_offset` (or idempotent re-puts); cuts happen
/// only by [`truncate_phys_beyond`](Self::truncate_phys_beyond) and
/// [`delete_below_phys`](Self::delete_below_phys).
#[derive(Debug)]
pub struct ConsumeQueue {
    pub(super) dir: PathBuf,
    pub(super) topic: String,
    pub(super) queue_id: QueueId,
    pub(super) units_per_file: u64,
    /// Invariant: `segments[k].start == segments[0].start + k * units_per_file`.
    pub(super) segments: Vec<Segment>,
    /// Invariant: `segments[0].start <= min_offset <= max_offset <= end of last segment`
    /// (both equal the base offset when there is no segment).
    pub(super) min_offset: QueueOffset,
    /// Invariant: units in `[max_offset, end of last segment)` are blank.
    pub(super) max_offset: QueueOffset,
}

impl ConsumeQueue {
    /// Offset of the first unit of the first file (or `max_offset` when there is no file).
    pub(super) fn base(&self) -> QueueOffset {
        self.segments.first().map_or(self.max_offset, |s| s.start)
    }

    /// One past the last unit slot of the last file.
    pub(super) fn end_offset(&self) -> QueueOffset {
        self.base()
            .advance(self.segments.len() as u64 * self.units_per_file)
    }

    fn locate(&self, o: QueueOffset) -> (usize, usize) {
        let rel = self.base().count_to(o);
        (
            (rel / self.units_per_file) as usize,
            (rel % self.units_per_file) as usize,
        )
    }

    /// The unit at `o`; `o` must lie inside the files.
    pub(super) fn unit(&self, o: QueueOffset) -> CqUnit {
        let (k, i) = self.locate(o);
        self.segments[k].unit(i)
    }

    /// Blanks units from `o` on and removes files that start after `o`. Returns files removed.
    pub(super) fn cut_from(&mut self, o: QueueOffset) -> Result<usize> {
        if self.segments.is_empty() {
            return Ok(0);
        }
        let (k, i) = if o >= self.end_offset() {
            (self.segments.len(), 0)
        } else {
            self.locate(o)
        };
        if let Some(seg) = self.segments.get_mut(k) {
            seg.zero_from(i);
            seg.file.flush()?;
        }
        // Keep the file holding `o` so an empty tail still records where the queue is.
        let keep = (k + 1).min(self.segments.len());
        let removed = self.segments.split_off(keep);
        let n = removed.len();
        for seg in removed {
            seg.file.remove()?;
        }
        if n > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(n)
    }

    /// Topic of this queue.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Queue id.
    pub fn queue_id(&self) -> QueueId {
        self.queue_id
    }

    /// Smallest readable offset.
    pub fn min_offset(&self) -> QueueOffset {
        self.min_offset
    }

    /// Next offset to be written (one past the last unit).
    pub fn max_offset(&self) -> QueueOffset {
        self.max_offset
    }

    /// True if no unit is readable.
    pub fn is_empty(&self) -> bool {
        self.min_offset == self.max_offset
    }

    /// The last unit, if any.
    pub fn last_unit(&self) -> Option<CqUnit> {
        (!self.is_empty()).then(|| self.unit(self.max_offset.prev()))
    }

    fn out_of_range(&self, offset: QueueOffset) -> StoreError {
        StoreError::OffsetOutOfRange {
            topic: self.topic.clone(),
            queue_id: self.queue_id,
            offset,
            min: self.min_offset,
            max: self.max_offset,
        }
    }

    pub(super) fn what(&self) -> String {
        format!("consume queue {}/{}", self.topic, self.queue_id)
    }

    /// Writes `unit` at `offset`. `offset == max_offset` appends (the unit's physical offset
    /// must exceed the last unit's); an offset inside `[min, max)` holding the same unit is a
    /// no-op (replay), a different unit is a [`StoreError::Conflict`]; anything else is out of
    /// range (a gap, or below the min).
    pub fn put(&mut self, offset: QueueOffset, unit: CqUnit) -> Result<PutOutcome> {
        if unit.is_blank() {
            return Err(StoreError::invalid(format!(
                "{}: unit of size 0 at offset {offset}",
                self.what()
            )));
        }
        if offset < self.max_offset && offset >= self.min_offset {
            let old = self.unit(offset);
            if old == unit {
                return Ok(PutOutcome::AlreadyPresent);
            }
            return Err(StoreError::Conflict {
                what: format!("{} at offset {offset}", self.what()),
                reason: format!("holds {old:?}, put {unit:?}"),
            });
        }
        if offset != self.max_offset {
            return Err(self.out_of_range(offset));
        }
        // Compare with the unit before `max_offset` even if it is below `min_offset`: physical
        // offsets increase across everything in the files, which recovery relies on.
        if self.max_offset > self.base() {
            let last = self.unit(self.max_offset.prev());
            if unit.phys_offset <= last.phys_offset {
                return Err(StoreError::PhysOffsetOrder {
                    what: self.what(),
                    phys_offset: unit.phys_offset,
                    reason: format!("not above the last unit's {}", last.phys_offset),
                });
            }
        }
        if self.segments.is_empty() || offset == self.end_offset() {
            self.new_segment(offset)?;
        }
        let (k, i) = self.locate(offset);
        self.segments[k].write(i, &unit);
        self.max_offset = self.max_offset.next();
        tracing::trace!(topic = %self.topic, queue_id = self.queue_id.get(), queue_offset = offset.get(),
            phys_offset = unit.phys_offset.get(), "consume queue unit appended");
        Ok(PutOutcome::Appended)
    }

    /// Starts a file at `start`, first flushing the current last file: every file but the last
    /// is durable, which lets recovery trust all but the tail.
    pub(super) fn new_segment(&mut self, start: QueueOffset) -> Result<()> {
        if let Some(last) = self.segments.last_mut() {
            last.file.flush()?;
        }
        let path = self.dir.join(file_name(start.get()));
        let file = MappedFile::create(&path, self.units_per_file * CQ_UNIT_LEN as u64, &[])?;
        tracing::info!(topic = %self.topic, queue_id = self.queue_id.get(), start = start.get(), "consume queue file created");
        self.segments.push(Segment { start, file });
        Ok(())
    }

    /// The unit at `offset`, which must lie in `[min_offset, max_offset)`.
    pub fn get(&self, offset: QueueOffset) -> Result<CqUnit> {
        if offset < self.min_offset || offset >= self.max_offset {
            return Err(self.out_of_range(offset));
        }
        Ok(self.unit(offset))
    }

    /// Up to `max_units` units from `from` (`from` in `[min_offset, max_offset]`; at
    /// `max_offset` the result is empty). Unit `i` of the result sits at `from + i`.
    pub fn read(&self, from: QueueOffset, max_units: usize) -> Result<Vec<CqUnit>> {
        if from < self.min_offset || from > self.max_offset {
            return Err(self.out_of_range(from));
        }
        let room = from.count_to(self.max_offset);
        let to = from.advance(room.min(max_units as u64));
        Ok(from.up_to(to).map(|o| self.unit(o)).collect())
    }

    /// First offset in `[min_offset, max_offset)` whose unit's physical offset is `>= phys`,
    /// or `max_offset` (binary search: physical offsets increase).
    pub fn first_offset_at_or_after_phys(&self, phys: PhysOffset) -> QueueOffset {
        let (mut lo, mut hi) = (self.min_offset, self.max_offset);
        while lo < hi {
            let mid = lo.advance(lo.count_to(hi) / 2);
            if self.unit(mid).phys_offset < phys {
                lo = mid.next();
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The queue offset of the unit pointing exactly at `phys`, if any (replay check: a message
    /// whose id is already in its queue is dispatched).
    pub fn offset_of_phys(&self, phys: PhysOffset) -> Option<QueueOffset> {
        let o = self.first_offset_at_or_after_phys(phys);
        (o < self.max_offset && self.unit(o).phys_offset == phys).then_some(o)
    }

    /// Crash recovery: removes every unit whose physical offset is `>= phys` (they point past
    /// the recovered CommitLog end). Returns how many units were cut.
    pub fn truncate_phys_beyond(&mut self, phys: PhysOffset) -> Result<u64> {
        let new_max = self.first_offset_at_or_after_phys(phys);
        let cut = new_max.count_to(self.max_offset);
        if cut == 0 {
            return Ok(0);
        }
        self.cut_from(new_max)?;
        self.max_offset = new_max;
        tracing::info!(topic = %self.topic, queue_id = self.queue_id.get(), phys_offset = phys.get(),
            max_offset = new_max.get(), units_cut = cut, "consume queue truncated");
        debug_assert!(self.validate().is_ok(), "{:?}", self.validate());
        Ok(cut)
    }

    /// Retention: advances `min_offset` past units below `min_phys` and removes whole files
    /// below the new min (never the last file, which records where the queue is). Returns files
    /// removed.
    pub fn delete_below_phys(&mut self, min_phys: PhysOffset) -> Result<usize> {
        self.min_offset = self.first_offset_at_or_after_phys(min_phys);
        let mut n = 0;
        while self.segments.len() > 1
            && self.segments[0].start.advance(self.units_per_file) <= self.min_offset
        {
            let seg = self.segments.remove(0);
            seg.file.remove()?;
            n += 1;
        }
        if n > 0 {
            sync_dir(&self.dir)?;
            tracing::info!(topic = %self.topic, queue_id = self.queue_id.get(), phys_offset = min_phys.get(),
                min_offset = self.min_offset.get(), files_removed = n, "consume queue files deleted");
        }
        debug_assert!(self.validate().is_ok(), "{:?}", self.validate());
        Ok(n)
    }

    /// Makes an empty queue start at `offset` (snapshot install: the queue's earlier messages
    /// live only on other nodes). Fails unless the queue is empty.
    pub fn reset_to(&mut self, offset: QueueOffset) -> Result<()> {
        if !self.is_empty() {
            return Err(StoreError::invalid(format!(
                "{}: reset_to({offset}) on a non-empty queue",
                self.what()
            )));
        }
        for seg in self.segments.drain(..) {
            seg.file.remove()?;
        }
        self.min_offset = offset;
        self.max_offset = offset;
        self.new_segment(offset)?;
        sync_dir(&self.dir)
    }

    /// msyncs written units.
    pub fn flush(&mut self) -> Result<()> {
        self.segments.iter_mut().try_for_each(|s| s.file.flush())
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
