//! [`State`]: the mutable state of an open log (segments, raft index, positions, persisted ids),
//! guarded by the one mutex in [`crate::shared::Shared`], with its invariants and the lookups
//! readers do under that lock.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cold_read::ColdAt;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::raft_index::RaftIndex;
use crate::recent::RecentEntries;
use crate::segments::Segments;
use crate::types::LogId;
use crate::types::RawPhys;
use crate::types::Vote;

/// The state of an open log.
pub struct State {
    /// Open segment files.
    pub segments: Segments,
    /// Log index -> location of every physically present entry.
    pub index: RaftIndex,
    /// Invariant: the physical end of the last record; bytes from here to the end of its
    /// segment are zero; `min_phys <= flushed.phys_end <= append_pos`.
    pub append_pos: RawPhys,
    /// Invariant: segment-aligned; no segment below it; persisted as the log start.
    pub min_phys: RawPhys,
    /// Last purged log id (persisted).
    pub purged: Option<LogId>,
    /// Invariant: physical end of the last purged entry, `min_phys <= purged_phys_end <= append_pos`.
    pub purged_phys_end: RawPhys,
    /// Persisted committed log id.
    pub committed: Option<LogId>,
    /// Persisted vote.
    pub vote: Option<Vote>,
    /// Persisted: the committed log id held before a crash lost entries up to it; cleared once
    /// the committed id reaches it again.
    pub lost_commit_floor: Option<LogId>,
    /// What the last successful flush covered.
    pub flushed: FlushCheckpoint,
    /// Flush cycles that synced something since open (the zero-ahead thread's measure of
    /// bytes per fdatasync).
    pub syncs: u64,
    /// Invariant: bumped whenever the checkpoint is lowered (truncation) or the log replaced
    /// (install); the checkpointer writes a checkpoint only if this did not change between
    /// capturing it and syncing the raft index it vouches for.
    pub checkpoint_epoch: u64,
    /// Set by the first I/O error: the log accepts no more writes.
    pub failed: Option<String>,
    /// Set by `close`.
    pub closed: bool,
    /// The last appended entries, for readers (replication, apply) to skip the CommitLog.
    pub recent: RecentEntries,
    /// Physical end of the pages dropped from the page cache (`drop_behind.rs`); reads wholly
    /// below it go through [`crate::cold_read`].
    pub cold_end: RawPhys,
    /// Segments this process rolled out of: start -> where its own bytes in it end (the
    /// closing padding record's header included). Past that lie only zeros or a reused
    /// file's old bytes, so a truncation back into such a segment can go on at its cut, as a
    /// replica that never held the cut entries does (`tail.rs`).
    pub rolled_ends: std::collections::BTreeMap<RawPhys, RawPhys>,
}

impl State {
    /// Log id of the last entry physically present.
    pub fn last_entry_id(&self) -> Option<LogId> {
        self.index
            .last()
            .map(|l| LogId::new_term_index(l.term, l.index))
    }

    /// Refuses writes after an error or close.
    pub fn check_writable(&self) -> LogResult<()> {
        if let Some(msg) = &self.failed {
            return Err(LogError::Stopped(msg.clone()));
        }
        if self.closed {
            return Err(LogError::Closed);
        }
        Ok(())
    }

    /// For a read of `[phys, phys + len)` that [`State::locate_range`] found: where it reads
    /// through [`crate::cold_read`], if it lies wholly below the dropped pages' end.
    pub fn cold_read(&self, phys: RawPhys, len: u32) -> Option<ColdAt> {
        if phys.checked_add(u64::from(len))? > self.cold_end {
            return None;
        }
        let segment_start = self.segments.start_of(phys);
        Some(ColdAt {
            segment_start,
            limit: self
                .cold_end
                .min(segment_start + self.segments.segment_bytes()),
            epoch: self.checkpoint_epoch,
        })
    }

    /// The segment, offset inside it and path of the range `[phys, phys + len)`, which must lie
    /// inside the appended part of one segment (the bytes are read outside the lock).
    pub fn locate_range(
        &self,
        phys: RawPhys,
        len: u32,
    ) -> LogResult<(Arc<dyn SegmentFile>, u64, PathBuf)> {
        let end = phys
            .checked_add(len as u64)
            .ok_or_else(|| LogError::InvalidArgument("range overflows".into()))?;
        if phys < self.min_phys || end > self.append_pos {
            return Err(LogError::InvalidArgument(format!(
                "range {phys}+{len} outside the log [{}, {})",
                self.min_phys, self.append_pos
            )));
        }
        let start = self.segments.start_of(phys);
        if end > start + self.segments.segment_bytes() {
            return Err(LogError::InvalidArgument(format!(
                "range {phys}+{len} spans two segments"
            )));
        }
        let (seg, off) = self.segments.locate(phys)?;
        Ok((seg, off, self.segments.path(start)))
    }

    /// A corruption error for the record at `phys`, naming its segment file.
    pub fn corruption(&self, phys: RawPhys, reason: String) -> LogError {
        let start = self.segments.start_of(phys);
        LogError::Corruption {
            file: self.segments.path(start),
            offset: phys - start,
            reason,
        }
    }

    /// The byte ranges written but not yet flushed: (segment, path, offset in it, length).
    pub fn dirty_ranges(&self) -> Vec<(Arc<dyn SegmentFile>, PathBuf, u64, u64)> {
        self.ranges_between(self.flushed.phys_end, self.append_pos)
    }

    /// The written byte ranges of `[from, to)` (clamped to `[min_phys, append_pos)`), split
    /// by segment: (segment, path, offset in it, length).
    pub fn ranges_between(
        &self,
        from: RawPhys,
        to: RawPhys,
    ) -> Vec<(Arc<dyn SegmentFile>, PathBuf, u64, u64)> {
        let seg_bytes = self.segments.segment_bytes();
        let to = to.min(self.append_pos);
        let mut out = Vec::new();
        let mut pos = from.max(self.min_phys);
        while pos < to {
            let start = self.segments.start_of(pos);
            let end = (start + seg_bytes).min(to);
            if let Some(seg) = self.segments.get(start) {
                out.push((seg, self.segments.path(start), pos - start, end - pos));
            }
            pos = end;
        }
        out
    }

    /// Checks the cheap invariants (debug builds call it after every state change).
    pub fn validate(&self) -> Result<(), String> {
        if self.min_phys % self.segments.segment_bytes() != 0 {
            return Err(format!("min_phys {} not segment-aligned", self.min_phys));
        }
        if !(self.min_phys <= self.flushed.phys_end.max(self.min_phys)
            && self.flushed.phys_end <= self.append_pos)
        {
            return Err(format!(
                "flushed {} outside [{}, {}]",
                self.flushed.phys_end, self.min_phys, self.append_pos
            ));
        }
        if let Some(l) = self.index.last() {
            if l.end() > self.append_pos {
                return Err(format!(
                    "last entry ends at {} past append position {}",
                    l.end(),
                    self.append_pos
                ));
            }
        }
        if let Some(f) = self.index.first() {
            if f.phys < self.min_phys {
                return Err(format!(
                    "first entry at {} below min phys {}",
                    f.phys, self.min_phys
                ));
            }
        }
        if self.purged_phys_end > self.append_pos {
            return Err(format!(
                "purged end {} past append position {}",
                self.purged_phys_end, self.append_pos
            ));
        }
        Ok(())
    }

    /// Runs [`State::validate`] in debug builds.
    pub fn debug_validate(&self) {
        if cfg!(debug_assertions) {
            if let Err(e) = self.validate() {
                panic!("raft-log state invariant broken: {e}");
            }
        }
    }
}
