//! [`Flusher`]: the flusher thread: group commit for `sync`, periodic flush for `async`.
//!
//! One flush cycle flushes the whole dirty range `[flushed end, append position)` once
//! (fdatasync; msync with mapped writes) and completes every waiter of the [`FlushQueue`] it
//! covers, so under load many appends share one flush. A failed flush stops the log: every
//! waiter (and every later append) gets the error. After the waiters, the cycle advances the
//! flush checkpoint; the `checkpointer` makes it durable. The thread holds only the [`Shared`]
//! core.
//!
//! `async`: between two periodic flushes the thread starts the writeback of the whole pages
//! appended since its last step, every [`WRITEBACK_STEP`] (with a write stage: its bytes written
//! out; else `sync_file_range`, no wait; neither promises durability), so the periodic
//! fdatasync finds little left to write. Left to the periodic flush, 500 ms of a 4 x 64 load
//! (~15 MB) went to the disk in one burst, and the meta db's fsync of the committed id, which
//! an `async` node makes in openraft's core loop before it goes on, queued behind it: every
//! append and reply waited (p99 51 ms against `sync`'s 37 ms). The step was 10 ms until the
//! thirty-seventh sitting: a follower's write-out of 10 ms of appends (1.7 MB at 4 x 64) then
//! held up the leader's flushes of the same disk (p99 3.5-4.1 ms against 2.6-3.1 at 2 ms).
//! A step that finds nothing to write doubles the next one, up to [`QUIET_WRITEBACK_STEP`], so
//! an idle log wakes as rarely as before.
//!
//! [`FlushQueue`]: crate::flush_queue::FlushQueue

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Mutex;
use parking_lot::MutexGuard;

use crate::checkpointer::Checkpointer;
use crate::drop_behind::DropBehind;
use crate::env::PAGE_BYTES;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flush_queue::Wake;
use crate::meta::FlushCheckpoint;
use crate::shared::join_thread;
use crate::shared::Shared;

/// How often an `async` log's flusher starts the writeback of what was appended meanwhile.
pub const WRITEBACK_STEP: Duration = Duration::from_millis(2);
/// The longest step, reached by doubling while steps find nothing appended.
pub const QUIET_WRITEBACK_STEP: Duration = Duration::from_millis(10);

/// The `async` step after one that wrote something out (`wrote`) or found nothing: back to
/// [`WRITEBACK_STEP`], or twice `step` up to [`QUIET_WRITEBACK_STEP`]; never past `interval`.
fn next_step(step: Duration, wrote: bool, interval: Duration) -> Duration {
    match wrote {
        true => WRITEBACK_STEP,
        false => QUIET_WRITEBACK_STEP.min(step * 2),
    }
    .min(interval)
}

