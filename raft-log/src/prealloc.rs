//! [`Preallocator`]: prepares the next CommitLog segment on its own thread, off the append path
//! (a free segment renamed, or a new one: temp file, fallocate, fsync, rename, dir fsync; see
//! `Recycler::create`), so a segment roll finds it ready. A failed preparation is reported to
//! the roll, which retries inline.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::recycle::Recycler;
use crate::segments::segment_name;
use crate::shared::join_thread;
use crate::types::RawPhys;

/// Outcome of preparing one segment.
type Prepared = (RawPhys, Result<Arc<dyn SegmentFile>, String>);

#[derive(Default)]
struct Slot {
    /// A creation in progress.
    pending: Option<RawPhys>,
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
    pub fn start(recycler: Arc<Recycler>, dir: PathBuf, segment_bytes: u64) -> LogResult<Self> {
        let shared = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raftlog-prealloc".into())
            .spawn(move || prealloc_loop(&sh, &recycler, &dir, segment_bytes))
            .map_err(|e| LogError::io("spawn preallocator", "", e))?;
        Ok(Preallocator {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks for the segment starting at `start` to be created.
    pub fn request(&self, start: RawPhys) {
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
    pub fn take(&self, start: RawPhys) -> Option<Result<Arc<dyn SegmentFile>, String>> {
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

    /// Waits for a creation in progress and forgets what was prepared (the log's segment
    /// files are about to be replaced: a prepared handle would point at a removed file).
    pub fn discard(&self) {
        let (mu, cv) = &*self.shared;
        let mut s = mu.lock();
        while s.pending.is_some() {
            cv.wait(&mut s);
        }
        s.ready = None;
    }

    /// Stops the thread (a preallocated, unused segment stays on disk).
    pub fn stop(&self) {
        {
            let (mu, cv) = &*self.shared;
            mu.lock().stop = true;
            cv.notify_all();
        }
        join_thread(&self.thread, "preallocator");
    }
}

fn prealloc_loop(
    shared: &(Mutex<Slot>, Condvar),
    recycler: &Recycler,
    dir: &Path,
    segment_bytes: u64,
) {
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
        let res = recycler
            .create(&path, segment_bytes)
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
