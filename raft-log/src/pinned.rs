//! [`PinnedRange`]: committed CommitLog bytes held open for a reader that must see exactly
//! them (a snapshot being built or sent), whatever retention does meanwhile.
//!
//! A pin holds the segment files' mappings (`Arc<dyn SegmentFile>`). Retention still takes
//! the files out of the log (`LogStore::delete_segments_below`), but the mapped bytes stay
//! readable, unchanged, until the pin is dropped: the disk space of a deleted segment is
//! released only then, stepwise (see `graveyard.rs`). Only bytes below the append position at pin time are readable, and committed bytes
//! are never rewritten, so a pin's content is immutable.

use std::path::PathBuf;
use std::sync::Arc;

use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::graveyard::SweepOnDrop;
use crate::state::State;
use crate::types::PhysOffset;
use crate::types::RawPhys;

/// The CommitLog bytes `[start, end)`, held open (see the module docs).
#[derive(Clone)]
pub struct PinnedRange {
    start: RawPhys,
    end: RawPhys,
    segment_bytes: u64,
    /// Invariant: one file per segment from `start_of(start)`, contiguous, in order.
    files: Vec<(Arc<dyn SegmentFile>, PathBuf)>,
    /// Sweeps the graveyard when the last clone drops. Declared after `files`, so their
    /// handles are gone by then.
    _sweep: Arc<SweepOnDrop>,
}

impl std::fmt::Debug for PinnedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedRange")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("segments", &self.files.len())
            .finish()
    }
}

impl PinnedRange {
    /// First byte covered.
    pub fn start(&self) -> PhysOffset {
        PhysOffset::new(self.start)
    }

    /// One past the last byte covered.
    pub fn end(&self) -> PhysOffset {
        PhysOffset::new(self.end)
    }

    /// Reads `[phys, phys + len)`, which must lie inside the range and inside one segment.
    pub fn read_at(&self, phys: PhysOffset, len: u32) -> LogResult<Vec<u8>> {
        let phys = phys.get();
        let end = phys
            .checked_add(u64::from(len))
            .ok_or_else(|| LogError::InvalidArgument("range overflows".into()))?;
        if phys < self.start || end > self.end {
            return Err(LogError::InvalidArgument(format!(
                "range {phys}+{len} outside the pinned range [{}, {})",
                self.start, self.end
            )));
        }
        let seg_start = phys - phys % self.segment_bytes;
        if end > seg_start + self.segment_bytes {
            return Err(LogError::InvalidArgument(format!(
                "range {phys}+{len} spans two segments"
            )));
        }
        let first = self.start - self.start % self.segment_bytes;
        let i = ((seg_start - first) / self.segment_bytes) as usize;
        let mut buf = vec![0u8; len as usize];
        let (file, path) = &self.files[i];
        file.read_at(phys - seg_start, &mut buf)
            .map_err(|e| LogError::io("read pinned segment", path, e))?;
        Ok(buf)
    }

    /// Pins the bytes `[start, end)` of the log `st`, which must lie inside it (`min_phys_offset <= start`,
    /// `end <=` the append position): they stay readable through the returned range even if
    /// retention deletes their segments.
    pub fn new(st: &State, start: RawPhys, end: RawPhys) -> LogResult<PinnedRange> {
        if start > end || start < st.min_phys || end > st.append_pos {
            return Err(LogError::InvalidArgument(format!(
                "pin [{start}, {end}) outside the log [{}, {})",
                st.min_phys, st.append_pos
            )));
        }
        let segment_bytes = st.segments.segment_bytes();
        let mut files = Vec::new();
        let mut s = st.segments.start_of(start);
        while s < end {
            let f = st
                .segments
                .get(s)
                .ok_or_else(|| LogError::InvalidArgument(format!("segment {s} missing")))?;
            files.push((f, st.segments.path(s)));
            s += segment_bytes;
        }
        Ok(PinnedRange {
            start,
            end,
            segment_bytes,
            files,
            _sweep: Arc::new(SweepOnDrop(st.segments.graveyard())),
        })
    }
}
