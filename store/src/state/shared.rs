//! [`Shared`]: the one state behind the [`StateMachine`](crate::StateMachine) (writer) and
//! every [`Store`](crate::Store) handle (readers), passed as `&Shared` to the parts that read
//! or change it (read path, retention, snapshots).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use parking_lot::Mutex;
use parking_lot::RwLock;

use crate::config::StoreConfig;
use crate::error::Result;
use crate::raft_types::LogStore;
use crate::state::checkpoint_writer::CheckpointWriter;
use crate::state::dispatch_state::DispatchState;
use crate::types::PhysOffset;

/// State shared by the state machine and the read handles.
pub(crate) struct Shared {
    /// The node's data dir (layout in `paths.rs`).
    pub data_dir: PathBuf,
    /// The validated store config.
    pub config: StoreConfig,
    /// The CommitLog (= Raft log) the store reads records from.
    pub log: LogStore,
    /// Everything apply changes. Lock order: before `snapshot_files`.
    pub state: RwLock<DispatchState>,
    /// Bumped after every applied batch; long-poll readers wait on it.
    pub applied_tx: tokio::sync::watch::Sender<u64>,
    /// CRC32 of CommitLog segment prefixes `(start, len)` already computed for snapshots.
    pub segment_crcs: Mutex<HashMap<(PhysOffset, u64), u32>>,
    /// Serialises changes to `snapshots/` (new file, removal of the others) with the choice
    /// of the current snapshot. Lock order: `state` before this.
    pub snapshot_files: Mutex<()>,
    /// Test hook: a fixed disk usage ratio instead of statvfs.
    pub disk_usage_override: Mutex<Option<f64>>,
    /// Last statvfs answer of the send-path disk check, and when it was taken.
    pub disk_usage_cache: Mutex<Option<(Instant, f64)>>,
    /// Test hook: where snapshot install stops with an error, as a crash there would.
    pub install_stop: Mutex<Option<InstallStop>>,
    /// Set by `Store::close`. Invariant: once set, nothing is applied any more.
    pub closed: AtomicBool,
    /// Writes the periodic checkpoints off the apply path.
    pub checkpoints: CheckpointWriter,
}

/// Test hook: the step after which snapshot install stops with an error, as a crash there
/// would (the test then drops the store without closing it and opens it again).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallStop {
    /// The pending file and the install intent are durable; the log is not swapped yet.
    AfterIntent,
    /// The log is swapped; the ConsumeQueues and the checkpoint are the old ones.
    AfterLogSwap,
    /// The checkpoint is written; the snapshot is not published, the intent not removed.
    AfterCheckpoint,
}

impl Shared {
    /// A store opened over `log` with the recovered `state`.
    pub fn new(
        data_dir: PathBuf,
        config: StoreConfig,
        log: LogStore,
        state: DispatchState,
    ) -> Self {
        let (applied_tx, _) = tokio::sync::watch::channel(0u64);
        Shared {
            data_dir,
            config,
            log,
            state: RwLock::new(state),
            applied_tx,
            segment_crcs: Mutex::new(HashMap::new()),
            snapshot_files: Mutex::new(()),
            disk_usage_override: Mutex::new(None),
            disk_usage_cache: Mutex::new(None),
            install_stop: Mutex::new(None),
            closed: AtomicBool::new(false),
            checkpoints: CheckpointWriter::default(),
        }
    }

    /// Writes the dispatch checkpoint: log flush, ConsumeQueue and index msync, then the
    /// checkpoint file, after the background write under way (if any) ended. Caller holds
    /// the state write lock.
    pub fn checkpoint_locked(&self, st: &mut DispatchState) -> Result<()> {
        self.settle_checkpoint(st, true);
        self.log.flush()?;
        st.flush()?;
        st.to_checkpoint().store(&self.data_dir)?;
        st.checkpoint_applied = st.last_applied;
        st.since_checkpoint = 0;
        Ok(())
    }

    /// Apply's periodic checkpoint, after each entry: takes the outcome of a background
    /// write that ended; once `checkpoint-every-entries` entries were applied since the last
    /// one and none is under way, flushes the log, ConsumeQueues and index, and starts
    /// writing the state as of now in the background ([`CheckpointWriter`]). Caller holds the
    /// state write lock.
    pub fn checkpoint_in_background(&self, st: &mut DispatchState) -> Result<()> {
        self.settle_checkpoint(st, false);
        if st.since_checkpoint < self.config.checkpoint_every_entries
            || !self.checkpoints.may_start()
        {
            return Ok(());
        }
        self.log.flush()?;
        st.flush()?;
        self.checkpoints.start(&self.data_dir, st.to_checkpoint())?;
        st.since_checkpoint = 0;
        Ok(())
    }

    /// Takes the outcome of the background checkpoint write, if it ended (or, `wait`, once
    /// it ends): a durable one moves `checkpoint_applied`; a failed one makes the next
    /// entry due again (the writer delays it).
    pub fn settle_checkpoint(&self, st: &mut DispatchState, wait: bool) {
        match self.checkpoints.settle(wait) {
            None => {}
            Some(Ok(applied)) => st.checkpoint_applied = applied,
            Some(Err(_)) => {
                st.since_checkpoint = st
                    .since_checkpoint
                    .max(self.config.checkpoint_every_entries);
            }
        }
    }

    /// [`Self::settle_checkpoint`] of a background write that ended, for readers of
    /// `checkpoint_applied` on a node that applies nothing meanwhile.
    pub fn settle_ended_checkpoint(&self) {
        if self.checkpoints.ended() {
            self.settle_checkpoint(&mut self.state.write(), false);
        }
    }

    /// Wakes long-poll readers.
    pub fn notify_applied(&self) {
        self.applied_tx.send_modify(|n| *n = n.wrapping_add(1));
    }
}
