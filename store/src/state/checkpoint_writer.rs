//! [`CheckpointWriter`]: writes the periodic dispatch checkpoint on a thread of its own.
//!
//! A checkpoint is the whole replicated state (the dedup window alone is about 100 bytes per
//! remembered send in the file: 10 MB at the default 100,000; it was 190 as JSON). When apply
//! wrote it itself, serialising it, writing it into new page-cache pages and fsyncing it took
//! 150–200 ms of an apply that held the state lock, every `checkpoint-every-entries` entries: every send and every pull on the node
//! waited that long (`bench suite`'s batch-32 p99 was 90–140 ms). Now apply only flushes the
//! log, ConsumeQueues and index and clones the state under the lock (what the file may
//! vouch for is durable before the file exists, as before); this writer serialises and
//! writes it meanwhile.
//!
//! At most one write is under way. Every other checkpoint write (`Store::checkpoint`,
//! `close`, a topic deletion, a snapshot install) first waits for it ([`Self::settle`]), so
//! the files are written in the order their states were taken and the newest state is what
//! the file holds. `checkpoint_applied` (what retention may purge below) moves only when a
//! write is durable. A write that fails is logged and tried again after [`RETRY_AFTER`];
//! apply goes on meanwhile, replaying more on the next restart.

use std::path::Path;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Mutex;
use raftmq_raft_log::types::LogId;

use crate::error::Result;
use crate::error::StoreError;
use crate::state::checkpoint::Checkpoint;

/// How long after a failed write the next one may start.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A write under way: its thread (answering the `last_applied` it made durable).
struct Pending {
    thread: JoinHandle<Result<Option<LogId>>>,
}

/// The background checkpoint writer of one store (see the module docs).
#[derive(Default)]
pub struct CheckpointWriter {
    pending: Mutex<Option<Pending>>,
    /// No write starts before this (set when one failed).
    retry_at: Mutex<Option<Instant>>,
    /// Test hook: the next write waits until the sender sends or is dropped.
    hold: Mutex<Option<Receiver<()>>>,
}

impl CheckpointWriter {
    /// True when a write may start now: none is under way and no failed one is waiting out
    /// [`RETRY_AFTER`].
    pub fn may_start(&self) -> bool {
        self.pending.lock().is_none() && self.retry_at.lock().is_none_or(|t| Instant::now() >= t)
    }

    /// True when a write was started and has ended (its outcome not taken yet).
    pub fn ended(&self) -> bool {
        self.pending
            .lock()
            .as_ref()
            .is_some_and(|p| p.thread.is_finished())
    }

    /// Starts writing `cp` into `data_dir`. The caller flushed everything `cp` vouches for.
    pub fn start(&self, data_dir: &Path, cp: Checkpoint) -> Result<()> {
        let mut pending = self.pending.lock();
        debug_assert!(pending.is_none(), "a checkpoint write is under way");
        let dir: PathBuf = data_dir.to_owned();
        let hold = self.hold.lock().take();
        let thread = std::thread::Builder::new()
            .name("raftmq-checkpoint".into())
            .spawn(move || {
                if let Some(rx) = hold {
                    let _ = rx.recv();
                }
                let started = Instant::now();
                cp.store(&dir)?;
                tracing::debug!(last_applied = ?cp.last_applied,
                    took_ms = started.elapsed().as_millis() as u64,
                    "dispatch checkpoint written in the background");
                Ok(cp.last_applied)
            })
            .map_err(|e| StoreError::io("spawn checkpoint writer for", data_dir, e))?;
        *pending = Some(Pending { thread });
        Ok(())
    }

    /// The outcome of the write under way once it ended: at once, or (`wait`) after waiting
    /// for it. None when none is under way, or (not `wait`) it has not ended yet. A failed
    /// write is logged here and delays the next start by [`RETRY_AFTER`].
    pub fn settle(&self, wait: bool) -> Option<Result<Option<LogId>>> {
        let mut pending = self.pending.lock();
        if !wait && !pending.as_ref()?.thread.is_finished() {
            return None;
        }
        let p = pending.take()?;
        drop(pending);
        let outcome = p
            .thread
            .join()
            .unwrap_or_else(|_| Err(StoreError::invalid("the checkpoint writer thread panicked")));
        match &outcome {
            Ok(_) => *self.retry_at.lock() = None,
            Err(e) => {
                tracing::error!(error = %e, retry_after_ms = RETRY_AFTER.as_millis() as u64,
                    "background dispatch checkpoint failed; the previous one stays (nothing lost)");
                *self.retry_at.lock() = Some(Instant::now() + RETRY_AFTER);
            }
        }
        Some(outcome)
    }

    /// Test hook: the next write started waits until the returned sender sends or is dropped.
    pub fn hold_next(&self) -> Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        *self.hold.lock() = Some(rx);
        tx
    }
}

impl Drop for CheckpointWriter {
    /// A store dropped without `close` (a crash in tests) still ends its write first, so no
    /// thread writes into a directory that is reopened or removed meanwhile.
    fn drop(&mut self) {
        let _ = self.settle(true);
    }
}