/// The flush cycle and its thread.
pub struct Flusher {
    shared: Arc<Shared>,
    /// Serializes flush cycles with truncation, snapshot install and segment detaching.
    cycle: Mutex<()>,
    /// The `raft-index` directory (named in errors).
    index_dir: PathBuf,
    /// Makes the checkpoints of the thread's cycles durable.
    checkpointer: Arc<Checkpointer>,
    /// Physical end of the writeback started so far (`async`; only the thread touches it).
    written_back: AtomicU64,
    /// Drops the log's pages older than `log-cache-bytes` from the page cache after cycles.
    drop_behind: Option<DropBehind>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Flusher {
    /// Starts the thread; `interval` is the `async` flush interval (`None`: `sync`, flush when
    /// an append waits); `cache_bytes` is [`crate::config::LogConfig::cached_read_bytes`] (see
    /// `drop_behind.rs`).
    pub fn start(
        shared: Arc<Shared>,
        index_dir: PathBuf,
        interval: Option<Duration>,
        cache_bytes: u64,
    ) -> LogResult<Arc<Self>> {
        let flusher = Arc::new(Flusher {
            checkpointer: Checkpointer::start(shared.clone(), index_dir.join("index"))?,
            shared,
            cycle: Mutex::new(()),
            index_dir,
            written_back: AtomicU64::new(0),
            drop_behind: DropBehind::new(cache_bytes),
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
        let Some(interval) = interval else {
            while self.shared.waiters.wait_for_work(None) == Wake::Asked {
                self.cycle();
            }
            return;
        };
        let mut step = interval.min(WRITEBACK_STEP);
        let mut next_cycle = Instant::now() + interval;
        loop {
            let wait = next_cycle
                .saturating_duration_since(Instant::now())
                .min(step);
            match self.shared.waiters.wait_for_work(Some(wait)) {
                Wake::Stop => return,
                Wake::TimedOut if Instant::now() < next_cycle => {
                    step = next_step(step, self.start_writeback(), interval);
                }
                Wake::Asked | Wake::TimedOut => {
                    self.cycle();
                    next_cycle = Instant::now() + interval;
                }
            }
        }
    }

    fn cycle(&self) {
        self.cycle_under(self.cycle.lock());
    }

    /// Starts the writeback of the whole pages appended since the last step (`async`); `false`
    /// if there were none. Takes the log lock only to read the ranges, and not the cycle lock:
    /// a segment detached meanwhile is still open through its `Arc`, and writing it back is
    /// harmless. A failure is only logged: nothing depends on the writeback, and the periodic
    /// flush reports the disk's errors.
    fn start_writeback(&self) -> bool {
        let ranges = {
            let st = self.shared.state.lock();
            if st.failed.is_some() {
                return false;
            }
            let from = self
                .written_back
                .load(Ordering::Relaxed)
                .max(st.flushed.phys_end);
            // Whole pages: a partial last page would be written back twice.
            let to = st.append_pos - st.append_pos % PAGE_BYTES;
            if to <= from {
                return false;
            }
            self.written_back.store(to, Ordering::Relaxed);
            st.ranges_between(from, to)
        };
        for (seg, path, off, len) in ranges {
            if let Err(e) = seg.start_writeback(off, len) {
                tracing::warn!(path = %path.display(), error = %e, "cannot start writeback");
            }
        }
        true
    }

    /// Stops and joins the thread (and the checkpointer's).
    pub fn stop(&self) {
        self.shared.waiters.stop();
        join_thread(&self.thread, "flusher");
        self.checkpointer.stop();
    }

    /// Holds off flush cycles while the caller changes the log under the returned guard.
    pub fn lock_cycle(&self) -> MutexGuard<'_, ()> {
        self.cycle.lock()
    }

    /// The cycle lock, unless a cycle holds it (an inline flush goes to the flusher then).
    pub fn try_lock_cycle(&self) -> Option<MutexGuard<'_, ()>> {
        self.cycle.try_lock()
    }

    /// One cycle under the held cycle lock, the checkpoint left to the checkpointer: the
    /// flusher thread's cycles, and an append's flush on its own thread
    /// ([`crate::inline_flush`]; the caller took the lock before appending). An error stops
    /// the log and fails the waiters, so their callbacks get it.
    pub fn cycle_under(&self, _cycle: MutexGuard<'_, ()>) {
        if let Err(e) = self.cycle_locked(false) {
            tracing::error!(error = %e, "flush failed: the log is stopped");
        }
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
        let synced = !ranges.is_empty();
        for (seg, path, off, len) in ranges {
            if let Err(e) = seg.sync_range(off, len) {
                return Err(shared.fail(LogError::io("msync", path, e)));
            }
        }
        let changed = {
            let mut st = shared.state.lock();
            st.syncs += u64::from(synced);
            std::mem::replace(&mut st.flushed, target) != target
        };
        shared
            .durable
            .note_log_flushed(target.log_id.map(|l| l.index));
        shared.waiters.complete_upto(target.phys_end);
        if let Some(d) = &self.drop_behind {
            d.after_flush(shared, target.phys_end);
        }
        // The checkpoint describes the fdatasync above, so it is advanced after it and made
        // durable right after (here, or by the checkpointer, once for every cycle that ran
        // meanwhile). A stale one would let recovery cut flushed, later corrupted bytes as a
        // torn tail instead of reporting them.
        if durable {
            if let Err(e) = self.checkpointer.persist_now() {
                return Err(shared.fail(e));
            }
        } else if changed {
            self.checkpointer.note_recorded();
        }
        tracing::trace!(phys_offset = target.phys_end, "flushed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writeback_step_backs_off_while_idle_and_returns_under_load() {
        let interval = Duration::from_millis(500);
        let mut step = WRITEBACK_STEP;
        let mut seen = Vec::new();
        for _ in 0..5 {
            step = next_step(step, false, interval);
            seen.push(step.as_millis());
        }
        assert_eq!(seen, [4, 8, 10, 10, 10], "doubles up to the quiet step");
        assert_eq!(next_step(step, true, interval), WRITEBACK_STEP);
        let short = Duration::from_millis(1);
        assert_eq!(next_step(WRITEBACK_STEP, true, short), short);
        assert_eq!(
            next_step(short, false, short),
            short,
            "never past the interval"
        );
    }
}
