//! The committed-id persister thread.
//!
//! openraft awaits `save_committed` inside its core loop, before it applies the entries: a
//! sled flush there stalls every other Raft step (appends, replication, votes) for one fsync
//! per commit advance. On a `sync` node, [`LogStore::save_committed_deferred`] instead
//! records the id in memory, hands it to this thread and returns; the thread makes the newest
//! id durable (sled flush), coalescing the ids that arrive while a flush runs. An `async` node
//! keeps the durable-before-return `save_committed` (see there why).
//!
//! What durability of the committed id protects is kept by a different rule: **a write is
//! acknowledged to a client only once this node cannot forget it in a crash**
//! ([`LogStore::wait_durable`]): either the entry is flushed in its own log (always so on a
//! `sync` node, which counts itself toward a commit only after its flush), or a committed id
//! covering it is durable, so the lost-commit floor a crashed `async` node computes still
//! covers every write it acknowledged. Entries may be applied (and served) before that: they
//! are committed by a quorum either way.
//!
//! Nobody waits for the committed id on a `sync` node (its log flush covers every ack), so
//! the thread writes it at most every [`MIN_INTERVAL`] unless an ack waits for it (then at
//! once): a fsync per commit advance competed with the log's own fsyncs. A `sync` node never
//! needs the floor for safety: what it lost in a crash is its own unflushed tail, which a
//! quorum of durable peers holds.
//!
//! The lost-commit floor is cleared here too, only once a committed id at or past it is
//! durable. An I/O error stops the log like a failed flush.
//!
//! [`LogStore::save_committed_deferred`]: crate::store::LogStore::save_committed_deferred
//! [`LogStore::wait_durable`]: crate::store::LogStore::wait_durable

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Condvar;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::error::LogError;
use crate::error::LogResult;
use crate::store::Inner;
use crate::types::LogId;

/// Least time between two writes of the committed id nobody waits for.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// What is durable, as waiters see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// The newest committed id known durable.
    pub committed: Option<LogId>,
    /// Index of the last entry flushed in this node's own log.
    pub log_flushed: Option<u64>,
    /// Set once the log stopped (I/O error, closed): nothing more becomes durable.
    pub stopped: Option<String>,
}

#[derive(Default)]
struct Queue {
    /// The newest id not yet handed to a flush.
    pending: Option<Option<LogId>>,
    stop: bool,
    /// On stop: write `pending` first (a clean close) or drop it (a simulated crash).
    flush_on_stop: bool,
}

/// Control block shared by `save_committed_deferred` and the thread.
pub struct Committer {
    queue: Mutex<Queue>,
    cv: Condvar,
    durable: watch::Sender<Durable>,
    /// Serializes writes of the committed id (the thread and `save_committed`), so the stored
    /// id never goes back.
    write: Mutex<()>,
    /// Acks waiting for a committed id to be durable.
    waiting: AtomicUsize,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Committer {
    /// A committer whose durable id starts at `committed` (read from the meta db at open).
    pub fn new(committed: Option<LogId>) -> Self {
        let (durable, _) = watch::channel(Durable {
            committed,
            log_flushed: None,
            stopped: None,
        });
        Self {
            queue: Mutex::default(),
            cv: Condvar::new(),
            durable,
            write: Mutex::new(()),
            waiting: AtomicUsize::new(0),
            thread: Mutex::new(None),
        }
    }

    /// Hands `committed` to the thread.
    pub fn submit(&self, committed: Option<LogId>) {
        self.queue.lock().pending = Some(committed);
        self.cv.notify_one();
    }

    /// Watches what is durable.
    pub fn subscribe(&self) -> watch::Receiver<Durable> {
        self.durable.subscribe()
    }

    /// Registers an ack waiting for the committed id (the thread then writes at once) until
    /// the guard drops.
    pub fn demand(&self) -> Demand<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        self.cv.notify_one();
        Demand(self)
    }

    /// The newest committed id known durable.
    pub fn durable(&self) -> Option<LogId> {
        self.durable.borrow().committed
    }

    /// Starts the thread.
    pub fn start(inner: Arc<Inner>) -> LogResult<()> {
        let ctl = inner.clone();
        let t = std::thread::Builder::new()
            .name("raftlog-commit".into())
            .spawn(move || committer_loop(&ctl))
            .map_err(|e| LogError::io("spawn committer", "", e))?;
        *inner.committer.thread.lock() = Some(t);
        Ok(())
    }

    /// Stops and joins the thread; `flush` writes the last id first (else it is dropped, as a
    /// crash would). Waiters then see the log stopped.
    pub fn stop(&self, flush: bool) {
        {
            let mut q = self.queue.lock();
            q.stop = true;
            q.flush_on_stop = flush;
        }
        self.cv.notify_all();
        if let Some(t) = self.thread.lock().take() {
            if t.join().is_err() {
                tracing::error!("committer thread panicked");
            }
        }
        self.fail("log closed");
    }

    /// Records that this node's log is flushed up to entry `index`.
    pub fn note_log_flushed(&self, index: Option<u64>) {
        self.durable.send_if_modified(|d| {
            let newer = index > d.log_flushed;
            if newer {
                d.log_flushed = index;
            }
            newer
        });
    }

    /// Tells waiters nothing more becomes durable.
    pub fn fail(&self, msg: &str) {
        self.durable.send_modify(|d| {
            d.stopped.get_or_insert_with(|| msg.to_string());
        });
    }
}

/// An ack waiting for the committed id (see [`Committer::demand`]).
pub struct Demand<'a>(&'a Committer);

impl Drop for Demand<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

fn committer_loop(inner: &Inner) {
    let ctl = &inner.committer;
    let mut last_write: Option<Instant> = None;
    loop {
        let (next, last) = {
            let mut q = ctl.queue.lock();
            loop {
                if q.stop {
                    break (q.pending.take().filter(|_| q.flush_on_stop), true);
                }
                if q.pending.is_some() {
                    let due = last_write.map(|t| t + MIN_INTERVAL);
                    let now = Instant::now();
                    match due {
                        Some(due) if now < due && ctl.waiting.load(Ordering::Acquire) == 0 => {
                            ctl.cv.wait_for(&mut q, due - now);
                            continue;
                        }
                        _ => break (q.pending.take(), false),
                    }
                }
                ctl.cv.wait(&mut q);
            }
        };
        last_write = Some(Instant::now());
        if let Some(c) = next {
            if let Err(e) = inner.persist_committed(c) {
                // Stops the log and tells the waiters.
                inner.fail(e);
                return;
            }
        }
        if last {
            return;
        }
    }
}

impl Inner {
    /// Makes `committed` durable, then clears the lost-commit floor if it reached it.
    pub(crate) fn persist_committed(&self, committed: Option<LogId>) -> LogResult<()> {
        let _write = self.committer.write.lock();
        if self.state.lock().failed.is_some() || self.committer.durable() >= committed {
            return Ok(());
        }
        self.meta.set_committed(&committed)?;
        self.committer
            .durable
            .send_modify(|d| d.committed = d.committed.max(committed));
        let floor = self.state.lock().lost_commit_floor;
        if let (Some(f), Some(c)) = (floor, committed) {
            if c.index >= f.index {
                self.meta.set_lost_commit_floor(&None)?;
                self.state.lock().lost_commit_floor = None;
                tracing::info!(lost_commit_floor = %f, committed = %c, "caught up past the committed entries lost in the crash; voting as usual again");
            }
        }
        Ok(())
    }
}
