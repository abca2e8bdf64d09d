//! [`ColdReads`]: reads of the log's dropped pages, a chunk at a time past the page cache.
//!
//! [`crate::drop_behind`] keeps the page cache to the newest `log-cache-bytes`, so a reader
//! further behind (a consumer lagging that far, a follower catching up past the
//! recent-entries cache) reads bytes that are on the disk only. Through the mapping, each of
//! those reads faults in a page-cache page the kernel has just taken from free memory, and
//! on a VM whose balloon reports free pages to the host (as the dev VM's does) the first
//! touch of each such page is a fault in the host: a follower pulling a backlog from behind
//! the window spent 62% of its CPU in the copy out of the mapping, and pulled 0.55–0.6 × as
//! fast as from the cache (BENCHMARKS, twenty-second sitting).
//!
//! So those reads go around the page cache: the chunk of [`CHUNK`] bytes holding the read is
//! read with `O_DIRECT` ([`SegmentFile::read_uncached`]) into one of [`SLOTS`] buffers kept
//! for the purpose (warm memory, reused), and readers copy their records out of it. The
//! queues of one consumer, or a follower's entries and a consumer at the same place, share
//! the chunk. A 1 KiB-record read of a 700 MB file written this way: 1.48–1.54 GB/s with
//! 0.07–0.08 s of CPU, against 0.58–2.1 GB/s and 0.1–1.1 s through the mapping.
//!
//! Only what the log will not change is read this way: bytes below the dropped end (flushed
//! long ago, and never above the flushed end, so `O_DIRECT` never waits for a writeback), of
//! the log as it was at the read's [`State::checkpoint_epoch`](crate::state::State) (a
//! truncation or an install bumps it, and the chunks of an older epoch are dropped). A read
//! the chunks cannot serve (an error, a short read) is served from the mapping instead, as
//! before: this path only makes reads faster, never fails one.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::env::SegmentFile;
use crate::types::RawPhys;

/// Bytes read at once (a multiple of [`ALIGN`]).
pub const CHUNK: usize = 2 << 20;

/// Chunks kept (the least recently used one is read over).
pub const SLOTS: usize = 8;

/// The alignment `O_DIRECT` needs of offsets, lengths and buffers (the page size covers
/// every logical block size in use).
pub const ALIGN: usize = 4096;

/// Where a cold read happens: found under the state lock by
/// [`State::cold_read`](crate::state::State::cold_read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdAt {
    /// Physical start of the read's segment.
    pub segment_start: RawPhys,
    /// Chunks end here at most: the dropped end, or the segment's end if lower.
    pub limit: RawPhys,
    /// The log's epoch (see the module docs).
    pub epoch: u64,
}

/// The chunk buffers of one log.
#[derive(Default)]
pub struct ColdReads {
    chunks: Mutex<Chunks>,
}

#[derive(Default)]
struct Chunks {
    epoch: u64,
    /// At most [`SLOTS`]; a buffer being read into is out of the list meanwhile.
    slots: Vec<Chunk>,
    /// Buffers in use (in `slots` or being read into).
    buffers: usize,
    /// Counts lookups (the chunks' recency).
    uses: u64,
}

struct Chunk {
    /// Physical start.
    start: RawPhys,
    /// Valid bytes from `start`.
    len: usize,
    used: u64,
    buf: Buffer,
}

impl ColdReads {
    /// The `len` bytes at `phys` of the segment `seg` (see [`ColdAt`]), or `None` when the
    /// chunks cannot serve them (the caller reads the mapping).
    pub fn read(
        &self,
        seg: &Arc<dyn SegmentFile>,
        at: ColdAt,
        phys: RawPhys,
        len: usize,
    ) -> Option<Vec<u8>> {
        let end = phys.checked_add(len as u64)?;
        if phys < at.segment_start || end > at.limit {
            return None;
        }
        let mut out = Vec::with_capacity(len);
        let mut pos = phys;
        while pos < end {
            let start = at.segment_start + (pos - at.segment_start) / CHUNK as u64 * CHUNK as u64;
            let want = (end.min(start + CHUNK as u64) - pos) as usize;
            if !self.copy_cached(at.epoch, start, pos, want, &mut out) {
                self.load(seg, at, start, pos, want, &mut out)?;
            }
            pos += want as u64;
        }
        Some(out)
    }

