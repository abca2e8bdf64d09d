//! [`open`] and the read handle [`Store`]: recovery at open, checkpoints, close, and the small
//! accessors the node uses. The read path proper lives in [`crate::read`], retention in
//! [`crate::retention`].

use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use parking_lot::RwLock;
use raftmq_raft_log::types::LogId;

use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueSet;
use crate::error::Result;
use crate::error::StoreError;
use crate::index::IndexStore;
use crate::index::KeyHashFn;
use crate::limits::StoreLimits;
use crate::mapped_file::sync_dir;
use crate::raft_types::LogStore;
use crate::sm::checkpoint::Checkpoint;
use crate::sm::state::DispatchState;
use crate::sm::StateMachine;
use crate::topic::TopicConfig;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Positions of the store, for metrics and status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreWatermarks {
    /// Last applied (= dispatched) log id.
    pub applied: Option<LogId>,
    /// Last applied log id covered by the durable dispatch checkpoint.
    pub checkpointed: Option<LogId>,
    /// Physical end of the last dispatched normal entry.
    pub dispatched_phys_end: PhysOffset,
    /// Smallest physical offset still stored (retention moves it up).
    pub min_phys_offset: PhysOffset,
    /// The log's own positions (appended, flushed, committed, purged).
    pub log: raftmq_raft_log::store::Watermarks,
}

/// State shared by the [`StateMachine`] (writer) and every [`Store`] handle (readers).
pub(crate) struct Shared {
    pub data_dir: PathBuf,
    pub config: StoreConfig,
    pub log: LogStore,
    pub state: RwLock<DispatchState>,
    /// Bumped after every applied batch; long-poll readers wait on it.
    pub applied_tx: tokio::sync::watch::Sender<u64>,
    /// CRC32 of CommitLog segment prefixes `(start, len)` already computed for snapshots.
    pub segment_crcs: Mutex<std::collections::HashMap<(PhysOffset, u64), u32>>,
    /// Serialises changes to `snapshots/` (new file, removal of the others) with the choice
    /// of the current snapshot. Lock order: `state` before this.
    pub snapshot_files: Mutex<()>,
    /// Test hook: a fixed disk usage ratio instead of statvfs.
    pub disk_usage_override: Mutex<Option<f64>>,
    /// Last statvfs answer of the send-path disk check, and when it was taken.
    pub disk_usage_cache: Mutex<Option<(std::time::Instant, f64)>>,
    /// Test hook: where snapshot install stops with an error, as a crash there would.
    pub install_stop: Mutex<Option<crate::snapshot::InstallStop>>,
    pub closed: AtomicBool,
}

/// Cheap clonable read handle used by the gRPC services.
#[derive(Clone)]
pub struct Store {
    pub(crate) shared: Arc<Shared>,
}

fn abort_path(data_dir: &Path) -> PathBuf {
    data_dir.join("abort")
}

/// Opens the state machine over an opened CommitLog (same data dir). Recovery happens here:
/// if the abort marker is present (unclean shutdown), ConsumeQueue and index units at or past
/// the recovered CommitLog end are cut; openraft then re-applies the committed entries after
/// the checkpoint's last applied id, which re-dispatch handles idempotently. A snapshot install
/// interrupted after its log swap is run again from its pending file (see `snapshot::intent`).
pub fn open(data_dir: &Path, config: StoreConfig, log: LogStore) -> Result<(Store, StateMachine)> {
    open_with_hasher(data_dir, config, log, crate::hash::key_hash)
}

/// [`open`] with a given key hash (tests force hash collisions with it).
#[doc(hidden)]
pub fn open_with_hasher(
    data_dir: &Path,
    config: StoreConfig,
    log: LogStore,
    hasher: KeyHashFn,
) -> Result<(Store, StateMachine)> {
    config.validate()?;
    std::fs::create_dir_all(data_dir).map_err(|e| StoreError::io("create dir", data_dir, e))?;
    let unclean = abort_path(data_dir).exists();
    crate::snapshot::remove_leftovers(data_dir)?;
    // An interrupted install swapped the log under the old checkpoint: it is finished below.
    let install_pending = crate::snapshot::intent_path(data_dir).exists();
    let state = recover_state(data_dir, &config, &log, hasher, unclean, install_pending)?;
    create_abort_marker(data_dir)?;
    tracing::info!(data_dir = %data_dir.display(), unclean, last_applied = ?state.last_applied,
        "store opened");
    let (applied_tx, _) = tokio::sync::watch::channel(0u64);
    let shared = Arc::new(Shared {
        data_dir: data_dir.to_owned(),
        config,
        log,
        state: RwLock::new(state),
        applied_tx,
        segment_crcs: Mutex::new(Default::default()),
        snapshot_files: Mutex::new(()),
        disk_usage_override: Mutex::new(None),
        disk_usage_cache: Mutex::new(None),
        install_stop: Mutex::new(None),
        closed: AtomicBool::new(false),
    });
    crate::snapshot::resume_install(&shared)?;
    Ok((
        Store {
            shared: shared.clone(),
        },
        StateMachine::new(shared),
    ))
}

