//! [`Graveyard`]: segments retention took out of the log while a [`crate::PinnedRange`] still
//! mapped them. Such a file must keep every byte while mapped (shrinking it would make the
//! pin's reads past the new end raise SIGBUS), but unlinking it outright would free its space
//! in one burst when the last pin drops (the long journal transaction [`Env::remove_large`]
//! avoids). So it is renamed to `<name>.deleted` and its handle kept here; once nobody else
//! holds it, [`Graveyard::sweep`] removes it stepwise. A sweep runs after every retention pass
//! and, on a short-lived thread, when the last clone of a pin drops ([`SweepOnDrop`]). A crash
//! leaves `.deleted` files, which the next open unlinks.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::env::suffixed;
use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;

/// Suffix of a segment file out of the log but still mapped by a pin.
pub const DELETED_SUFFIX: &str = ".deleted";

/// The held-out segments of one log directory (see the module docs).
pub struct Graveyard {
    env: Arc<dyn Env>,
    /// The `commitlog/` directory.
    dir: PathBuf,
    /// Invariant: each path is a `.deleted` name in `dir`; its file is out of the log.
    held: Mutex<Vec<(PathBuf, Arc<dyn SegmentFile>)>>,
}

impl Graveyard {
    /// An empty graveyard over `dir`.
    pub fn new(env: Arc<dyn Env>, dir: PathBuf) -> Self {
        Graveyard {
            env,
            dir,
            held: Mutex::default(),
        }
    }

    /// True if no segment waits for its pins.
    pub fn is_empty(&self) -> bool {
        self.held.lock().is_empty()
    }

    /// Takes the segment at `path` (out of the log, held elsewhere) out of the log's names
    /// and keeps it until [`Graveyard::sweep`] finds nobody else holding it. The caller
    /// fsyncs the directory.
    pub fn bury(&self, path: &Path, file: Arc<dyn SegmentFile>) -> LogResult<()> {
        let to = suffixed(path, DELETED_SUFFIX);
        self.env
            .rename(path, &to)
            .map_err(|e| LogError::io("rename segment", &to, e))?;
        tracing::debug!(path = %to.display(), "segment still pinned: kept until its pins drop");
        self.held.lock().push((to, file));
        Ok(())
    }

    /// Removes stepwise ([`Env::remove_large`]) every buried segment nobody else holds any
    /// more, then fsyncs the directory. Returns how many.
    ///
    /// Holders only clone from each other (a pin from a pin), never from here, so a count of
    /// one under the lock stays one.
    pub fn sweep(&self) -> LogResult<usize> {
        let free: Vec<PathBuf> = {
            let mut held = self.held.lock();
            let mut free = Vec::new();
            held.retain(|(path, file)| {
                let alone = Arc::strong_count(file) == 1;
                if alone {
                    free.push(path.clone());
                }
                !alone
            });
            free
        };
        if remove_stepwise(self.env.as_ref(), &self.dir, &free)? {
            tracing::info!(segments = free.len(), "removed segments whose pins dropped");
        }
        Ok(free.len())
    }
}

/// Removes each of `paths` (segment files out of the log, held by nobody) stepwise
/// ([`Env::remove_large`]), then fsyncs `dir`; false if there were none.
pub(crate) fn remove_stepwise(env: &dyn Env, dir: &Path, paths: &[PathBuf]) -> LogResult<bool> {
    for path in paths {
        env.remove_large(path)
            .map_err(|e| LogError::io("remove segment", path, e))?;
    }
    if paths.is_empty() {
        return Ok(false);
    }
    env.sync_dir(dir)
        .map_err(|e| LogError::io("fsync dir", dir, e))?;
    Ok(true)
}

/// Shared by a pin and its clones: when the last goes (after its segment handles, declared
/// before it), sweeps the graveyard on a short-lived thread (the drop may run on an async
/// runtime worker; a stepwise removal sleeps).
pub struct SweepOnDrop(pub Arc<Graveyard>);

impl Drop for SweepOnDrop {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let graveyard = self.0.clone();
        let spawned = std::thread::Builder::new()
            .name("raftlog-sweep".into())
            .spawn(move || {
                if let Err(e) = graveyard.sweep() {
                    tracing::warn!(error = %e, "removing unpinned segments failed (the next open removes them)");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the sweep of unpinned segments (the next retention pass retries)");
        }
    }
}
