//! [`FlushQueue`]: the appends waiting for their bytes to be durable, and the wake-ups of the
//! flusher thread that completes them.
//!
//! An append queues a [`FlushWaiter`] with the physical end of its bytes; a flush cycle
//! completes every waiter its flush covers ([`FlushQueue::complete_upto`]), so under load many
//! appends share one flush. A stopped log fails every waiter ([`FlushQueue::fail_all`]).

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::types::RawPhys;

/// Completion callback of one append (an erased `IOFlushed`).
pub type FlushCallback = Box<dyn FnOnce(io::Result<()>) + Send>;

/// An append waiting for its bytes to be durable.
pub struct FlushWaiter {
    /// Physical end of the append.
    pub end: RawPhys,
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

/// Why [`FlushQueue::wait_for_work`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// An append waits for a flush, or a cycle was asked for ([`FlushQueue::wake`]).
    Asked,
    /// The timeout passed with nothing asked.
    TimedOut,
    /// The queue was stopped: the flusher thread ends.
    Stop,
}

/// The waiters and the flusher's wake-up flags, shared by appenders and the flusher thread.
#[derive(Default)]
pub struct FlushQueue {
    queue: Mutex<Queue>,
    cv: Condvar,
}

impl FlushQueue {
    /// Queues a waiter and wakes the flusher.
    pub fn enqueue(&self, w: FlushWaiter) {
        self.queue.lock().waiters.push_back(w);
        self.cv.notify_one();
    }

    /// Queues a waiter without waking the flusher: the caller runs the cycle covering it
    /// itself, under the cycle lock it holds ([`crate::inline_flush`]).
    pub fn enqueue_quietly(&self, w: FlushWaiter) {
        self.queue.lock().waiters.push_back(w);
    }

    /// Asks for a flush cycle soon (segment roll under `async`).
    pub fn wake(&self) {
        self.queue.lock().wake = true;
        self.cv.notify_one();
    }

    /// Tells the flusher thread to stop ([`FlushQueue::wait_for_work`] answers [`Wake::Stop`]).
    pub fn stop(&self) {
        self.queue.lock().stop = true;
        self.cv.notify_all();
    }

    /// Blocks the flusher thread until a cycle is asked for (a waiter is queued or a wake-up
    /// was asked for: [`Wake::Asked`]), `timeout` passes ([`Wake::TimedOut`]) or the queue
    /// is stopped ([`Wake::Stop`]). `None`: no timeout.
    pub fn wait_for_work(&self, timeout: Option<Duration>) -> Wake {
        let mut q = self.queue.lock();
        loop {
            if q.stop {
                return Wake::Stop;
            }
            if !q.waiters.is_empty() || q.wake {
                q.wake = false;
                return Wake::Asked;
            }
            match timeout {
                Some(d) => {
                    if self.cv.wait_for(&mut q, d).timed_out() {
                        return Wake::TimedOut;
                    }
                }
                None => self.cv.wait(&mut q),
            }
        }
    }

    /// Completes waiters covered by `flushed_end` with Ok.
    pub fn complete_upto(&self, flushed_end: RawPhys) {
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
}
