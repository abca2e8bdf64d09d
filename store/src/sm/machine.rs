//! [`StateMachine`]: openraft's `RaftStateMachine` over the [`DispatchState`].
//!
//! Guarantees: entries are applied in log order, each exactly once in effect (re-applying an
//! entry after a crash is a no-op that answers the same acks); `applied_state` reports the
//! last applied entry; the durable checkpoint lags it by about `checkpoint-every-entries`
//! entries (plus those applied while it is written in the background), and openraft
//! re-applies the committed entries after it on restart.

use std::io;
use std::sync::Arc;

use futures::Stream;
use futures::StreamExt;
use openraft::storage::EntryResponder;
use openraft::storage::RaftStateMachine;
use openraft::EntryPayload;
use openraft::OptionalSend;
use openraft::RaftSnapshotBuilder;
use raftmq_raft_log::types::LogEntry;

use crate::error::Result;
use crate::error::StoreError;
use crate::raft_types::ApplyResponse;
use crate::raft_types::StoredMembership;
use crate::raft_types::TypeConfig;
use crate::sm::dispatch::apply_normal;
use crate::snapshot::Snapshot;
use crate::snapshot::SnapshotFile;
use crate::snapshot::SnapshotMeta;
use crate::state::DispatchState;
use crate::state::Shared;
use crate::store::Store;
use crate::types::LogIndex;

/// The Raft node type.
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// The state machine half returned by [`crate::open`]; hand it to `openraft::Raft::new`.
pub struct StateMachine {
    pub(crate) shared: Arc<Shared>,
}

/// Builds snapshots (see [`crate::snapshot`]).
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl StateMachine {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        StateMachine { shared }
    }

    /// A read handle on the same store.
    pub fn store(&self) -> Store {
        Store::new(self.shared.clone())
    }

    /// Applies one entry (the core of `apply`; also used by tests and benches).
    pub fn apply_entry(&self, entry: &LogEntry) -> Result<ApplyResponse> {
        self.apply_entry_resuming(entry, &mut None)
    }

    /// [`StateMachine::apply_entry`] that can be called again after an error: `done` keeps
    /// the entry's response once it is applied, so a failed checkpoint is retried alone.
    fn apply_entry_resuming(
        &self,
        entry: &LogEntry,
        done: &mut Option<ApplyResponse>,
    ) -> Result<ApplyResponse> {
        if self.shared.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::invalid(format!(
                "apply of {} after Store::close",
                entry.log_id
            )));
        }
        let mut st = self.shared.state.write();
        let resp = match done.take() {
            Some(r) => r,
            None => apply_locked(&self.shared, &mut st, entry)?,
        };
        // A replay must never start before a topic deletion whose files are already gone (the
        // queue's next incarnation would be on disk): checkpoint right after each one.
        let deleted = matches!(resp, ApplyResponse::TopicDeleted(_));
        let checkpointed = if deleted {
            self.shared.checkpoint_locked(&mut st)
        } else {
            self.shared.checkpoint_in_background(&mut st)
        };
        if let Err(e) = checkpointed {
            *done = Some(resp);
            return Err(e);
        }
        Ok(resp)
    }
}

/// How long apply waits before it tries an entry again that found the disk full.
const DISK_FULL_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

impl StateMachine {
    /// [`StateMachine::apply_entry`], waiting while the disk is full: an ENOSPC in apply (a new
    /// ConsumeQueue or index file, the checkpoint) would otherwise be a storage error that
    /// stops the Raft core. Trying the entry again is a replay, which dispatch answers
    /// identically (see [`crate::sm::dispatch`]); a checkpoint that failed after the entry
    /// was applied is retried alone. Any other error is returned.
    async fn apply_waiting_for_space(&self, entry: &LogEntry) -> Result<ApplyResponse> {
        let (mut waited, mut done) = (0u32, None);
        loop {
            match self.apply_entry_resuming(entry, &mut done) {
                Err(e) if e.is_disk_full() => {
                    if waited == 0 {
                        tracing::error!(log_index = entry.log_id.index, error = %e,
                            "apply found the disk full; waiting for space (nothing lost)");
                    }
                    waited = waited.saturating_add(1);
                    tokio::time::sleep(DISK_FULL_RETRY).await;
                }
                Ok(resp) if waited > 0 => {
                    tracing::info!(
                        log_index = entry.log_id.index,
                        waited_ms = u64::from(waited) * DISK_FULL_RETRY.as_millis() as u64,
                        "apply goes on: disk space returned"
                    );
                    return Ok(resp);
                }
                other => return other,
            }
        }
    }
}

