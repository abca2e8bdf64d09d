//! All IndexFiles of a node under `index/`, oldest first.

use std::path::Path;
use std::path::PathBuf;

use crate::consume_queue::format::file_name;
use crate::error::Result;
use crate::error::StoreError;
use crate::hash::key_hash;
use crate::index::config::IndexConfig;
use crate::index::file::IndexFile;
use crate::index::file::MAX_WALK_STEPS;
use crate::mapped_file::list_numbered_files;
use crate::mapped_file::sync_dir;
use crate::types::PhysOffset;
use crate::types::TimestampMs;

/// The key hash function (injectable so tests can force collisions).
pub type KeyHashFn = fn(&str) -> u64;

/// Result of [`IndexStore::put`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexPut {
    /// A unit was added.
    Added,
    /// The key of that physical offset was already indexed (replay): nothing written.
    AlreadyIndexed,
}

/// The key index: a sequence of IndexFiles, the last one active.
#[derive(Debug)]
pub struct IndexStore {
    dir: PathBuf,
    cfg: IndexConfig,
    hasher: KeyHashFn,
    /// Invariant: ordered by `seq`; units' physical offsets are non-decreasing across files;
    /// only the last file may be non-full or empty.
    files: Vec<IndexFile>,
    next_seq: u64,
}

impl IndexStore {
    /// Opens `dir` (created if missing) with the default key hash.
    pub fn open(dir: &Path, cfg: IndexConfig) -> Result<Self> {
        Self::open_with_hasher(dir, cfg, key_hash)
    }

    /// Opens with a given key hash. Sealed files get their header checked; the last file is
    /// replayed unit by unit and cut at the first invalid unit. A corrupt header is an error:
    /// the index is derived data, so the caller may wipe `dir` and re-dispatch.
    pub fn open_with_hasher(dir: &Path, cfg: IndexConfig, hasher: KeyHashFn) -> Result<Self> {
        cfg.validate()?;
        let seqs = list_numbered_files(dir, "index")?;
        let mut files = Vec::with_capacity(seqs.len());
        for (i, seq) in seqs.iter().enumerate() {
            let last = i + 1 == seqs.len();
            let path = dir.join(file_name(*seq));
            files.push(IndexFile::open(
                &path,
                *seq,
                cfg.slots_per_file,
                cfg.max_units_per_file,
                last,
            )?);
        }
        let next_seq = seqs.last().map_or(0, |s| s + 1);
        let s = IndexStore {
            dir: dir.to_owned(),
            cfg,
            hasher,
            files,
            next_seq,
        };
        tracing::info!(dir = %dir.display(), files = s.files.len(), end_phys = s.end_phys().get(), "index opened");
        Ok(s)
    }

    /// Physical offset of the newest indexed unit (0 if none).
    pub fn end_phys(&self) -> PhysOffset {
        self.newest_nonempty()
            .map_or(PhysOffset::ZERO, |f| f.header().end_phys)
    }

    fn newest_nonempty(&self) -> Option<&IndexFile> {
        self.files.iter().rev().find(|f| f.header().unit_count > 0)
    }

    /// True if `(hash, phys)` is indexed, `phys` being the newest indexed physical offset (its
    /// units may span the last files).
    fn contains_at_end(&self, hash: u64, phys: PhysOffset) -> bool {
        self.files
            .iter()
            .rev()
            .filter(|f| f.header().unit_count > 0)
            .take_while(|f| f.header().end_phys == phys)
            .any(|f| f.contains_at_end(hash, phys))
    }

    /// Number of files.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Indexes `key` of the message at `phys`. Messages must be indexed in physical offset
    /// order; a put below the newest indexed physical offset, or a repeat of a key already
    /// indexed at the newest one, is a replay and writes nothing. `phys` 0 is refused: no
    /// message starts there (the first entry's header does), and recovery reads an all-zero
    /// unit as never written.
    pub fn put(&mut self, key: &str, phys: PhysOffset, store_ts: TimestampMs) -> Result<IndexPut> {
        if phys == PhysOffset::ZERO {
            return Err(StoreError::invalid("index put at physical offset 0"));
        }
        let hash = (self.hasher)(key);
        if phys < self.end_phys() || self.contains_at_end(hash, phys) {
            return Ok(IndexPut::AlreadyIndexed);
        }
        let roll = self
            .files
            .last()
            .is_none_or(|f| f.is_full() || !f.accepts_ts(store_ts));
        if roll {
            self.roll()?;
        }
        let f = self.files.last_mut().expect("roll() leaves an active file");
        f.put(hash, phys, store_ts);
        tracing::trace!(phys_offset = phys.get(), "key indexed");
        Ok(IndexPut::Added)
    }

