//! [`Stage`]: the newest bytes of the segment being appended to, held in memory and written to
//! the file around the OS page cache (`O_DIRECT`) by the flush that makes them durable.
//!
//! Why: an append through the page cache cost each node about 8% of its CPU at batches of
//! 32 × 1 KiB (BENCHMARKS, thirtieth sitting): the kernel's copy into the page cache, ext4's
//! delayed allocation per page, the page allocations, and the writeback inside the fdatasync
//! (77% of a follower's log append was kernel work). Here an append is a copy into a ring of
//! reused memory, and the flush writes whole blocks from it with one `pwritev` before its
//! fdatasync; the runtime thread waits for no device.
//!
//! The ring holds the bytes `[low, high)` of one segment (its owner), each at its file offset
//! modulo the ring's size; `[low, clean_end)` is on disk as in the ring, `[clean_end, high)`
//! only here. Reads of `[low, high)` come from the ring; below `low` the file is the truth (the
//! ring wrote it out before `low` passed it), and so it is at and above `high`, where nothing
//! was written through the stage. `high` is the end of the owner's latest write; the zero-ahead
//! thread writes only past it, from the next whole page on (`zero_ahead.rs`).
//!
//! A `sync` log's ring is the process's own memory: what it holds is not acknowledged until
//! the flush wrote it out. An `async` log acknowledges an append once it is copied, so there
//! the ring is a shared mapping of the stage file, whose header follows `low`, `high`,
//! `clean_end` and the owner, and which the next open replays after a kill -9
//! (`stage_file.rs`).
//!
//! A write-out sends the blocks from `clean_end`'s to `high`'s (`Ring::write_blocks`, the last
//! one padded); the next writes that block again: a durable block rewritten, as the page
//! cache's writeback of a partial page does too.
//!
//! Concurrency, on the [`crate::env::SegmentFile`] contract (one writer, under the log lock;
//! readers only below the published append position):
//! - readers copy out of the ring under `meta`'s read lock; the writer moves `low` under its
//!   write lock, so no slot is reused while a reader copies from it;
//! - `io` serializes write-outs and the change of owner;
//! - the writer copies into the slots of `[offset, end)`, which alias file bytes below `low`
//!   (no reader or write-out touches those); a write-out reads the slots of whole blocks below
//!   `high`, which an append does not touch (a truncation's rewrite may: see `rewrite_min`).
//!
//! Handing the ring to another segment (a roll) writes the old owner's bytes out first, so its
//! next `sync_range` only has to fdatasync. A write that does not continue the ring (below
//! `low`, past `high`, or over half the ring: recovery's and a truncation's zeros) writes the
//! owner's bytes out, releases the ring, and goes through the page cache as before.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;

use parking_lot::Mutex;
use parking_lot::RwLock;

use crate::ring::Ring;
use crate::ring::BLOCK;
use crate::stage_file::BootId;
use crate::stage_file::FileId;
use crate::stage_file::Header;
use crate::stage_file::Memory;

/// Smallest stage accepted (`write-stage-bytes`).
pub const MIN_STAGE_BYTES: u64 = 1 << 20;
/// Largest stage accepted.
pub const MAX_STAGE_BYTES: u64 = 1 << 30;

/// Where the ring stands (module docs).
#[derive(Default)]
struct Meta {
    /// The owning segment: its id and its descriptors (`O_DIRECT`, and plain for a file
    /// system that refuses a direct write).
    owner: Option<(u64, Files)>,
    low: u64,
    high: u64,
    clean_end: u64,
    /// The lowest offset written since the running write-out took its range (`u64::MAX`:
    /// none): what it wrote from there on may predate that write, so it is not clean.
    rewrite_min: u64,
}

impl Meta {
    fn owned_by(&self, id: u64) -> bool {
        self.owner.as_ref().is_some_and(|o| o.0 == id)
    }
}

/// A segment's descriptors for write-outs.
#[derive(Clone)]
pub(crate) struct Files {
    /// Opened with `O_DIRECT`.
    pub direct: Arc<File>,
    /// The segment's ordinary descriptor.
    pub plain: Arc<File>,
    /// The file, as the stage file's header names its owner.
    pub id: FileId,
}

/// The write stage of one log (shared by its segments; one owns it at a time).
pub struct Stage {
    bytes: u64,
    /// The stage file and this boot's id (`None`: the ring is the process's memory).
    file: Option<(PathBuf, BootId)>,
    mem: OnceLock<Memory>,
    /// Set when the log stops as a crash would: the header stays as it is for the next open.
    halted: AtomicBool,
    /// Set when the stage file could not be made: no segment takes the ring any more.
    unusable: AtomicBool,
    meta: RwLock<Meta>,
    /// One write-out at a time; holds the block `high` falls in, padded (taken on first use).
    io: Mutex<Option<Ring>>,
    /// Bytes written out (for tests and figures).
    written: AtomicU64,
}

