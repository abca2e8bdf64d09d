//! [`DurableWatch`]: what of this node's log is durable, as acks waiting in
//! `LogStore::wait_durable` see it. The flusher reports the flushed entries, the committer the
//! durable committed id; a stopped log tells every waiter that nothing more becomes durable.

use tokio::sync::watch;

use crate::types::LogId;
use crate::types::RawIndex;

/// What is durable, as waiters see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// The newest committed id known durable.
    pub committed: Option<LogId>,
    /// Index of the last entry flushed in this node's own log (lowered when the log is cut,
    /// so entries appended again past the cut do not count as flushed).
    pub log_flushed: Option<RawIndex>,
    /// Set once the log stopped (I/O error, closed): nothing more becomes durable.
    pub stopped: Option<String>,
}

impl Durable {
    /// Whether entry `index` can no longer be forgotten by a crash of this node: it is
    /// flushed in this log, or a durable committed id covers it.
    pub fn covers(&self, index: RawIndex) -> bool {
        self.committed.is_some_and(|c| c.index >= index)
            || self.log_flushed.is_some_and(|f| f >= index)
    }

    /// `commit` when a crash can no longer forget it ([`Durable::covers`]), else the newest
    /// durable committed id (never past `commit`): how far this node may tell others.
    pub fn clamp(&self, commit: Option<LogId>) -> Option<LogId> {
        match commit {
            Some(c) if !self.covers(c.index) => self.committed.min(commit),
            _ => commit,
        }
    }
}

/// The watch channel of [`Durable`].
pub struct DurableWatch {
    tx: watch::Sender<Durable>,
}

impl DurableWatch {
    /// A watch whose durable committed id starts at `committed` (read from the meta db at open).
    pub fn new(committed: Option<LogId>) -> Self {
        let (tx, _) = watch::channel(Durable {
            committed,
            log_flushed: None,
            stopped: None,
        });
        Self { tx }
    }

    /// Watches what is durable.
    pub fn subscribe(&self) -> watch::Receiver<Durable> {
        self.tx.subscribe()
    }

    /// The newest committed id known durable.
    pub fn committed(&self) -> Option<LogId> {
        self.tx.borrow().committed
    }

    /// Index of the last entry flushed in this node's own log.
    pub fn log_flushed(&self) -> Option<RawIndex> {
        self.tx.borrow().log_flushed
    }

    /// See [`Durable::clamp`].
    pub fn clamp(&self, commit: Option<LogId>) -> Option<LogId> {
        self.tx.borrow().clamp(commit)
    }

    /// Records that `committed` is durable (the id never goes back).
    pub fn note_committed(&self, committed: Option<LogId>) {
        self.tx
            .send_modify(|d| d.committed = d.committed.max(committed));
    }

    /// Records that this node's log is flushed up to entry `index`.
    pub fn note_log_flushed(&self, index: Option<RawIndex>) {
        self.tx.send_if_modified(|d| {
            let newer = index > d.log_flushed;
            if newer {
                d.log_flushed = index;
            }
            newer
        });
    }

    /// The log was cut after entry `index` (truncation, snapshot install): entries past it
    /// that come later are not flushed yet, whatever the log held there before.
    pub fn note_log_cut(&self, index: Option<RawIndex>) {
        self.tx.send_if_modified(|d| {
            let lower = d.log_flushed > index;
            if lower {
                d.log_flushed = index;
            }
            lower
        });
    }

    /// Tells waiters nothing more becomes durable.
    pub fn fail(&self, msg: &str) {
        self.tx.send_modify(|d| {
            d.stopped.get_or_insert_with(|| msg.to_string());
        });
    }
}
