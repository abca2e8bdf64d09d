//! [`Shared`]: the narrow core every part of an open log holds: the guarded [`State`], the
//! `meta/` db, and the two channels that report progress or failure (the flush waiters and the
//! durable watch). The flusher and committer threads hold only this, never the whole log.
//! [`join_thread`] ends each of the log's threads the same way.

use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::cold_read::ColdReads;
use crate::durable::DurableWatch;
use crate::error::LogError;
use crate::flush_queue::FlushQueue;
use crate::meta::Meta;
use crate::state::State;

/// State, meta db, flush waiters and durable watch of one open log.
pub struct Shared {
    /// Mutable state; every change of the log happens under this lock.
    pub state: Mutex<State>,
    /// The `meta/` db.
    pub meta: Meta,
    /// Appends waiting for a flush.
    pub waiters: FlushQueue,
    /// What is durable, for acks.
    pub durable: DurableWatch,
    /// Chunks of the log's dropped pages, for readers that far behind.
    pub cold: ColdReads,
}

impl Shared {
    /// Marks the log stopped and fails every waiter; returns the error.
    pub fn fail(&self, e: LogError) -> LogError {
        let msg = e.to_string();
        tracing::error!(error = %msg, "log i/o failed; log stopped");
        self.state.lock().failed.get_or_insert(msg.clone());
        self.waiters.fail_all(&msg);
        self.durable.fail(&msg);
        e
    }
}

/// Joins one of the log's threads, once (a later call finds nothing to join). A panic in it is
/// logged, not raised again: stopping the log must finish.
pub fn join_thread(thread: &Mutex<Option<JoinHandle<()>>>, name: &str) {
    if let Some(t) = thread.lock().take() {
        if t.join().is_err() {
            tracing::error!("{name} thread panicked");
        }
    }
}
