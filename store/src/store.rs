//! [`Store`]: the cheap clonable read handle the node's services use, with every one of its
//! methods: checkpoint and close, topics, consumer offsets and watermarks, the read path
//! (implemented in [`crate::read`]), the pop state's read side (`receive_read`), retention and the disk guard ([`crate::retention`]), and
//! the snapshot receiver ([`crate::snapshot`]). [`crate::open`] makes it.

use crate::users::User;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use raftmq_raft_log::types::LogId;

use crate::config::StoreConfig;
use crate::error::Result;
use crate::error::StoreError;
use crate::limits::StoreLimits;
use crate::mapped_file::sync_dir;
use crate::paths::abort_path;
use crate::paths::incoming_dir;
use crate::paths::snapshots_dir;
use crate::raft_types::LogStore;
use crate::read;
use crate::read::KeyQueryResult;
use crate::read::PullRequest;
use crate::read::PullResult;
use crate::read::StoredMessage;
use crate::receive::QueueReceive;
use crate::receive_read;
use crate::retention;
use crate::retention::RetentionPlan;
use crate::snapshot::SnapshotReceiver;
use crate::state::InstallStop;
use crate::state::Shared;
use crate::topic::TopicConfig;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;

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

/// Cheap clonable read handle used by the gRPC services.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

