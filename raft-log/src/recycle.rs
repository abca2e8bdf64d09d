//! [`Recycler`]: segments retention took out of the log, kept to become later segments
//! instead of being deleted (as RocksDB's `recycle_log_file_num` and PostgreSQL's WAL
//! segments are), up to `recycle-segments` of them.
//!
//! Why: a new segment is `fallocate`d, so its blocks are *unwritten* extents, and the first
//! fdatasync after a write into one writes the file's extent metadata too. Measured on the
//! dev VM (ext4), 30 KB `pwrite` + `fdatasync`: p50 0.17 ms and 64–77 µs of CPU into
//! fallocated space, 0.10 ms and 37 µs into blocks written before (BENCHMARKS, thirty-ninth
//! sitting). A recycled segment's blocks were all written in its earlier life, so a node that
//! has run through its retention appends without conversions, and the zeros of
//! `zero_ahead.rs` are not needed there.
//!
//! A free segment is renamed `<old start>.free` in the `commitlog/` directory; taking one
//! renames it to the new segment's name and fsyncs the directory. Its old bytes stay until
//! appends overwrite them. They do not pass for records of the new segment: every record
//! header names its own physical offset ([`crate::format`]), and every old one names a
//! smaller offset than any position of the new life, so a scan stops at the first old byte
//! as it would at a torn tail. (Only a header forged inside an old message's body could pass:
//! it would have to name the very offset the new life gives it, lie exactly where that life's
//! records end at a crash, and carry the next index and a current term, all guessed ahead.)
//! What must differ for a recycled file is the cut of a tail, since the bytes past the end are
//! not zeros (`tail.rs`): a truncation zeroes exactly what this life wrote; an open after a
//! clean close goes on at the end it recorded; an open after a crash, which cannot tell where
//! a torn tail ends among old bytes, closes the segment with a padding record.
//!
//! The cost: up to `recycle-segments` segments' disk space held after retention (a node whose
//! disk is full deletes them: `LogStore::delete_free_segments`), and the old bytes of deleted
//! messages kept on disk (unreadable through the log) until overwritten.

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::env::suffixed;
use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::graveyard::remove_stepwise;

/// Suffix of a free segment, kept for reuse.
pub const FREE_SUFFIX: &str = ".free";

/// The free segments of one log directory (see the module docs).
pub struct Recycler {
    env: Arc<dyn Env>,
    /// The `commitlog/` directory.
    dir: PathBuf,
    /// Most free segments kept (`recycle-segments`).
    max: usize,
    /// Invariant: at most `max` paths, each a `.free` name in `dir`, none held by the log.
    free: Mutex<Vec<PathBuf>>,
}

impl Recycler {
    /// An empty pool of at most `max` segments over `dir`.
    pub fn new(env: Arc<dyn Env>, dir: PathBuf, max: usize) -> Self {
        Recycler {
            env,
            dir,
            max,
            free: Mutex::default(),
        }
    }

    /// At open: keeps the free segment `name` found in the directory if there is room, else
    /// removes it. A name kept already (an open after a snapshot install) stays as it is.
    pub fn adopt(&self, name: &str) -> LogResult<()> {
        let path = self.dir.join(name);
        let mut free = self.free.lock();
        if free.contains(&path) {
            return Ok(());
        }
        if free.len() < self.max {
            free.push(path);
            return Ok(());
        }
        drop(free);
        self.env
            .remove_large(&path)
            .map_err(|e| LogError::io("remove free segment", path, e))
    }

    /// Takes the segment at `path`, out of the log and held by nobody, into the pool if there
    /// is room (renamed to `<name>.free`); false: the caller deletes it. The caller fsyncs the
    /// directory.
    pub fn keep(&self, path: &Path) -> LogResult<bool> {
        let mut free = self.free.lock();
        if free.len() >= self.max {
            return Ok(false);
        }
        let to = suffixed(path, FREE_SUFFIX);
        self.env
            .rename(path, &to)
            .map_err(|e| LogError::io("rename segment", &to, e))?;
        tracing::debug!(path = %to.display(), "segment kept for reuse");
        // A log that an install replaced may have had a segment of this start already.
        if !free.contains(&to) {
            free.push(to);
        }
        Ok(true)
    }

    /// Deletes every free segment (a full disk wants their space back), then fsyncs the
    /// directory; returns how many.
    pub fn drain(&self) -> LogResult<usize> {
        let free = std::mem::take(&mut *self.free.lock());
        if remove_stepwise(self.env.as_ref(), &self.dir, &free)? {
            tracing::info!(segments = free.len(), "deleted the segments kept for reuse");
        }
        Ok(free.len())
    }

    /// The segment file for `path`: a free one renamed to it (the directory fsynced) if one
    /// is kept and has `capacity` bytes, else a new one ([`Env::create_segment`]).
    pub fn create(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>> {
        while let Some(from) = self.free.lock().pop() {
            match self.env.reuse_segment(&from, path) {
                Ok(f) if f.capacity() == capacity => {
                    tracing::debug!(from = %from.display(), to = %path.display(), "segment reused");
                    return Ok(f);
                }
                Ok(f) => {
                    tracing::warn!(path = %path.display(), bytes = f.capacity(), expected = capacity, "free segment has the wrong size: deleting it");
                    drop(f);
                    self.env.remove_large(path)?;
                }
                Err(e) => {
                    tracing::warn!(from = %from.display(), error = %e, "reusing a free segment failed: deleting it");
                    // Under either name: the rename may or may not have happened.
                    self.env.remove_large(&from)?;
                    self.env.remove_large(path)?;
                }
            }
        }
        self.env.create_segment(path, capacity)
    }
}
