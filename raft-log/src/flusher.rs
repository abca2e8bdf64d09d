//! The flusher thread: group commit for `sync`, periodic flush for `async`.
//!
//! An append queues a [`FlushWaiter`] with the physical end of its bytes; one flush cycle
//! flushes the whole dirty range `[flushed end, append position)` once (fdatasync; msync with
//! mapped writes) and completes every waiter it covers, so under load many appends share one
//! flush. A failed flush stops the log: every waiter (and every later append) gets the error.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::store::Inner;
use crate::types::PhysOffset;

/// Completion callback of one append (an erased `IOFlushed`).
pub type FlushCallback = Box<dyn FnOnce(io::Result<()>) + Send>;

/// An append waiting for its bytes to be durable.
pub struct FlushWaiter {
    /// Physical end of the append.
    pub end: PhysOffset,
    /// Called once the bytes up to `end` are durable (or with the error).
    pub callback: FlushCallback,
}

#[derive(Default)]
struct Queue {
    /// Invariant: every waiter's `end` is above the flushed end when it is queued or the
    /// next cycle completes it.
    waiters: VecDeque<FlushWaiter>,
    wake: bool,
    stop: bool,
}

/// Control block shared by appenders and the flusher thread.
#[derive(Default)]
pub struct FlushCtl {
    queue: Mutex<Queue>,
    cv: Condvar,
    /// Serializes flush cycles with truncation.
    pub cycle: Mutex<()>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl FlushCtl {
    /// Queues a waiter and wakes the flusher.
    pub fn enqueue(&self, w: FlushWaiter) {
        self.queue.lock().waiters.push_back(w);
        self.cv.notify_one();
    }

    /// Asks for a flush cycle soon (segment roll under `async`).
    pub fn wake(&self) {
        self.queue.lock().wake = true;
        self.cv.notify_one();
    }

    /// Completes waiters covered by `flushed_end` with Ok.
    pub fn complete_upto(&self, flushed_end: PhysOffset) {
        let done: Vec<FlushWaiter> = {
            let mut q = self.queue.lock();
            let n = q
                .waiters
                .iter()
                .take_while(|w| w.end <= flushed_end)
                .count();
            q.waiters.drain(..n).collect()
        };
        for w in done {
            (w.callback)(Ok(()));
        }
    }

    /// Completes every waiter with an error carrying `msg`.
    pub fn fail_all(&self, msg: &str) {
        let done: Vec<FlushWaiter> = self.queue.lock().waiters.drain(..).collect();
        for w in done {
            (w.callback)(Err(io::Error::other(msg.to_string())));
        }
    }

    /// Starts the thread.
    pub fn start(inner: Arc<Inner>, interval: Option<Duration>) -> LogResult<()> {
        let ctl = inner.clone();
        let t = std::thread::Builder::new()
            .name("raftlog-flusher".into())
            .spawn(move || flusher_loop(&ctl, interval))
            .map_err(|e| LogError::io("spawn flusher", "", e))?;
        *inner.flush.thread.lock() = Some(t);
        Ok(())
    }

    /// Stops and joins the thread.
    pub fn stop(&self) {
        self.queue.lock().stop = true;
        self.cv.notify_all();
        if let Some(t) = self.thread.lock().take() {
            if t.join().is_err() {
                tracing::error!("flusher thread panicked");
            }
        }
    }
}

fn flusher_loop(inner: &Inner, interval: Option<Duration>) {
    let ctl = &inner.flush;
    loop {
        {
            let mut q = ctl.queue.lock();
            loop {
                if q.stop {
                    return;
                }
                if !q.waiters.is_empty() || q.wake {
                    q.wake = false;
                    break;
                }
                match interval {
                    Some(d) => {
                        if ctl.cv.wait_for(&mut q, d).timed_out() {
                            break;
                        }
                    }
                    None => ctl.cv.wait(&mut q),
                }
            }
        }
        if let Err(e) = inner.flush_once() {
            tracing::error!(error = %e, "flush failed: the log is stopped");
        }
    }
}

impl Inner {
    /// One flush cycle: msync the dirty range, advance the flushed watermark, complete the
    /// waiters it covers. Errors stop the log and fail every waiter.
    pub fn flush_once(&self) -> LogResult<()> {
        let _cycle = self.flush.cycle.lock();
        self.flush_locked()
    }

    /// [`Inner::flush_once`] with the cycle lock already held.
    pub fn flush_locked(&self) -> LogResult<()> {
        let (ranges, target, (index_file, index_write)) = {
            let mut st = self.state.lock();
            if let Some(msg) = &st.failed {
                let msg = msg.clone();
                drop(st);
                self.flush.fail_all(&msg);
                return Err(LogError::Stopped(msg));
            }
            let target = FlushCheckpoint {
                phys_end: st.append_pos,
                log_id: st.last_entry_id(),
            };
            (st.dirty_ranges(), target, st.index.take_pending())
        };
        // The raft index is a rebuildable cache: written here, off the append path, not synced.
        if let Err(e) = index_write.apply(index_file.as_ref()) {
            let path = self.dir.join("raft-index");
            return Err(self.fail(LogError::io("write raft index", path, e)));
        }
        for (seg, path, off, len) in ranges {
            if let Err(e) = seg.sync_range(off, len) {
                return Err(self.fail(LogError::io("msync", path, e)));
            }
        }
        let changed = {
            let mut st = self.state.lock();
            std::mem::replace(&mut st.flushed, target) != target
        };
        if changed {
            if let Err(e) = self.meta.set_checkpoint(&target, false) {
                return Err(self.fail(e));
            }
        }
        self.committer
            .note_log_flushed(target.log_id.map(|l| l.index));
        self.flush.complete_upto(target.phys_end);
        tracing::trace!(phys_offset = target.phys_end, "flushed");
        Ok(())
    }

    /// Marks the log stopped and fails every waiter; returns the error.
    pub fn fail(&self, e: LogError) -> LogError {
        let msg = e.to_string();
        tracing::error!(error = %msg, "log i/o failed; log stopped");
        self.state.lock().failed.get_or_insert(msg.clone());
        self.flush.fail_all(&msg);
        self.committer.fail(&msg);
        e
    }
}
