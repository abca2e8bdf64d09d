//! The narrow storage I/O interface (STYLE #9); its real implementation (files + mmap) is
//! [`FsEnv`] (`fs_env.rs`).
//!
//! Every byte the log reads or writes goes through [`Env`] and [`SegmentFile`], so tests can
//! swap in [`crate::mem_env::MemEnv`], which loses unsynced bytes or tears records on a
//! simulated crash.

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::fs_env::FsEnv;
pub use crate::fs_env::REMOVE_STEP_BYTES;

/// One fixed-capacity, preallocated file the log writes in place (a CommitLog segment).
///
/// Concurrency contract: writers and readers touch disjoint ranges (the log writes only past
/// its published append position and reads only below it).
pub trait SegmentFile: Send + Sync {
    /// Capacity in bytes (the file length).
    fn capacity(&self) -> u64;
    /// True if every block of the file was written before (a segment reused from an earlier
    /// one, see `recycle.rs`): writing zeros ahead of the appends gains nothing there.
    /// Default: false.
    fn blocks_written(&self) -> bool {
        false
    }
    /// Copies `data` to `offset` (visible to readers at once, durable after `sync_range`).
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Copies `parts`, back to back, to `offset`, as [`SegmentFile::write_at`] of their
    /// concatenation would. Default: one `write_at` per part.
    fn write_vectored_at(&self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        write_each(self, offset, parts)
    }
    /// Copies `buf.len()` bytes at `offset` into `buf`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// The `len` bytes at `offset` as a new vector (a mapping copies them once, without
    /// zero-filling the vector first).
    fn read_vec(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }
    /// Makes `[offset, offset + len)` durable.
    fn sync_range(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Writes zeros over `[offset, offset + len)`, which holds no data, and waits until they
    /// are written back: later writes there then overwrite blocks the file system holds as
    /// written (see `zero_ahead.rs`). Promises no durability. Default: zeros through
    /// [`SegmentFile::write_at`] (in-memory files).
    fn zero_fill(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut at = offset;
        let end = offset.saturating_add(len);
        while at < end {
            let n = (end - at).min(ZEROS.len() as u64) as usize;
            self.write_at(at, &ZEROS[..n])?;
            at += n as u64;
        }
        Ok(())
    }
    /// Starts writing `[offset, offset + len)` back to the disk and returns without waiting
    /// for it. Promises nothing about durability (only [`SegmentFile::sync_range`] does): it
    /// lets an `async` log spread its writeback over the flush interval rather than leave
    /// one burst to the periodic flush. Default: nothing to start (in-memory files).
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Drops the pages of `[offset, offset + len)`, which the log has made durable, from the
    /// OS page cache (see `drop_behind.rs`): later reads of the range go to the disk. Changes
    /// no data and promises nothing else. Default: nothing to drop (in-memory files).
    fn drop_cache(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Reads up to `buf.len()` bytes at `offset` around the OS page cache where the file
    /// system allows (`O_DIRECT`; see `cold_read.rs`), and returns how many it read (fewer
    /// only at the file's end). `offset`, `buf.len()` and `buf`'s address are multiples of
    /// [`crate::cold_read::ALIGN`]. Default: [`copy_uncached`] (in-memory files).
    fn read_uncached(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        copy_uncached(self, offset, buf)
    }
}

/// [`SegmentFile::read_uncached`] as a plain [`SegmentFile::read_at`] of what the file holds.
pub(crate) fn copy_uncached<F: SegmentFile + ?Sized>(
    f: &F,
    offset: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let n = f.capacity().saturating_sub(offset).min(buf.len() as u64) as usize;
    f.read_at(offset, &mut buf[..n])?;
    Ok(n)
}

/// The page size the log's page-cache calls work in (writeback, drops, madvise).
pub(crate) const PAGE_BYTES: u64 = 4096;

/// Zeros for [`SegmentFile::zero_fill`].
pub(crate) static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// [`SegmentFile::write_vectored_at`] as one `write_at` per part.
pub(crate) fn write_each<F: SegmentFile + ?Sized>(
    f: &F,
    offset: u64,
    parts: &[&[u8]],
) -> io::Result<()> {
    let mut at = offset;
    for p in parts {
        f.write_at(at, p)?;
        at += p.len() as u64;
    }
    Ok(())
}

/// A small file written by offset and read whole (the raft index).
pub trait PlainFile: Send + Sync {
    /// Writes `data` at `offset`, extending the file if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Reads the whole file.
    fn read_all(&self) -> io::Result<Vec<u8>>;
    /// Sets the length.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// fdatasync.
    fn sync(&self) -> io::Result<()>;
}

/// File system operations of the log.
pub trait Env: Send + Sync {
    /// Creates the directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a zero-filled segment of `capacity` bytes at `path`, durably (written to a
    /// temporary name, synced, renamed, directory synced): a full disk fails here, never later.
    fn create_segment(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>>;
    /// Opens an existing segment.
    fn open_segment(&self, path: &Path) -> io::Result<Arc<dyn SegmentFile>>;
    /// Makes the segment file at `from` (out of the log) the segment at `to`, durably
    /// (renamed, directory synced), and opens it as a new segment would be; its old bytes
    /// stay (see `recycle.rs`). Default: [`Env::rename`], [`Env::sync_dir`],
    /// [`Env::open_segment`].
    fn reuse_segment(&self, from: &Path, to: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        self.rename(from, to)?;
        if let Some(dir) = to.parent() {
            self.sync_dir(dir)?;
        }
        self.open_segment(to)
    }
    /// Opens or creates a plain file.
    fn open_plain(&self, path: &Path) -> io::Result<Arc<dyn PlainFile>>;
    /// Removes a file (missing is not an error).
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes a large file without one long burst of file-system work (the default is
    /// [`Env::remove`]). Blocks for a while: call it off the hot path, with no lock held.
    /// The file may be shrunk before it is unlinked, so it must not be mapped any more
    /// (reading a mapping past a file's end raises SIGBUS): see [`crate::Detached::delete`].
    fn remove_large(&self, path: &Path) -> io::Result<()> {
        self.remove(path)
    }
    /// Renames a file, replacing `to` if it exists (not durable until the directories are
    /// synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsyncs a directory.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The log stops as a crash would ([`crate::LogStore::halt_without_flush`]): leave on disk
    /// what a killed process would leave (the write stage's file as it is).
    fn halt(&self) {}
}

/// `path` with `.tmp` appended: where a file is written before it is renamed into place.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    suffixed(path, ".tmp")
}

/// `path` with `suffix` appended to its file name.
pub(crate) fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}
