//! [`Flusher`]: the flusher thread: group commit for `sync`, periodic flush for `async`.
//!
//! One flush cycle flushes the whole dirty range `[flushed end, append position)` once
//! (fdatasync; msync with mapped writes) and completes every waiter of the [`FlushQueue`] it
//! covers, so under load many appends share one flush. A failed flush stops the log: every
//! waiter (and every later append) gets the error. After the waiters, the cycle advances the
//! flush checkpoint; the `checkpointer` makes it durable. The thread holds only the [`Shared`]
//! core.
//!
//! [`FlushQueue`]: crate::flush_queue::FlushQueue

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use parking_lot::MutexGuard;

use crate::checkpointer::Checkpointer;
use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::shared::Shared;

/// The flush cycle and its thread.
pub struct Flusher {
    shared: Arc<Shared>,
    /// Serializes flush cycles with truncation, snapshot install and segment detaching.
    cycle: Mutex<()>,
    /// The `raft-index` directory (named in errors).
    index_dir: PathBuf,
    /// Makes the checkpoints of the thread's cycles durable.
    checkpointer: Arc<Checkpointer>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Flusher {
    /// Starts the thread; `interval` is the `async` flush interval (`None`: `sync`, flush when
    /// an append waits).
    pub fn start(
        shared: Arc<Shared>,
        index_dir: PathBuf,
        interval: Option<Duration>,
    ) -> LogResult<Arc<Self>> {
        let flusher = Arc::new(Flusher {
            checkpointer: Checkpointer::start(shared.clone(), index_dir.join("index"))?,
            shared,
            cycle: Mutex::new(()),
            index_dir,
            thread: Mutex::new(None),
        });
        let f = flusher.clone();
        let t = std::thread::Builder::new()
            .name("raftlog-flusher".into())
            .spawn(move || f.run(interval))
            .map_err(|e| LogError::io("spawn flusher", "", e))?;
        *flusher.thread.lock() = Some(t);
        Ok(flusher)
    }

    fn run(&self, interval: Option<Duration>) {
        while self.shared.waiters.wait_for_work(interval) {
            let _cycle = self.cycle.lock();
            if let Err(e) = self.cycle_locked(false) {
                tracing::error!(error = %e, "flush failed: the log is stopped");
            }
        }
    }

    /// Stops and joins the thread (and the checkpointer's).
    pub fn stop(&self) {
        self.shared.waiters.stop();
        if let Some(t) = self.thread.lock().take() {
            if t.join().is_err() {
                tracing::error!("flusher thread panicked");
            }
        }
        self.checkpointer.stop();
    }

    /// Holds off flush cycles while the caller changes the log under the returned guard.
    pub fn lock_cycle(&self) -> MutexGuard<'_, ()> {
        self.cycle.lock()
    }

    /// One flush cycle: msync the dirty range, advance the flushed watermark, complete the
    /// waiters it covers, make the checkpoint durable. Errors stop the log and fail every
    /// waiter.
    pub fn flush_once(&self) -> LogResult<()> {
        let _cycle = self.cycle.lock();
        self.flush_locked()
    }

    /// [`Flusher::flush_once`] with the cycle lock ([`Flusher::lock_cycle`]) already held.
    pub fn flush_locked(&self) -> LogResult<()> {
        self.cycle_locked(true)
    }

    /// One cycle; the checkpoint is made durable before returning (`durable`) or by the
    /// checkpointer thread (the flusher thread's own cycles).
    fn cycle_locked(&self, durable: bool) -> LogResult<()> {
        let shared = &*self.shared;
        let (ranges, target, (index_file, index_write)) = {
            let mut st = shared.state.lock();
            if let Some(msg) = &st.failed {
                let msg = msg.clone();
                drop(st);
                shared.waiters.fail_all(&msg);
                return Err(LogError::Stopped(msg));
            }
            let target = FlushCheckpoint {
                phys_end: st.append_pos,
                log_id: st.last_entry_id(),
            };
            (st.dirty_ranges(), target, st.index.take_pending())
        };
        // The raft index: written here, off the append path, before the fdatasync; synced by
        // the checkpointer before a durable checkpoint covers it.
        if let Err(e) = index_write.apply(index_file.as_ref()) {
            let path = self.index_dir.clone();
            return Err(shared.fail(LogError::io("write raft index", path, e)));
        }
        for (seg, path, off, len) in ranges {
            if let Err(e) = seg.sync_range(off, len) {
                return Err(shared.fail(LogError::io("msync", path, e)));
            }
        }
        let changed = {
            let mut st = shared.state.lock();
            std::mem::replace(&mut st.flushed, target) != target
        };
        shared
            .durable
            .note_log_flushed(target.log_id.map(|l| l.index));
        shared.waiters.complete_upto(target.phys_end);
        // The checkpoint describes the fdatasync above, so it is advanced after it and made
        // durable right after (here, or by the checkpointer, once for every cycle that ran
        // meanwhile). A stale one would let recovery cut flushed, later corrupted bytes as a
        // torn tail instead of reporting them.
        if durable {
            if let Err(e) = self.checkpointer.persist() {
                return Err(shared.fail(e));
            }
        } else if changed {
            self.checkpointer.note_recorded();
        }
        tracing::trace!(phys_offset = target.phys_end, "flushed");
        Ok(())
    }
}