    /// Copies `want` bytes at `pos` from the chunk at `start`, if it is there.
    fn copy_cached(
        &self,
        epoch: u64,
        start: RawPhys,
        pos: RawPhys,
        want: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let mut c = self.chunks.lock();
        if c.epoch != epoch {
            c.buffers -= c.slots.len();
            c.slots.clear();
            c.epoch = epoch;
        }
        c.uses += 1;
        let uses = c.uses;
        let Some(chunk) = c.slots.iter_mut().find(|k| k.start == start) else {
            return false;
        };
        let from = (pos - start) as usize;
        chunk.used = uses;
        let Some(bytes) = chunk.bytes().get(from..from + want) else {
            return false;
        };
        out.extend_from_slice(bytes);
        true
    }

    /// Reads the chunk at `start` (outside the lock), copies `want` bytes at `pos` from it
    /// and keeps it.
    fn load(
        &self,
        seg: &Arc<dyn SegmentFile>,
        at: ColdAt,
        start: RawPhys,
        pos: RawPhys,
        want: usize,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let mut buf = self.take_buffer();
        let valid = (at.limit - start).min(CHUNK as u64) as usize;
        let read = valid.next_multiple_of(ALIGN);
        let n = seg
            .read_uncached(start - at.segment_start, buf.aligned(read))
            .map_err(|e| tracing::debug!(error = %e, "cold read of the log failed"))
            .ok()?;
        let chunk = Chunk {
            start,
            len: n.min(valid),
            used: 0,
            buf,
        };
        let from = (pos - start) as usize;
        let got = chunk.bytes().get(from..from + want).map(|b| {
            out.extend_from_slice(b);
        });
        let mut c = self.chunks.lock();
        if c.epoch == at.epoch && c.slots.len() < SLOTS && !c.slots.iter().any(|k| k.start == start)
        {
            c.uses += 1;
            let used = c.uses;
            c.slots.push(Chunk { used, ..chunk });
        } else {
            c.buffers -= 1;
        }
        got
    }

    /// A buffer to read into: a new one while fewer than [`SLOTS`] are in use, else the
    /// least recently used chunk's.
    fn take_buffer(&self) -> Buffer {
        let mut c = self.chunks.lock();
        if c.buffers < SLOTS || c.slots.is_empty() {
            c.buffers += 1;
            return Buffer::new();
        }
        let lru = c
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, k)| k.used)
            .map_or(0, |(i, _)| i);
        c.slots.swap_remove(lru).buf
    }
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        &self.buf.aligned_ref()[..self.len]
    }
}

/// [`CHUNK`] bytes aligned to [`ALIGN`] (inside a vector [`ALIGN`] bytes longer: no unsafe
/// allocation).
struct Buffer {
    vec: Vec<u8>,
}

impl Buffer {
    fn new() -> Self {
        Self {
            vec: vec![0; CHUNK + ALIGN],
        }
    }

    fn offset(&self) -> usize {
        self.vec.as_ptr().align_offset(ALIGN).min(ALIGN)
    }

    /// The first `len` (at most [`CHUNK`]) aligned bytes.
    fn aligned(&mut self, len: usize) -> &mut [u8] {
        let at = self.offset();
        &mut self.vec[at..at + len.min(CHUNK)]
    }

    fn aligned_ref(&self) -> &[u8] {
        let at = self.offset();
        &self.vec[at..at + CHUNK]
    }
}

#[cfg(test)]
#[path = "cold_read_tests.rs"]
mod tests;