/// Opens ConsumeQueues and index, loads the checkpoint and, after an unclean shutdown, cuts
/// units at or past the recovered CommitLog end. With `install_pending` the checkpoint may
/// describe the log an interrupted install replaced; the install is run again right after.
fn recover_state(
    data_dir: &Path,
    config: &StoreConfig,
    log: &LogStore,
    hasher: KeyHashFn,
    unclean: bool,
    install_pending: bool,
) -> Result<DispatchState> {
    let mut cqs =
        ConsumeQueueSet::open(&data_dir.join("consumequeue"), config.consume_queue.clone())?;
    let mut index =
        IndexStore::open_with_hasher(&data_dir.join("index"), config.index.clone(), hasher)?;
    let checkpoint = Checkpoint::load(data_dir)?;
    let w = log.watermarks();
    if unclean {
        let end = w.appended_phys_end;
        let cut_units = cqs.truncate_phys_beyond(end)?;
        let cut_keys = index.truncate_phys_beyond(end)?;
        tracing::warn!(
            phys_offset = end,
            cut_units,
            cut_keys,
            "unclean shutdown: units past the recovered commitlog end cut"
        );
    }
    if !install_pending && checkpoint.dispatched_phys_end > w.appended_phys_end {
        return Err(StoreError::corruption(
            crate::sm::checkpoint::checkpoint_path(data_dir)
                .display()
                .to_string(),
            0,
            format!(
                "checkpoint covers phys {} but the commitlog ends at {}",
                checkpoint.dispatched_phys_end, w.appended_phys_end
            ),
        ));
    }
    let mut state = DispatchState {
        cqs,
        index,
        topics: Default::default(),
        offsets: Default::default(),
        last_applied: None,
        membership: Default::default(),
        dispatched_phys_end: 0,
        since_checkpoint: 0,
        checkpoint_applied: None,
    };
    state.load_checkpoint(checkpoint);
    // Units dispatched after the checkpoint may exist (they will be replayed); the dispatched
    // end must cover them.
    let unit_end = state
        .cqs
        .iter()
        .filter_map(|q| q.last_unit())
        .map(|u| u.end_phys())
        .max();
    state.dispatched_phys_end = state.dispatched_phys_end.max(unit_end.unwrap_or(0));
    Ok(state)
}

fn create_abort_marker(data_dir: &Path) -> Result<()> {
    let p = abort_path(data_dir);
    std::fs::File::create(&p).map_err(|e| StoreError::io("create", &p, e))?;
    sync_dir(data_dir)
}

impl Shared {
    /// Writes the dispatch checkpoint: log flush, ConsumeQueue and index msync, then the
    /// checkpoint file. Caller holds the state write lock.
    pub fn checkpoint_locked(&self, st: &mut DispatchState) -> Result<()> {
        self.log.flush()?;
        st.flush()?;
        st.to_checkpoint().store(&self.data_dir)?;
        st.checkpoint_applied = st.last_applied;
        st.since_checkpoint = 0;
        Ok(())
    }

    /// Wakes long-poll readers.
    pub fn notify_applied(&self) {
        self.applied_tx.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Store {
    /// Writes the dispatch checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        let mut st = self.shared.state.write();
        self.shared.checkpoint_locked(&mut st)
    }

    /// Flushes ConsumeQueues and index, writes the checkpoint and removes the abort marker.
    /// Idempotent. The log itself is closed by its owner.
    pub fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.checkpoint()?;
        let p = abort_path(&self.shared.data_dir);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove", &p, e)),
        }
        sync_dir(&self.shared.data_dir)?;
        tracing::info!(data_dir = %self.shared.data_dir.display(), "store closed");
        Ok(())
    }

    /// A consumer group's committed offset on a queue.
    pub fn fetch_offset(&self, group: &str, topic: &str, queue_id: QueueId) -> Option<QueueOffset> {
        self.shared.state.read().offsets.get(group, topic, queue_id)
    }

    /// A topic's config.
    pub fn topic(&self, name: &str) -> Option<TopicConfig> {
        self.shared.state.read().topics.get(name).cloned()
    }

    /// All topics, by name.
    pub fn topics(&self) -> Vec<TopicConfig> {
        self.shared.state.read().topics.iter().cloned().collect()
    }

    /// `(min, max)` offsets of a queue (`(0, 0)` for a queue without messages yet).
    pub fn queue_offsets(&self, topic: &str, queue_id: QueueId) -> (QueueOffset, QueueOffset) {
        let st = self.shared.state.read();
        st.cqs
            .get(topic, queue_id)
            .map_or((0, 0), |q| (q.min_offset(), q.max_offset()))
    }

    /// Current positions.
    pub fn watermarks(&self) -> StoreWatermarks {
        let log = self.shared.log.watermarks();
        let st = self.shared.state.read();
        StoreWatermarks {
            applied: st.last_applied,
            checkpointed: st.checkpoint_applied,
            dispatched_phys_end: st.dispatched_phys_end,
            min_phys_offset: log.min_phys_offset,
            log,
        }
    }

    /// Message and topic limits the leader checks before proposing.
    pub fn limits(&self) -> &StoreLimits {
        &self.shared.config.limits
    }

    /// The configuration in use.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// The CommitLog this store reads from.
    pub fn log(&self) -> &LogStore {
        &self.shared.log
    }

    /// Checks the dispatch state invariants (tests, cluster checkers).
    pub fn validate(&self) -> Result<()> {
        self.shared.state.read().validate()
    }
}
