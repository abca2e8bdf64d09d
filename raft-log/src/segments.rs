//! The set of CommitLog segment files and the background preallocation of the next one.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::types::PhysOffset;

/// File name of the segment starting at `start`: 20 decimal digits.
pub fn segment_name(start: PhysOffset) -> String {
    format!("{start:020}")
}

/// Parses a segment file name.
pub fn parse_segment_name(name: &str) -> Option<PhysOffset> {
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
    map: BTreeMap<PhysOffset, Arc<dyn SegmentFile>>,
}

impl Segments {
    /// An empty set over `dir` (the `commitlog/` directory).
    pub fn new(dir: PathBuf, env: Arc<dyn Env>, segment_bytes: u64) -> Self {
        Segments {
            dir,
            env,
            segment_bytes,
            map: BTreeMap::new(),
        }
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
    pub fn path(&self, start: PhysOffset) -> PathBuf {
        self.dir.join(segment_name(start))
    }

    /// Start of the segment holding `phys`.
    pub fn start_of(&self, phys: PhysOffset) -> PhysOffset {
        phys - phys % self.segment_bytes
    }

    /// Adds an open segment.
    pub fn insert(&mut self, start: PhysOffset, file: Arc<dyn SegmentFile>) {
        debug_assert_eq!(start % self.segment_bytes, 0);
        self.map.insert(start, file);
    }

    /// The segment starting at `start`.
    pub fn get(&self, start: PhysOffset) -> Option<Arc<dyn SegmentFile>> {
        self.map.get(&start).cloned()
    }

    /// Segment starts in order.
    pub fn starts(&self) -> Vec<PhysOffset> {
        self.map.keys().copied().collect()
    }

    /// The segment holding `phys` and the offset inside it.
    pub fn locate(&self, phys: PhysOffset) -> LogResult<(Arc<dyn SegmentFile>, u64)> {
        let start = self.start_of(phys);
        let seg = self.map.get(&start).ok_or_else(|| {
            LogError::InvalidArgument(format!("phys offset {phys} is not in any segment"))
        })?;
        Ok((seg.clone(), phys - start))
    }

    /// Writes bytes that lie inside one segment.
    pub fn write(&self, phys: PhysOffset, data: &[u8]) -> LogResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let (seg, off) = self.locate(phys)?;
        seg.write_at(off, data)
            .map_err(|e| LogError::io("write", self.path(self.start_of(phys)), e))
    }

    /// Removes (from the set and from disk) every segment starting at or after `start`.
    pub fn remove_from(&mut self, start: PhysOffset) -> LogResult<Vec<PhysOffset>> {
        let gone: Vec<_> = self.map.range(start..).map(|(k, _)| *k).collect();
        self.remove_all(&gone)?;
        Ok(gone)
    }

    /// Takes every segment that ends at or below `phys` out of the set, without touching the
    /// files: the caller deletes them with [`delete_detached`] once it released its locks
    /// (unmapping and unlinking a 1 GiB segment takes long).
    pub fn detach_below(&mut self, phys: PhysOffset) -> Detached {
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
            segments,
        }
    }

    fn remove_all(&mut self, starts: &[PhysOffset]) -> LogResult<()> {
        for s in starts {
            self.map.remove(s);
            let p = self.path(*s);
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

/// Outcome of preparing one segment.
type Prepared = (PhysOffset, Result<Arc<dyn SegmentFile>, String>);

#[derive(Default)]
struct Slot {
    /// A creation in progress.
    pending: Option<PhysOffset>,
    /// A finished creation.
    ready: Option<Prepared>,
    stop: bool,
}

/// Creates the next segment off the append path, on its own thread.
pub struct Preallocator {
    shared: Arc<(Mutex<Slot>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Preallocator {
    /// Starts the thread.
    pub fn start(env: Arc<dyn Env>, dir: PathBuf, segment_bytes: u64) -> LogResult<Self> {
        let shared = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raftlog-prealloc".into())
            .spawn(move || prealloc_loop(&sh, env.as_ref(), &dir, segment_bytes))
            .map_err(|e| LogError::io("spawn preallocator", "", e))?;
        Ok(Preallocator {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks for the segment starting at `start` to be created.
    pub fn request(&self, start: PhysOffset) {
        let (mu, cv) = &*self.shared;
        let mut s = mu.lock();
        if s.pending.is_none() && s.ready.as_ref().is_none_or(|r| r.0 != start) {
            s.ready = None;
            s.pending = Some(start);
            cv.notify_all();
        }
    }

    /// Takes the preallocated segment for `start` (waiting if it is being created). `None`:
    /// nothing was prepared for it; `Some(Err)`: preparing it failed.
    pub fn take(&self, start: PhysOffset) -> Option<Result<Arc<dyn SegmentFile>, String>> {
        let (mu, cv) = &*self.shared;
        let mut s = mu.lock();
        while s.pending == Some(start) {
            cv.wait(&mut s);
        }
        match s.ready.take() {
            Some((st, r)) if st == start => Some(r),
            other => {
                s.ready = other;
                None
            }
        }
    }

    /// Stops the thread (a preallocated, unused segment stays on disk).
    pub fn stop(&self) {
        {
            let (mu, cv) = &*self.shared;
            mu.lock().stop = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.lock().take() {
            if t.join().is_err() {
                tracing::error!("preallocator thread panicked");
            }
        }
    }
}

fn prealloc_loop(shared: &(Mutex<Slot>, Condvar), env: &dyn Env, dir: &Path, segment_bytes: u64) {
    let (mu, cv) = shared;
    loop {
        let start = {
            let mut s = mu.lock();
            while s.pending.is_none() && !s.stop {
                cv.wait(&mut s);
            }
            match (s.stop, s.pending) {
                (false, Some(start)) => start,
                _ => return,
            }
        };
        let path = dir.join(segment_name(start));
        let res = env
            .create_segment(&path, segment_bytes)
            .map_err(|e| LogError::io("preallocate segment", &path, e).to_string());
        match &res {
            Ok(_) => {
                tracing::info!(phys_offset = start, path = %path.display(), "preallocated segment")
            }
            Err(e) => {
                tracing::warn!(phys_offset = start, error = %e, "segment preallocation failed")
            }
        }
        let mut s = mu.lock();
        s.pending = None;
        s.ready = Some((start, res));
        cv.notify_all();
    }
}

/// Segments taken out of the log, to be deleted ([`Detached::delete`]).
#[must_use = "detached segments stay on disk until deleted"]
pub struct Detached {
    dir: std::path::PathBuf,
    env: Arc<dyn Env>,
    segments: Vec<(std::path::PathBuf, Arc<dyn SegmentFile>)>,
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

    /// Unmaps and deletes the segments (each shrunk stepwise first, see
    /// [`Env::remove_large`]), then fsyncs the directory. Returns how many.
    pub fn delete(self) -> LogResult<usize> {
        let n = self.segments.len();
        for (path, file) in self.segments {
            drop(file);
            self.env
                .remove_large(&path)
                .map_err(|e| LogError::io("remove segment", path, e))?;
        }
        if n > 0 {
            self.env
                .sync_dir(&self.dir)
                .map_err(|e| LogError::io("fsync dir", self.dir.clone(), e))?;
            tracing::info!(segments = n, "deleted segments below the purge point");
        }
        Ok(n)
    }
}
