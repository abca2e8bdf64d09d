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
//! the chunk. The first use of a chunk has the next one read on the `raftlog-readahead`
//! thread, so a reader moving through the log finds it read already and the node's runtime
//! thread does not wait for the disk (a 2 MiB read takes 1.7 ms on the dev VM).
//!
//! Measured on the dev VM: 1 KiB records read out of a 700 MB file just written with the same
//! drop-behind ran at 1.48–1.54 GB/s with 0.07–0.08 s of CPU this way, against 0.58–2.1 GB/s
//! and 0.16–1.1 s through the mapping; the suite's lagging pull from a follower went from
//! 208–253k to 336–377k msg/s (the cached pull: about 390k).
//!
//! Only what the log will not change is read this way: bytes below the dropped end (flushed
//! long ago, and never above the flushed end, so `O_DIRECT` never waits for a writeback), of
//! the log as it was at the read's [`State::checkpoint_epoch`](crate::state::State) (a
//! truncation or an install bumps it, and the chunks of an older epoch are dropped). A read
//! the chunks cannot serve (an error, a short read) is served from the mapping instead, as
//! before: this path only makes reads faster, never fails one. The buffers (at most
//! [`SLOTS`] × [`CHUNK`], 16 MiB, plus one per read in progress) are taken on the first cold
//! read, so a node whose readers keep up never has them.

use std::io;
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::env::SegmentFile;
use crate::huge::HugeBuf;
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

/// The chunk buffers of one log, and its read-ahead.
#[derive(Default)]
pub struct ColdReads {
    chunks: Arc<Mutex<Chunks>>,
    ahead: Mutex<Ahead>,
}

/// The read-ahead thread: when a chunk is first used, the next one is read on it, so a
/// reader moving through the log finds its next chunk read already.
#[derive(Default)]
enum Ahead {
    #[default]
    NotStarted,
    Running(mpsc::Sender<Job>),
    /// It could not be started: readers read every chunk themselves.
    Off,
}

struct Job {
    seg: Arc<dyn SegmentFile>,
    at: ColdAt,
    start: RawPhys,
}

#[derive(Default)]
struct Chunks {
    /// Chunks read from the disk since open.
    reads: u64,
    epoch: u64,
    /// At most [`SLOTS`]; a buffer being read into is out of the list meanwhile.
    slots: Vec<Chunk>,
    /// Counts lookups (the chunks' recency).
    uses: u64,
}

struct Chunk {
    /// Physical start.
    start: RawPhys,
    /// Valid bytes from `start`.
    len: usize,
    used: u64,
    /// The next chunk was asked for (on this chunk's first use).
    next_asked: bool,
    /// [`CHUNK`] bytes, a huge page of their own where the kernel gives one, so an `O_DIRECT`
    /// read pins one page, not 512 (`huge.rs`).
    buf: HugeBuf,
}

impl ColdReads {
    /// Without the read-ahead thread (tests that count chunks).
    #[cfg(test)]
    fn without_read_ahead() -> Self {
        Self {
            chunks: Arc::default(),
            ahead: Mutex::new(Ahead::Off),
        }
    }

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
            let first_use = match copy_cached(&self.chunks, at.epoch, start, pos, want, &mut out) {
                Some(first) => first,
                None => {
                    if !load(&self.chunks, seg, at, start) {
                        return None;
                    }
                    copy_cached(&self.chunks, at.epoch, start, pos, want, &mut out)?
                }
            };
            if first_use {
                self.read_ahead(seg, at, start + CHUNK as u64);
            }
            pos += want as u64;
        }
        Some(out)
    }

    /// Chunks read from the disk since open.
    pub fn chunk_reads(&self) -> u64 {
        self.chunks.lock().reads
    }

    /// Has the chunk at `start` read on the read-ahead thread (started on first use).
    fn read_ahead(&self, seg: &Arc<dyn SegmentFile>, at: ColdAt, start: RawPhys) {
        if start >= at.limit || cached(&self.chunks, at.epoch, start) {
            return;
        }
        let mut ahead = self.ahead.lock();
        if matches!(*ahead, Ahead::NotStarted) {
            *ahead = self.start_thread();
        }
        let job = Job {
            seg: seg.clone(),
            at,
            start,
        };
        if let Ahead::Running(tx) = &*ahead {
            if tx.send(job).is_err() {
                *ahead = Ahead::Off;
            }
        }
    }

    /// The read-ahead thread; it ends once this log's `ColdReads` is dropped.
    fn start_thread(&self) -> Ahead {
        let (tx, rx) = mpsc::channel::<Job>();
        let chunks = self.chunks.clone();
        let spawned = std::thread::Builder::new()
            .name("raftlog-readahead".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    if !cached(&chunks, job.at.epoch, job.start) {
                        load(&chunks, &job.seg, job.at, job.start);
                    }
                }
            });
        match spawned {
            Ok(_) => Ahead::Running(tx),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the log's read-ahead thread");
                Ahead::Off
            }
        }
    }
}