impl Store {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Store { shared }
    }

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

    /// Refuses state for one more consumer group past `max-groups` (a
    /// [`StoreError::LimitReached`]); a group that has offsets or pop state passes.
    pub fn check_new_group(&self, group: &str) -> Result<()> {
        let st = self.shared.state.read();
        if st.offsets.has_group(group) || st.receive.has_group(group) {
            return Ok(());
        }
        let max = self.shared.config.limits.max_groups;
        let mut names: Vec<&str> = st.offsets.groups().collect();
        names.extend(st.receive.groups());
        names.sort_unstable();
        names.dedup();
        if names.len() >= max as usize {
            return Err(StoreError::LimitReached {
                what: format!("{} consumer groups have state", names.len()),
                setting: "max-groups",
                max: u64::from(max),
            });
        }
        Ok(())
    }

    /// How many topics exist.
    pub fn topic_count(&self) -> usize {
        self.shared.state.read().topics.len()
    }

    /// The user holding `access_key` (its secret still sealed).
    pub fn user_by_access_key(&self, access_key: &str) -> Option<User> {
        self.shared
            .state
            .read()
            .users
            .by_access_key(access_key)
            .cloned()
    }

    /// All users, by name (secrets sealed).
    pub fn users(&self) -> Vec<User> {
        self.shared.state.read().users.iter().cloned().collect()
    }

    /// All topics, by name.
    pub fn topics(&self) -> Vec<TopicConfig> {
        self.shared.state.read().topics.iter().cloned().collect()
    }

    /// `(min, max)` offsets of a queue (`(0, 0)` for a queue without messages yet).
    pub fn queue_offsets(&self, topic: &str, queue_id: QueueId) -> (QueueOffset, QueueOffset) {
        read::queue_offsets(&self.shared, topic, queue_id)
    }

    /// Current positions.
    pub fn watermarks(&self) -> StoreWatermarks {
        self.shared.settle_ended_checkpoint();
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

    /// Pulls from a queue (see [`PullRequest`], [`PullStatus`](crate::PullStatus)).
    pub fn pull(&self, req: &PullRequest) -> Result<PullResult> {
        read::pull(&self.shared, req)
    }

    /// Long poll: true as soon as the queue's max offset exceeds `offset`, false on timeout.
    pub async fn wait_for_messages(
        &self,
        topic: &str,
        queue_id: QueueId,
        offset: QueueOffset,
        timeout: Duration,
    ) -> bool {
        read::wait_for_messages(&self.shared, topic, queue_id, offset, timeout).await
    }

    /// Wakes whenever entries were applied (new messages dispatched, pop state changed): the
    /// notification long polls wait on.
    pub fn subscribe_applied(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.applied_tx.subscribe()
    }

    /// A copy of the dedup window of idempotent sends (tests and tools; it may be large).
    pub fn dedup_window(&self) -> crate::dedup::DedupWindow {
        self.shared.state.read().dedup.clone()
    }

    /// Number of sends the dedup window remembers.
    pub fn dedup_window_len(&self) -> usize {
        self.shared.state.read().dedup.len()
    }

    /// A consumer group's pop state on a queue (None: it never received from it).
    pub fn receive_state(
        &self,
        group: &str,
        topic: &str,
        queue_id: QueueId,
    ) -> Option<QueueReceive> {
        receive_read::receive_state(&self.shared, group, topic, queue_id)
    }

    /// Cheap leader-side check before proposing a `Receive`: true if it would hand out a
    /// message now (an expired in-flight one, or a dispatched message at or after the
    /// group's `next` matching `filter` and due (a delayed message only from its delivery
    /// time) while the in-flight bound has room). A bad tag expression is `InvalidArgument`;
    /// an unknown topic or queue answers false. With `fifo` (a FIFO group, as the `Receive`
    /// would be stamped) a queue with a delivered message in flight answers true only once a
    /// delivered one's deadline passed.
    pub fn has_deliverable(
        &self,
        group: &str,
        topic: &str,
        queue_id: QueueId,
        filter: &str,
        now_ms: TimestampMs,
        fifo: bool,
    ) -> Result<bool> {
        receive_read::has_deliverable(&self.shared, group, topic, queue_id, filter, now_ms, fifo)
    }

    /// The message with id `msg_id` (its physical offset), CRC-checked. Only dispatched
    /// messages are found.
    pub fn get_by_id(&self, msg_id: PhysOffset) -> Result<StoredMessage> {
        read::get_by_id(&self.shared, msg_id)
    }

    /// Messages of `topic` with key `key` stored in `[begin_ms, end_ms]`, newest first, at
    /// most `max`, with no byte budget (see [`query_by_key_within`](Self::query_by_key_within)).
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        begin_ms: u64,
        end_ms: u64,
        max: usize,
    ) -> Result<Vec<StoredMessage>> {
        let r = read::query_by_key(&self.shared, topic, key, (begin_ms, end_ms), max, u64::MAX);
        Ok(r?.messages)
    }

    /// Messages of `topic` with key `key` stored in `[begin_ms, end_ms]`, newest first, at
    /// most `max` and at most `max_bytes` of records (the first always fits; `truncated`
    /// says a further match did not). Index candidates are checked against the record (hash
    /// collisions and other topics are filtered out).
    pub fn query_by_key_within(
        &self,
        topic: &str,
        key: &str,
        (begin_ms, end_ms): (u64, u64),
        max: usize,
        max_bytes: u64,
    ) -> Result<KeyQueryResult> {
        read::query_by_key(&self.shared, topic, key, (begin_ms, end_ms), max, max_bytes)
    }

    /// Disk usage of the data dir's file system, 0..1 (statvfs), computed as `df` shows it.
    pub fn disk_usage(&self) -> Result<f64> {
        retention::disk_usage(&self.shared)
    }

    /// Test hook: pretend the disk usage is `usage` (None: use statvfs again).
    #[doc(hidden)]
    pub fn set_disk_usage_override(&self, usage: Option<f64>) {
        retention::set_disk_usage_override(&self.shared, usage)
    }

    /// `DiskFull` once disk usage passes `disk-reject-ratio`: the leader refuses sends before
    /// the log hits an I/O error (which would stop the Raft core).
    ///
    /// Called on every send, so the statvfs answer is reused for
    /// [`DISK_CHECK_TTL`](retention::DISK_CHECK_TTL): at the reject ratio's margin (10% of the
    /// disk by default) a send burst that long cannot fill it.
    pub fn check_disk(&self) -> Result<()> {
        retention::check_disk(&self.shared)
    }

    /// What retention would delete at `now_ms` (see [`crate::retention`]), or None.
    pub fn retention_plan(&self, now_ms: TimestampMs) -> Result<Option<RetentionPlan>> {
        retention::retention_plan(&self.shared, now_ms)
    }

    /// [`Store::retention_plan`] limited to what a stored snapshot up to `covered` already
    /// covers: the purge point is at most `covered`, so the pass needs no new snapshot (the
    /// order retention takes on a full disk).
    pub fn retention_plan_covered(
        &self,
        now_ms: TimestampMs,
        covered: crate::types::LogIndex,
    ) -> Result<Option<RetentionPlan>> {
        retention::retention_plan_upto(&self.shared, now_ms, Some(covered))
    }

    /// Makes the disk reserve whole (see [`crate::disk_reserve`]); the bytes it holds (0: the
    /// disk had no room, logged).
    pub fn ensure_disk_reserve(&self) -> Result<u64> {
        crate::disk_reserve::ensure(&self.shared)
    }

    /// Deletes the disk reserve before retention writes (see [`crate::disk_reserve`]); the
    /// bytes freed.
    pub fn release_disk_reserve(&self) -> Result<u64> {
        crate::disk_reserve::release(&self.shared)
    }

    /// Bytes the disk reserve holds now (0: none).
    pub fn disk_reserve_bytes(&self) -> u64 {
        crate::disk_reserve::reserved_bytes(&self.shared)
    }

    /// Deletes what `plan` names: CommitLog segments (the log must be purged up to
    /// `plan.purge_upto` first), then ConsumeQueue and index units below the new minimum.
    pub fn apply_retention(&self, plan: &RetentionPlan) -> Result<()> {
        retention::apply_retention(&self.shared, plan)
    }

    /// Test hook: make snapshot install stop with an error at `at` (see [`InstallStop`]).
    #[doc(hidden)]
    pub fn set_install_stop(&self, at: Option<InstallStop>) {
        *self.shared.install_stop.lock() = at;
    }

    /// Test hook: the next background checkpoint write waits until the returned sender sends
    /// or is dropped.
    #[doc(hidden)]
    pub fn hold_next_checkpoint(&self) -> std::sync::mpsc::Sender<()> {
        self.shared.checkpoints.hold_next()
    }

    /// A receiver for snapshots sent by the leader (the node's transport sink delegates to
    /// it), writing under `<data_dir>/snapshots/incoming`.
    pub fn snapshot_receiver(&self, max_snapshot_bytes: u64) -> SnapshotReceiver {
        SnapshotReceiver::new(
            incoming_dir(&snapshots_dir(&self.shared.data_dir)),
            max_snapshot_bytes,
            self.shared.log.config().segment_bytes,
        )
    }
}