    fn roll(&mut self) -> Result<()> {
        if let Some(f) = self.files.last_mut() {
            f.flush()?;
        }
        let seq = self.next_seq;
        let path = self.dir.join(file_name(seq));
        let f = IndexFile::create(
            &path,
            seq,
            self.cfg.slots_per_file,
            self.cfg.max_units_per_file,
        )?;
        tracing::info!(seq, "index file created");
        self.files.push(f);
        self.next_seq += 1;
        Ok(())
    }

    /// Candidate physical offsets (newest first, at most `max`) of messages whose key hashes like
    /// `key` and whose store timestamp is in `[begin_ts, end_ts]`. Candidates may belong to other
    /// keys with the same hash: the caller checks the key on the record.
    pub fn query(
        &self,
        key: &str,
        begin_ts: TimestampMs,
        end_ts: TimestampMs,
        max: usize,
    ) -> Vec<PhysOffset> {
        let hash = (self.hasher)(key);
        let mut out = Vec::new();
        let mut steps = MAX_WALK_STEPS;
        for f in self.files.iter().rev() {
            if out.len() >= max || steps == 0 {
                break;
            }
            let h = f.header();
            if h.unit_count == 0 || h.end_ts_ms < begin_ts || h.begin_ts_ms > end_ts {
                continue;
            }
            f.query(hash, (begin_ts, end_ts), max, &mut steps, &mut out);
        }
        out
    }

    /// Crash recovery: removes every unit whose physical offset is `>= phys`. Returns units cut.
    pub fn truncate_phys_beyond(&mut self, phys: PhysOffset) -> Result<u64> {
        let mut cut = 0u64;
        while let Some(f) = self.files.last() {
            let h = *f.header();
            if h.unit_count > 0 && h.begin_phys < phys {
                break;
            }
            cut += u64::from(h.unit_count);
            self.files.pop().expect("last() was Some").remove()?;
        }
        if let Some(f) = self.files.last_mut() {
            let count = f.header().unit_count;
            let keep = f.units_below(phys);
            if keep < count {
                f.rebuild_prefix(keep)?;
                cut += u64::from(count - keep);
            }
        }
        sync_dir(&self.dir)?;
        if cut > 0 {
            tracing::info!(phys_offset = phys.get(), units_cut = cut, "index truncated");
        }
        Ok(cut)
    }

    /// Retention: removes whole files whose units all lie below `min_phys`. Returns files removed.
    pub fn delete_files_below(&mut self, min_phys: PhysOffset) -> Result<usize> {
        let n = self
            .files
            .iter()
            .take_while(|f| f.header().unit_count > 0 && f.header().end_phys < min_phys)
            .count();
        for f in self.files.drain(..n) {
            let seq = f.seq();
            f.remove()?;
            tracing::info!(seq, "index file deleted");
        }
        if n > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(n)
    }

    /// Checks the cross-file invariant (cheap: headers only).
    pub fn validate(&self) -> Result<()> {
        let mut prev_end = PhysOffset::ZERO;
        for (i, f) in self.files.iter().enumerate() {
            let h = f.header();
            let last = i + 1 == self.files.len();
            if !last && h.unit_count == 0 {
                return Err(StoreError::invalid(format!(
                    "index file {} is empty but not last",
                    f.seq()
                )));
            }
            if h.unit_count > 0 {
                if h.begin_phys < prev_end || h.end_phys < h.begin_phys {
                    return Err(StoreError::invalid(format!(
                        "index file {} covers phys [{}, {}] after {prev_end}",
                        f.seq(),
                        h.begin_phys,
                        h.end_phys
                    )));
                }
                prev_end = h.end_phys;
            }
        }
        Ok(())
    }

    /// msyncs the active file (sealed files were flushed when sealed).
    pub fn flush(&mut self) -> Result<()> {
        self.files.iter_mut().try_for_each(|f| f.flush())
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