fn apply_locked(
    shared: &Shared,
    st: &mut DispatchState,
    entry: &LogEntry,
) -> Result<ApplyResponse> {
    let log_id = entry.log_id;
    if st.last_applied.is_some_and(|a| a.index >= log_id.index) {
        return Err(StoreError::invalid(format!(
            "apply of {log_id} after {:?}: entries must be applied in order",
            st.last_applied
        )));
    }
    let resp = match &entry.payload {
        EntryPayload::Blank => ApplyResponse::None,
        EntryPayload::Membership(m) => {
            st.membership = StoredMembership::new(Some(log_id), m.clone());
            ApplyResponse::None
        }
        EntryPayload::Normal(payload) => {
            let loc = shared
                .log
                .entry_location(LogIndex::of(&log_id))
                .ok_or_else(|| {
                    StoreError::invalid(format!("applied entry {log_id} is not in the commitlog"))
                })?;
            if loc.term != log_id.leader_id.term {
                return Err(StoreError::invalid(format!(
                    "applied entry {log_id} but the commitlog holds term {} at that index",
                    loc.term
                )));
            }
            apply_normal(st, &shared.log, log_id, loc.phys_offset(), &payload.0)?
        }
    };
    st.last_applied = Some(log_id);
    st.since_checkpoint += 1;
    Ok(resp)
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = SnapshotFile;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> std::result::Result<(Option<raftmq_raft_log::types::LogId>, StoredMembership), io::Error>
    {
        let st = self.shared.state.read();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> std::result::Result<(), io::Error>
    where
        Strm: Stream<Item = std::result::Result<EntryResponder<TypeConfig>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        let mut res = Ok(());
        while let Some(item) = entries.next().await {
            let (entry, responder) = match item {
                Ok(x) => x,
                Err(e) => {
                    res = Err(e);
                    break;
                }
            };
            // An `async` follower's committed id is written behind: nothing becomes visible
            // here before a crash can no longer take it back (see `wait_applicable`).
            let index = LogIndex::of(&entry.log_id);
            tracing::trace!(log_index = entry.log_id.index, "apply started");
            if let Err(e) = self.shared.log.wait_applicable(index).await {
                tracing::error!(log_index = entry.log_id.index, error = %e,
                    "apply stopped: the log cannot make the entry durable");
                res = Err(StoreError::from(e).into());
                break;
            }
            match self.apply_waiting_for_space(&entry).await {
                Ok(resp) => {
                    if let Some(r) = responder {
                        r.send(resp);
                    }
                }
                Err(e) => {
                    tracing::error!(log_index = entry.log_id.index, term = entry.log_id.leader_id.term,
                        error = %e, "apply failed");
                    res = Err(e.into());
                    break;
                }
            }
        }
        self.shared.notify_applied();
        if cfg!(debug_assertions) {
            if let Err(e) = self.shared.state.read().validate() {
                panic!("dispatch state invariant broken: {e}");
            }
        }
        res
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotFile,
    ) -> std::result::Result<(), io::Error> {
        // Copies the retained log: off the async worker threads.
        let (shared, meta) = (self.shared.clone(), meta.clone());
        tokio::task::spawn_blocking(move || {
            crate::snapshot::install(&shared, meta.last_log_id, snapshot)
        })
        .await
        .map_err(io::Error::other)??;
        self.shared.notify_applied();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> std::result::Result<Option<Snapshot>, io::Error> {
        Ok(crate::snapshot::current(&self.shared)?)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = SnapshotFile;

    async fn build_snapshot(&mut self) -> std::result::Result<Snapshot, io::Error> {
        // Copies the retained log: off the async worker threads.
        let shared = self.shared.clone();
        Ok(
            tokio::task::spawn_blocking(move || crate::snapshot::build(&shared))
                .await
                .map_err(io::Error::other)??,
        )
    }
}
