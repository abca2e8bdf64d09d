//! [`Checkpointer`]: the `raftlog-ckpt` thread, which makes the flush checkpoints of the
//! flusher's cycles durable (raft index fdatasync, sled insert and flush) off the flusher
//! thread, once for all the cycles that ran while it persisted or during [`MIN_INTERVAL`]
//! after: an index fdatasync + sled flush per cycle competed with the log's own fdatasyncs
//! (`cargo bench`, `sync`, 1 KiB, 1 appender: -45% per cycle, -30% every 10 ms, within noise
//! every 100 ms).
//!
//! Order: the flusher advances the in-memory checkpoint only after the fdatasync it describes,
//! and this thread writes it after fdatasyncing the raft index, so a durable checkpoint is
//! never ahead of the synced bytes or of the synced index records; it lags the last flush
//! cycle by at most [`MIN_INTERVAL`] plus one persist. An explicit `LogStore::flush` makes it
//! durable before returning, on its own thread, and takes over what this thread was due to
//! persist. A failed persist stops the log like a failed flush.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::error::LogError;
use crate::error::LogResult;
use crate::shared::join_thread;
use crate::shared::Shared;

/// Least time between two sled flushes of the checkpointer.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Flags {
    /// A checkpoint was recorded since the last sled flush started.
    dirty: bool,
    /// The thread is persisting what `dirty` announced.
    busy: bool,
    stop: bool,
}

/// The checkpoint persister and its thread.
pub struct Checkpointer {
    shared: Arc<Shared>,
    /// `raft-index/index` (named in errors).
    index_path: PathBuf,
    flags: Mutex<Flags>,
    cv: Condvar,
    /// Signalled when a persist of the thread ends (see [`Checkpointer::persist_now`]).
    idle: Condvar,
    /// Serializes [`Checkpointer::persist`] (the thread and explicit flushes).
    persisting: Mutex<()>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread.
    pub fn start(shared: Arc<Shared>, index_path: PathBuf) -> LogResult<Arc<Self>> {
        let c = Arc::new(Checkpointer {
            shared,
            index_path,
            flags: Mutex::default(),
            cv: Condvar::new(),
            idle: Condvar::new(),
            persisting: Mutex::new(()),
            thread: Mutex::new(None),
        });
        let c2 = c.clone();
        let t = std::thread::Builder::new()
            .name("raftlog-ckpt".into())
            .spawn(move || c2.run())
            .map_err(|e| LogError::io("spawn checkpointer", "", e))?;
        *c.thread.lock() = Some(t);
        Ok(c)
    }

    /// The flushed position advanced: make it durable soon. Wakes the thread only when nothing
    /// was recorded before: with `dirty` already set, the thread waits out [`MIN_INTERVAL`]
    /// (or is about to persist) and takes this one along; a wake-up per flush cycle only
    /// cost a context switch (one per message at 1 in flight).
    pub fn note_recorded(&self) {
        let was_dirty = std::mem::replace(&mut self.flags.lock().dirty, true);
        if !was_dirty {
            self.cv.notify_one();
        }
    }

    fn run(&self) {
        let mut last: Option<Instant> = None;
        loop {
            {
                let mut f = self.flags.lock();
                loop {
                    let due = last.map(|t| t + MIN_INTERVAL);
                    let now = Instant::now();
                    match due {
                        _ if f.stop && !f.dirty => return,
                        Some(due) if f.dirty && !f.stop && now < due => {
                            self.cv.wait_for(&mut f, due - now);
                        }
                        _ if f.dirty => break,
                        _ => self.cv.wait(&mut f),
                    }
                }
                f.dirty = false;
                f.busy = true;
            }
            last = Some(Instant::now());
            if self.shared.state.lock().failed.is_none() {
                if let Err(e) = self.persist() {
                    self.shared.fail(e);
                }
            }
            self.flags.lock().busy = false;
            self.idle.notify_all();
        }
    }

    /// Makes every checkpoint recorded so far durable on the caller's thread (an explicit
    /// flush): waits out a persist the thread is in, and takes over what the thread was
    /// told to persist, since this persist covers it. So no persist of the thread repeats
    /// that work after the caller returns (nor meets a fault a test injects next).
    pub fn persist_now(&self) -> LogResult<()> {
        {
            let mut f = self.flags.lock();
            while f.busy {
                self.idle.wait(&mut f);
            }
            f.dirty = false;
        }
        self.persist()
    }

    /// Makes the current checkpoint (`State::flushed`) durable: the raft index file is synced
    /// first (open trusts its records below a durable checkpoint, and the flusher writes them
    /// before it advances the checkpoint), then the checkpoint is written and the meta db
    /// flushed. Skipped if a truncation or install changed the checkpoint meanwhile (they
    /// write theirs durably themselves). Serialized, so the written checkpoints only grow.
    pub fn persist(&self) -> LogResult<()> {
        let _one = self.persisting.lock();
        let (cp, epoch, index) = {
            let st = self.shared.state.lock();
            (st.flushed, st.checkpoint_epoch, st.index.file())
        };
        index
            .sync()
            .map_err(|e| LogError::io("fsync raft index", &self.index_path, e))?;
        {
            let st = self.shared.state.lock();
            if st.checkpoint_epoch != epoch {
                return Ok(());
            }
            self.shared.meta.set_checkpoint(&cp, false)?;
        }
        self.shared.meta.flush()
    }

    /// Flushes what is recorded, then stops and joins the thread.
    pub fn stop(&self) {
        self.flags.lock().stop = true;
        self.cv.notify_all();
        join_thread(&self.thread, "checkpointer");
    }
}