impl Stage {
    /// A stage of `bytes` (rounded up to whole 4 KiB blocks, at least two), its memory taken
    /// when a segment first writes.
    pub fn new(bytes: u64) -> Stage {
        Stage {
            bytes: bytes.next_multiple_of(BLOCK).max(2 * BLOCK),
            file: None,
            mem: OnceLock::new(),
            halted: AtomicBool::new(false),
            unusable: AtomicBool::new(false),
            meta: RwLock::new(Meta::default()),
            io: Mutex::new(None),
            written: Default::default(),
        }
    }

    /// A stage whose ring lies in the stage file at `path` (created when a segment first
    /// writes), for a log that acknowledges appends before writing them out; `boot` is
    /// [`crate::stage_file::boot_id`].
    pub fn in_file(bytes: u64, path: PathBuf, boot: BootId) -> Stage {
        Stage {
            file: Some((path, boot)),
            ..Stage::new(bytes)
        }
    }

    /// The log stopped as a crash would: from now on the stage file's header is left as it
    /// is, so that the next open replays what the ring holds.
    pub fn halt(&self) {
        self.halted.store(true, Ordering::Release);
    }

    /// Bytes written to files so far.
    pub fn written_bytes(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Copies `parts`, back to back, to `offset` of segment `id` (whose descriptors are
    /// `files`; `seed` reads its bytes, for the start of `offset`'s block when
    /// the ring is handed to it). `Ok(false)`: the write does not continue the ring, which was
    /// released; the caller writes through the page cache instead.
    pub(crate) fn write(
        &self,
        id: u64,
        files: &Files,
        offset: u64,
        parts: &[&[u8]],
        seed: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<bool> {
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if len == 0 {
            return Ok(true);
        }
        if len > self.bytes / 2 {
            self.release(id)?;
            return Ok(false);
        }
        let end = offset + len;
        if !self.meta.read().owned_by(id) && !self.take(id, files, offset, seed)? {
            return Ok(false);
        }
        let (low, high, clean) = {
            let m = self.meta.read();
            (m.low, m.high, m.clean_end)
        };
        if offset < low || offset > high {
            self.release(id)?;
            return Ok(false);
        }
        if offset < high && clean < high {
            // A rewrite (after a truncation) ends the ring's bytes at its own end: what lies
            // above goes to the file first.
            self.flush(id)?;
        }
        // Room: the slots of [offset, end) hold [offset - bytes, end - bytes) now.
        let need = end.saturating_sub(self.bytes).next_multiple_of(BLOCK);
        if need > low {
            if self.meta.read().clean_end < need {
                self.flush(id)?;
            }
            let mut m = self.meta.write();
            if m.clean_end < need {
                return Err(io::Error::other("write stage: bytes not written out"));
            }
            m.low = need;
            if let Some(h) = self.header() {
                h.set_low(need);
            }
        }
        let ring = self.ring()?;
        let mut at = offset;
        for p in parts {
            // SAFETY: past `high` these slots alias file bytes below `low` (made so above),
            // which no reader and no write-out touches; the one writer is this call (module
            // docs). Below `high` (a rewrite after a truncation) they hold bytes past the
            // log's append position, which readers do not read, and a write-out reading them
            // meanwhile leaves them dirty (`rewrite_min`).
            unsafe { ring.copy_in(at, p) };
            at += p.len() as u64;
        }
        let mut m = self.meta.write();
        m.high = end;
        m.clean_end = m.clean_end.min(offset);
        m.rewrite_min = m.rewrite_min.min(offset);
        if let Some(h) = self.header() {
            h.set_range(m.clean_end, end);
        }
        Ok(true)
    }

    /// Reads `buf.len()` bytes at `offset` of segment `id`: what the ring holds from it, the
    /// rest with `file_read`.
    pub(crate) fn read(
        &self,
        id: u64,
        offset: u64,
        buf: &mut [u8],
        file_read: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let (a, b) = {
            let m = self.meta.read();
            if !m.owned_by(id) || offset >= m.high || end <= m.low {
                drop(m);
                return file_read(offset, buf);
            }
            let (a, b) = (offset.max(m.low), end.min(m.high));
            let ring = self.ring()?;
            let part = &mut buf[(a - offset) as usize..(b - offset) as usize];
            // SAFETY: [a, b) lies in [low, high), whose slots no one writes while the read
            // lock keeps `low` where it is (module docs).
            unsafe { ring.copy_out(a, part) };
            (a, b)
        };
        if a > offset {
            file_read(offset, &mut buf[..(a - offset) as usize])?;
        }
        if end > b {
            file_read(b, &mut buf[(b - offset) as usize..])?;
        }
        Ok(())
    }

    /// Whether a read of `[offset, offset + len)` of segment `id` touches the ring.
    pub(crate) fn holds(&self, id: u64, offset: u64, len: usize) -> bool {
        let m = self.meta.read();
        m.owned_by(id) && offset < m.high && offset + len as u64 > m.low
    }

    /// Writes segment `id`'s bytes that are only in the ring to its file (no fdatasync).
    pub(crate) fn flush(&self, id: u64) -> io::Result<()> {
        let mut block = self.io.lock();
        if !self.meta.read().owned_by(id) {
            return Ok(());
        }
        self.write_out(&mut block)
    }

    /// Writes segment `id`'s bytes out and gives the ring up, if `id` owns it.
    pub(crate) fn release(&self, id: u64) -> io::Result<()> {
        let mut block = self.io.lock();
        if !self.meta.read().owned_by(id) {
            return Ok(());
        }
        self.write_out(&mut block)?;
        self.disown();
        Ok(())
    }

    /// Gives the ring up without writing anything (segment `id` is gone, or the log stopped).
    pub(crate) fn forget(&self, id: u64) {
        let _io = self.io.lock();
        if self.meta.read().owned_by(id) {
            self.disown();
        }
    }

    /// No owner, in memory and in the stage file's header (unless the log halted: the header
    /// then stays as a killed process would leave it).
    fn disown(&self) {
        let mut m = self.meta.write();
        m.owner = None;
        if let Some(h) = self
            .header()
            .filter(|_| !self.halted.load(Ordering::Acquire))
        {
            h.disown();
        }
    }

    fn ring(&self) -> io::Result<&Ring> {
        self.mem
            .get()
            .map(|m| &m.ring)
            .ok_or_else(|| io::Error::other("write stage used before its memory was taken"))
    }

    fn header(&self) -> Option<&Header> {
        self.mem.get().and_then(|m| m.header.as_ref())
    }

    /// Hands the ring to segment `id` at `offset`: the owner's bytes written out, then the
    /// ring holding `offset`'s block up to `offset`, read from the file. `false`: the stage
    /// file cannot be made (a full disk, a read-only directory): the appends go through the
    /// page cache from now on, which keeps an `async` log's promise too.
    fn take(
        &self,
        id: u64,
        files: &Files,
        offset: u64,
        seed: &dyn Fn(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<bool> {
        // Checked first: with no stage file, every append comes here (it owns nothing), and
        // there is no owner to write out.
        if self.unusable.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut block = self.io.lock();
        self.write_out(&mut block)?;
        self.disown();
        if self.mem.get().is_none() {
            match Memory::take(self.bytes, self.file.as_ref()) {
                Ok(mem) => drop(self.mem.set(mem)),
                Err(e) if self.file.is_some() => {
                    tracing::warn!(error = %e,
                        "cannot make the write stage file; appends go through the page cache");
                    self.unusable.store(true, Ordering::Release);
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        let ring = self.ring()?;
        let low = offset / BLOCK * BLOCK;
        let mut head = [0u8; BLOCK as usize];
        let head = &mut head[..(offset - low) as usize];
        seed(low, head)?;
        // SAFETY: no segment owns the ring, so no reader or write-out uses it, and the writer
        // is this call.
        unsafe { ring.copy_in(low, head) };
        let mut m = self.meta.write();
        *m = Meta {
            owner: Some((id, files.clone())),
            low,
            high: offset,
            clean_end: low,
            rewrite_min: u64::MAX,
        };
        if let Some(h) = self.header() {
            h.own(files.id, low, offset, low);
        }
        Ok(true)
    }

    /// Writes the owner's `[clean_end's block, high)` out; `block` is `io`'s, held.
    fn write_out(&self, block: &mut Option<Ring>) -> io::Result<()> {
        let (files, start, high) = {
            let mut m = self.meta.write();
            let Some((_, files)) = &m.owner else {
                return Ok(());
            };
            if m.clean_end >= m.high {
                return Ok(());
            }
            let files = files.clone();
            m.rewrite_min = u64::MAX;
            (files, m.clean_end / BLOCK * BLOCK, m.high)
        };
        // SAFETY: [start, high) is below `high`, whose slots no append touches; a rewrite's
        // (after a truncation) leaves them dirty (`rewrite_min`, module docs).
        let bytes = unsafe {
            self.ring()?
                .write_blocks(block, &files.direct, &files.plain, start, high)
        }?;
        self.written.fetch_add(bytes, Ordering::Relaxed);
        let mut m = self.meta.write();
        m.clean_end = high.min(m.rewrite_min);
        if let Some(h) = self.header() {
            h.set_clean_end(m.clean_end);
        }
        Ok(())
    }
}

/// Test support: a new zeroed file of `len` bytes at `path` and its descriptors (the direct one
/// with `O_DIRECT` where the file system allows it, else a second plain one: the stage's logic
/// is the same).
#[cfg(test)]
pub(crate) fn test_files(path: &std::path::Path, len: u64) -> Files {
    use std::os::unix::fs::OpenOptionsExt;
    let plain = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    plain.set_len(len).unwrap();
    let direct = File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .or_else(|_| File::options().read(true).write(true).open(path))
        .unwrap();
    Files {
        id: crate::stage_file::FileId::of(&plain).unwrap(),
        direct: Arc::new(direct),
        plain: Arc::new(plain),
    }
}

#[cfg(test)]
#[path = "stage_tests.rs"]
mod tests;
