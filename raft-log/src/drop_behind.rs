//! [`DropBehind`]: keeps the page cache of the CommitLog to its newest `log-cache-bytes` (with a
//! write stage, whose appends leave no pages, to half the stage if less:
//! [`crate::config::LogConfig::cached_read_bytes`]).
//!
//! Every byte a node appends goes into a page-cache page. Left alone, the kernel keeps those
//! pages until memory runs short, so the log's cache grows to fill the free memory, and each
//! append takes a page the kernel has to find free memory for. On a VM whose balloon device
//! reports free pages to the host (`free page reporting`), that free memory has gone back to
//! the host, and the first write into each page is a fault in the host: measured on the dev
//! VM, 42% of a leader's CPU at batches of 32 × 1 KiB went to pwrite's copy into new pages,
//! and the same load ran 1.29–1.53 × faster with the default window (BENCHMARKS, twentieth
//! sitting).
//!
//! So after each flush cycle the flusher drops the pages more than `keep` bytes behind the
//! flushed end (`posix_fadvise(DONTNEED)`, in steps of at least [`STEP`], each reaching back
//! over the one before for a folio that straddled its end): they are clean (durable) by
//! then, the kernel frees them, and the next appends reuse them while they are still warm.
//! Reads of the log older than `keep` (a consumer lagging that far, a follower catching up
//! past the recent-entries cache) then go to the disk, with sequential readahead (segment
//! mappings are `MADV_SEQUENTIAL`), or a chunk at a time around the page cache where the
//! file system allows ([`crate::cold_read`]). The kernel keeps a page any process maps, and a
//! reader copying out of a segment's mapping maps it; so the range is unmapped from the node
//! first (`madvise(DONTNEED)`, which keeps the bytes: the next access maps them again).
//!
//! Nothing here changes data or durability: only flushed bytes are named, and dropping a page
//! only makes its next read a disk read. A failing drop is logged once and turns it off.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::env::PAGE_BYTES;
use crate::shared::Shared;
use crate::types::RawPhys;

/// Fewest bytes dropped at once (a system call and a few hundred pages freed per step).
pub const STEP: u64 = 1 << 20;

/// The drop position of one log; only flush cycles (serialized by the cycle lock) use it.
pub struct DropBehind {
    /// Bytes behind the flushed end left cached.
    keep: u64,
    /// Physical end of what was dropped so far.
    dropped: AtomicU64,
    /// A drop failed: stop asking.
    off: AtomicBool,
}

impl DropBehind {
    /// Keeps `keep` bytes behind the flushed end cached; `None` for 0 (the cache is left to
    /// the kernel).
    pub fn new(keep: u64) -> Option<Self> {
        (keep > 0).then(|| DropBehind {
            keep,
            dropped: AtomicU64::new(0),
            off: AtomicBool::new(false),
        })
    }

    /// After a flush cycle made everything below `flushed_end` durable: drops the pages more
    /// than `keep` bytes behind it that were not dropped yet, once there are [`STEP`] of them.
    /// Called under the cycle lock, after the cycle's waiters were completed.
    pub fn after_flush(&self, shared: &Shared, flushed_end: RawPhys) {
        if self.off.load(Ordering::Relaxed) {
            return;
        }
        // Whole pages.
        let to = flushed_end.saturating_sub(self.keep) / PAGE_BYTES * PAGE_BYTES;
        let from = self.dropped.load(Ordering::Relaxed);
        if to < from {
            // A truncation moved the end back: what is appended again is dropped again.
            self.dropped.store(to, Ordering::Relaxed);
            shared.state.lock().cold_end = to;
            return;
        }
        if to - from < STEP {
            return;
        }
        self.dropped.store(to, Ordering::Relaxed);
        // The kernel drops only folios wholly inside the range: one the last step's end cut
        // through (the page cache makes folios as large as a write) goes now. Readers below
        // `to` now read around the page cache.
        let ranges = {
            let mut st = shared.state.lock();
            st.cold_end = to;
            st.ranges_between(from.saturating_sub(STEP), to)
        };
        for (seg, path, off, len) in ranges {
            if let Err(e) = seg.drop_cache(off, len) {
                self.off.store(true, Ordering::Relaxed);
                tracing::warn!(path = %path.display(), offset = off, len, error = %e,
                    "cannot drop the log's old pages from the page cache; leaving it to the kernel");
                return;
            }
        }
        tracing::trace!(upto = to, "log pages dropped from the page cache");
    }
}
