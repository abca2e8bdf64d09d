//! [`Segments`]: the set of open CommitLog segment files (`commitlog/<20-digit start>`), their
//! names, and [`Detached`], the segments retention took out of the log, deleted later
//! (those still pinned via the [`Graveyard`]) or kept for reuse (the [`Recycler`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::graveyard::Graveyard;
use crate::recycle::Recycler;
use crate::types::RawPhys;

/// File name of the segment starting at `start`: 20 decimal digits.
pub fn segment_name(start: RawPhys) -> String {
    format!("{start:020}")
}

/// Parses a segment file name.
pub fn parse_segment_name(name: &str) -> Option<RawPhys> {
    if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
        name.parse().ok()
    } else {
        None
    }
}

/// The open segments of the CommitLog.
pub struct Segments {
    dir: PathBuf,
    env: Arc<dyn Env>,
    segment_bytes: u64,
    /// Invariant: keys are multiples of `segment_bytes` and contiguous; every file has
    /// capacity `segment_bytes`.
    map: BTreeMap<RawPhys, Arc<dyn SegmentFile>>,
    /// Detached segments still pinned.
    graveyard: Arc<Graveyard>,
    /// Detached segments kept for reuse (shared with the writer, which takes them).
    recycler: Arc<Recycler>,
}

impl Segments {
    /// An empty set over `dir` (the `commitlog/` directory), keeping detached segments in
    /// `recycler` (which must be over `dir` too).
    pub fn new(
        dir: PathBuf,
        env: Arc<dyn Env>,
        segment_bytes: u64,
        recycler: Arc<Recycler>,
    ) -> Self {
        Segments {
            graveyard: Arc::new(Graveyard::new(env.clone(), dir.clone())),
            dir,
            env,
            segment_bytes,
            map: BTreeMap::new(),
            recycler,
        }
    }

    /// The pool of segments kept for reuse.
    pub fn recycler(&self) -> &Arc<Recycler> {
        &self.recycler
    }

    /// The segments detached while pinned (a pin sweeps it when it drops).
    pub fn graveyard(&self) -> Arc<Graveyard> {
        self.graveyard.clone()
    }

    /// Directory of the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Segment size.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Path of the segment starting at `start`.
    pub fn path(&self, start: RawPhys) -> PathBuf {
        self.dir.join(segment_name(start))
    }

    /// Start of the segment holding `phys`.
    pub fn start_of(&self, phys: RawPhys) -> RawPhys {
        phys - phys % self.segment_bytes
    }

    /// Adds an open segment.
    pub fn insert(&mut self, start: RawPhys, file: Arc<dyn SegmentFile>) {
        debug_assert_eq!(start % self.segment_bytes, 0);
        self.map.insert(start, file);
    }

    /// The segment starting at `start`.
    pub fn get(&self, start: RawPhys) -> Option<Arc<dyn SegmentFile>> {
        self.map.get(&start).cloned()
    }

    /// Segment starts in order.
    pub fn starts(&self) -> Vec<RawPhys> {
        self.map.keys().copied().collect()
    }

    /// The segment holding `phys` and the offset inside it.
    pub fn locate(&self, phys: RawPhys) -> LogResult<(Arc<dyn SegmentFile>, u64)> {
        let start = self.start_of(phys);
        let seg = self.map.get(&start).ok_or_else(|| {
            LogError::InvalidArgument(format!("phys offset {phys} is not in any segment"))
        })?;
        Ok((seg.clone(), phys - start))
    }

