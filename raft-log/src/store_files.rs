//! [`LogStore`]'s operations on the segment files as a whole: retention's deletion (and the
//! segments kept for reuse), a snapshot install's swap, and pins that keep bytes readable
//! while retention runs.

use std::path::Path;

use super::LogStore;
use crate::error::LogResult;
use crate::install;
use crate::pinned::PinnedRange;
use crate::segments::Detached;
use crate::types::LogId;
use crate::types::PhysOffset;

impl<C> LogStore<C> {
    /// Deletes the segments retention kept for reuse (`recycle-segments`), for a disk that
    /// needs their space; returns how many. Later retention keeps some again.
    pub fn delete_free_segments(&self) -> LogResult<usize> {
        let recycler = self.inner.shared.state.lock().segments.recycler().clone();
        recycler.drain()
    }

    /// Retention: deletes the segment files that end at or below `phys`. Every deleted byte
    /// must be purged (`phys <= watermarks().purged_phys_end`), else nothing is deleted and an
    /// error is returned. The new log start is persisted before the files go; the directory
    /// is fsynced after. Returns the new minimum physical offset.
    pub fn delete_segments_below(&self, phys: PhysOffset) -> LogResult<PhysOffset> {
        let (new_start, detached) = self.detach_segments_below(phys)?;
        detached.delete()?;
        Ok(new_start)
    }

    /// The first half of [`LogStore::delete_segments_below`]: moves the log start (persisted)
    /// and takes the segments below it out of the log, under the log lock; the files go when
    /// the caller calls [`Detached::delete`], after releasing its own locks (unmapping and
    /// unlinking a 1 GiB segment takes long). Readers check the log start first; one still
    /// holding a segment keeps its mapping. A crash before the delete leaves files below the
    /// persisted log start, which the next open removes.
    pub fn detach_segments_below(&self, phys: PhysOffset) -> LogResult<(PhysOffset, Detached)> {
        let (start, detached) = self.inner.trimmer.detach_below(phys.get())?;
        Ok((PhysOffset::new(start), detached))
    }

    /// Snapshot install: replaces the whole log with the segment files in `staged`
    /// (full-size, named by start offset, fsynced; moved, not copied), whose valid records end
    /// at `end`, and records `purged` (the snapshot's last log id) as the last purged id. The
    /// bytes are validated like on open; the next append goes at `end`. Refused if `purged` is
    /// below the persisted committed id.
    ///
    /// Crash-safe: the swap is recorded in `meta/` before the first old segment goes, and the
    /// next open finishes a recorded swap, so after a crash the log opens as the old log or
    /// as the new one (see `install.rs`). `staged` must stay in place until this returns or,
    /// after a crash, until the next open.
    pub fn replace_from_files(
        &self,
        staged: &Path,
        purged: LogId,
        end: PhysOffset,
    ) -> LogResult<()> {
        let inner = &*self.inner;
        install::replace_from_files(
            &inner.writer,
            &inner.flusher,
            &inner.install_failpoint,
            &inner.dir,
            staged,
            purged,
            end.get(),
        )
    }

    /// Test hook: makes the next [`LogStore::replace_from_files`] fail after its `n`-th I/O
    /// step (`None`: never), as a crash there would; the log stops, and a reopen shows what the
    /// crash would have left.
    #[doc(hidden)]
    pub fn set_install_failpoint(&self, n: Option<u64>) {
        self.inner.install_failpoint.set(n);
    }

    /// Pins the bytes `[start, end)`, which must lie inside the log (`min_phys_offset <= start`,
    /// `end <=` the append position): they stay readable through the returned range even if
    /// retention deletes their segments.
    pub fn pin_range(&self, start: PhysOffset, end: PhysOffset) -> LogResult<PinnedRange> {
        PinnedRange::new(&self.inner.shared.state.lock(), start.get(), end.get())
    }
}