/// Whether the chunk at `start` is there (in `epoch`).
fn cached(chunks: &Mutex<Chunks>, epoch: u64, start: RawPhys) -> bool {
    let c = chunks.lock();
    c.epoch == epoch && c.slots.iter().any(|k| k.start == start)
}

/// Copies `want` bytes at `pos` from the chunk at `start`, if it is there, and says whether
/// this was the chunk's first use. A newer `epoch` drops every chunk first; a read of an
/// older one (it raced a truncation or an install) is left to the mapping.
fn copy_cached(
    chunks: &Mutex<Chunks>,
    epoch: u64,
    start: RawPhys,
    pos: RawPhys,
    want: usize,
    out: &mut Vec<u8>,
) -> Option<bool> {
    let mut c = chunks.lock();
    if epoch < c.epoch {
        return None;
    }
    if epoch > c.epoch {
        c.slots.clear();
        c.epoch = epoch;
    }
    c.uses += 1;
    let uses = c.uses;
    let chunk = c.slots.iter_mut().find(|k| k.start == start)?;
    chunk.used = uses;
    let from = (pos - start) as usize;
    out.extend_from_slice(chunk.bytes().get(from..from + want)?);
    Some(!std::mem::replace(&mut chunk.next_asked, true))
}

/// Reads the chunk at `start` (outside the lock) and keeps it (in place of the least
/// recently used one if need be); false if it could not be read.
fn load(chunks: &Mutex<Chunks>, seg: &Arc<dyn SegmentFile>, at: ColdAt, start: RawPhys) -> bool {
    let mut buf = match take_buffer(chunks) {
        Ok(buf) => buf,
        Err(e) => {
            tracing::debug!(error = %e, "no buffer for a cold read; reading the mapping");
            return false;
        }
    };
    let valid = (at.limit - start).min(CHUNK as u64) as usize;
    let read = valid.next_multiple_of(ALIGN);
    let n = match seg.read_uncached(start - at.segment_start, &mut buf[..read]) {
        Ok(n) => n,
        Err(e) => {
            tracing::debug!(error = %e, "cold read of the log failed; reading the mapping");
            return false;
        }
    };
    let len = n.min(valid);
    let mut c = chunks.lock();
    c.reads += 1;
    if c.epoch != at.epoch {
        return false;
    }
    // Read meanwhile (by the read-ahead, or by another reader), or read before the dropped
    // end passed its end: the longer copy stays.
    if let Some(k) = c.slots.iter_mut().find(|k| k.start == start) {
        if k.len < len {
            std::mem::swap(&mut k.buf, &mut buf);
            k.len = len;
        }
        return true;
    }
    if c.slots.len() >= SLOTS {
        if let Some(lru) = lru(&c.slots) {
            c.slots.swap_remove(lru);
        }
    }
    c.uses += 1;
    let used = c.uses;
    c.slots.push(Chunk {
        start,
        len,
        used,
        next_asked: false,
        buf,
    });
    true
}

/// A buffer to read into: the least recently used chunk's once [`SLOTS`] are kept, else a
/// new one.
fn take_buffer(chunks: &Mutex<Chunks>) -> io::Result<HugeBuf> {
    {
        let mut c = chunks.lock();
        if c.slots.len() >= SLOTS {
            if let Some(i) = lru(&c.slots) {
                return Ok(c.slots.swap_remove(i).buf);
            }
        }
    }
    HugeBuf::new(CHUNK)
}

/// The least recently used of `slots`.
fn lru(slots: &[Chunk]) -> Option<usize> {
    slots
        .iter()
        .enumerate()
        .min_by_key(|(_, k)| k.used)
        .map(|(i, _)| i)
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
#[path = "cold_read_tests.rs"]
mod tests;