    /// Writes bytes that lie inside one segment.
    pub fn write(&self, phys: RawPhys, data: &[u8]) -> LogResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let (seg, off) = self.locate(phys)?;
        seg.write_at(off, data)
            .map_err(|e| LogError::io("write", self.path(self.start_of(phys)), e))
    }

    /// Writes `parts`, back to back, at `phys`; together they lie inside one segment.
    pub fn write_vectored(&self, phys: RawPhys, parts: &[&[u8]]) -> LogResult<()> {
        if parts.is_empty() {
            return Ok(());
        }
        let (seg, off) = self.locate(phys)?;
        seg.write_vectored_at(off, parts)
            .map_err(|e| LogError::io("write", self.path(self.start_of(phys)), e))
    }

    /// Removes every segment starting at or after `start` from the set, and from the disk or
    /// into the [`Recycler`] (one nobody else holds, while it has room).
    pub fn remove_from(&mut self, start: RawPhys) -> LogResult<Vec<RawPhys>> {
        let gone: Vec<_> = self.map.range(start..).map(|(k, _)| *k).collect();
        self.remove_all(&gone)?;
        Ok(gone)
    }

    /// Takes every segment that ends at or below `phys` out of the set, without touching the
    /// files: the caller deletes them with [`Detached::delete`] once it released its locks
    /// (unmapping and unlinking a 1 GiB segment takes long).
    pub fn detach_below(&mut self, phys: RawPhys) -> Detached {
        let gone: Vec<_> = self
            .map
            .keys()
            .copied()
            .filter(|k| k + self.segment_bytes <= phys)
            .collect();
        let segments = gone
            .into_iter()
            .filter_map(|s| self.map.remove(&s).map(|f| (self.path(s), f)))
            .collect();
        Detached {
            dir: self.dir.clone(),
            env: self.env.clone(),
            graveyard: self.graveyard.clone(),
            recycler: self.recycler.clone(),
            segments,
        }
    }

    fn remove_all(&mut self, starts: &[RawPhys]) -> LogResult<()> {
        for s in starts {
            let file = self.map.remove(s);
            let p = self.path(*s);
            if file.is_some_and(|f| Arc::strong_count(&f) == 1) && self.recycler.keep(&p)? {
                continue;
            }
            self.env
                .remove(&p)
                .map_err(|e| LogError::io("remove segment", p, e))?;
        }
        if !starts.is_empty() {
            self.env
                .sync_dir(&self.dir)
                .map_err(|e| LogError::io("fsync dir", self.dir.clone(), e))?;
        }
        Ok(())
    }
}

/// Segments taken out of the log, to be deleted ([`Detached::delete`]).
#[must_use = "detached segments stay on disk until deleted"]
pub struct Detached {
    dir: PathBuf,
    env: Arc<dyn Env>,
    graveyard: Arc<Graveyard>,
    recycler: Arc<Recycler>,
    segments: Vec<(PathBuf, Arc<dyn SegmentFile>)>,
}

impl Detached {
    /// How many segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Unmaps and deletes the segments, then fsyncs the directory, then removes the earlier
    /// detached segments whose pins dropped since ([`Graveyard::sweep`]). Returns how many
    /// of its own segments left the log's names.
    ///
    /// A segment nobody else holds is kept for reuse while the [`Recycler`] has room, else
    /// shrunk stepwise, then unlinked ([`Env::remove_large`]).
    /// One still held (a [`crate::PinnedRange`], or a reader between its lookup and its read)
    /// keeps every byte, as its mapping must (reading past a shrunk file's end raises
    /// SIGBUS): it is renamed to `<name>.deleted` and removed stepwise once the last holder
    /// drops it ([`Graveyard`]); a reader's short hold is waited out first (up to
    /// [`READER_WAIT`]), so only pins leave segments behind. Holders only clone from each
    /// other once the segment left the log, so a count of one here stays one.
    pub fn delete(self) -> LogResult<usize> {
        let n = self.segments.len();
        let mut kept = 0;
        for (path, file) in self.segments {
            if !alone_soon(&file) {
                self.graveyard.bury(&path, file)?;
                continue;
            }
            drop(file);
            if self.recycler.keep(&path)? {
                kept += 1;
                continue;
            }
            self.env
                .remove_large(&path)
                .map_err(|e| LogError::io("remove segment", path, e))?;
        }
        if n > 0 {
            self.env
                .sync_dir(&self.dir)
                .map_err(|e| LogError::io("fsync dir", self.dir.clone(), e))?;
            tracing::info!(
                segments = n,
                kept_for_reuse = kept,
                "segments below the purge point left the log"
            );
        }
        self.graveyard.sweep()?;
        Ok(n)
    }
}

/// Longest [`Detached::delete`] waits for the readers of a segment to let go.
const READER_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// True once `file` has no other holder, waiting up to [`READER_WAIT`] for one (a reader
/// between its lookup and its read holds a segment for microseconds; a pin for long).
fn alone_soon(file: &Arc<dyn SegmentFile>) -> bool {
    let deadline = std::time::Instant::now() + READER_WAIT;
    while Arc::strong_count(file) > 1 {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}
