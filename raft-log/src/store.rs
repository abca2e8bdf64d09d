//! [`LogStore`]: the open log as a shared handle. A thin adapter: open has [`Inner`] wire the
//! parts together (`inner.rs`), every other method delegates to one of them (the [`Writer`] appends, the
//! [`Trimmer`] truncates, purges and detaches segments, the [`Committer`] saves the committed
//! id, `install.rs` swaps in a snapshot's segments, reads go through the [`State`] lookups;
//! retention's, the install's and the pins' entry points are in `store_files.rs`);
//! `storage_impl.rs` maps openraft's storage traits onto these methods.
//!
//! [`State`]: crate::state::State
//! [`Writer`]: crate::writer::Writer
//! [`Trimmer`]: crate::trim::Trimmer
//! [`Committer`]: crate::committer::Committer

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::committer::Urgency;
use crate::config::FlushPolicy;
use crate::config::LogConfig;
use crate::entry_read::read_entry;
use crate::entry_read::LocatedRange;
use crate::env::Env;
use crate::env::FsEnv;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flush_queue::FlushCallback;
use crate::inner::Inner;
use crate::raft_index::EntryLocation;
use crate::stage_file::STAGE_FILE;
use crate::types::LogEntry;
use crate::types::LogId;
use crate::types::LogIndex;
use crate::types::NodeId;
use crate::types::PhysOffset;
use crate::types::Vote;
use crate::writer::FlushBy;

pub use crate::watermarks::Watermarks;

#[path = "store_files.rs"]
mod files;

/// Closes the log when the last [`LogStore`] handle goes away.
struct CloseGuard(Arc<Inner>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        if let Err(e) = self.0.close(true) {
            tracing::error!(error = %e, "closing the log on drop failed");
        }
    }
}

/// The CommitLog / Raft log of one node. Cheap to clone: every clone is a handle to the same
/// log; the log closes (flushing) when `close` is called or the last handle is dropped.
pub struct LogStore<C> {
    inner: Arc<Inner>,
    _guard: Arc<CloseGuard>,
    _types: PhantomData<fn() -> C>,
}

impl<C> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore {
            inner: self.inner.clone(),
            _guard: self._guard.clone(),
            _types: PhantomData,
        }
    }
}

impl<C> LogStore<C> {
    /// Opens (or creates) the log under `dir` on the real file system; recovery runs here.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> LogResult<Self> {
        let dir = dir.as_ref();
        let stage_path = dir.join(STAGE_FILE);
        // pwrite for both policies (see `FsEnv`): stores into fresh mapped pages cost a
        // zero-fill and two faults per page; into the write stage where there is one.
        let bytes = config.stage_bytes();
        let boot = crate::stage_file::boot_id();
        let env = match (config.flush, boot) {
            (FlushPolicy::Async, Some(boot)) if bytes > 0 => {
                FsEnv::with_stage_file(bytes, stage_path.clone(), boot)
            }
            (FlushPolicy::Async, _) => {
                if bytes > 0 {
                    tracing::warn!("no boot id from the kernel: no write stage for an async log");
                }
                FsEnv::default()
            }
            (FlushPolicy::Sync, _) => FsEnv::with_stage(bytes),
        };
        let in_file = env.stage.is_some() && config.flush == FlushPolicy::Async;
        let log = Self::open_with_env(dir, config, Arc::new(env))?;
        // Opening replayed the stage file a killed `async` process left; unused now, it goes.
        if !in_file {
            std::fs::remove_file(&stage_path)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| LogError::io("remove", &stage_path, e))?;
        }
        Ok(log)
    }

    /// Opens with a custom I/O environment (fault injection in tests). The meta db is always
    /// a real sled db under `dir/meta` (with the `committed-id` file beside its files).
    pub fn open_with_env(
        dir: impl AsRef<Path>,
        config: LogConfig,
        env: Arc<dyn Env>,
    ) -> LogResult<Self> {
        let inner = Arc::new(Inner::open(dir.as_ref(), config, env)?);
        Ok(LogStore {
            inner: inner.clone(),
            _guard: Arc::new(CloseGuard(inner)),
            _types: PhantomData,
        })
    }

    /// Flushes everything, stops the background threads and refuses further writes.
    /// Idempotent; also done when the last handle is dropped.
    pub fn close(&self) -> LogResult<()> {
        self.inner.close(true)
    }

    /// Test support: stops the log the way a crash would, without flushing anything.
    #[doc(hidden)]
    pub fn halt_without_flush(&self) {
        if let Err(e) = self.inner.close(false) {
            tracing::debug!(error = %e, "halt");
        }
    }

    /// Flushes all appended bytes now (whatever the policy) and completes covered callbacks.
    pub fn flush(&self) -> LogResult<()> {
        self.inner.flusher.flush_once()
    }

    /// The configuration in use.
    pub fn config(&self) -> &LogConfig {
        self.inner.writer.config()
    }

    /// Where entry `index` sits, if it is physically present (purged entries stay readable
    /// until their segment is deleted).
    pub fn entry_location(&self, index: LogIndex) -> Option<EntryLocation> {
        self.inner.shared.state.lock().index.get(index.get())
    }

    /// Reads `len` bytes at `phys`; the range must lie inside the appended part of one segment.
    pub fn read_at(&self, phys: PhysOffset, len: u32) -> LogResult<Vec<u8>> {
        LocatedRange::new(&self.inner.shared, phys.get(), len)?.read(0, len as usize)
    }

    /// Decodes the entries with index in `[start, end)` that are physically present (see
    /// [`read_entry`]).
    pub fn read_entries(&self, start: LogIndex, end: LogIndex) -> LogResult<Vec<LogEntry>> {
        // The recent ones from memory (shared payloads), the rest from the CommitLog.
        let found: Vec<_> = {
            let st = self.inner.shared.state.lock();
            let locs = st.index.range(start.get(), end.get());
            locs.into_iter()
                .map(|l| st.recent.get(l.index, l.term).ok_or(l))
                .collect()
        };
        let mut out = Vec::with_capacity(found.len());
        for f in found {
            out.push(match f {
                Ok(e) => e,
                Err(l) => read_entry(&self.inner.shared, &l)?,
            });
        }
        Ok(out)
    }

    /// Current positions.
    pub fn watermarks(&self) -> Watermarks {
        Watermarks::of(&self.inner.shared.state.lock())
    }

    /// Chunks read around the page cache since open: reads of entries or records older than
    /// `log-cache-bytes` behind the flushed end (see `cold_read.rs`).
    pub fn cold_chunk_reads(&self) -> u64 {
        self.inner.shared.cold.chunk_reads()
    }

    /// The persisted committed log id.
    pub fn committed(&self) -> Option<LogId> {
        self.inner.shared.state.lock().committed
    }

    /// The persisted vote.
    pub fn vote(&self) -> Option<Vote> {
        self.inner.shared.state.lock().vote
    }

    /// The lost-commit floor: after a crash lost entries this node had known as committed (an
    /// `async` node's unflushed tail), the committed log id it had, until the committed id
    /// reaches it again. While it is set the node must not help elect a candidate whose last
    /// log id is below it (see the node's vote guard): with plain Raft, two such nodes could
    /// elect each other and overwrite entries a third node committed.
    pub fn lost_commit_floor(&self) -> Option<LogId> {
        self.inner.shared.state.lock().lost_commit_floor
    }

    /// A reader of [`Self::lost_commit_floor`] that does not keep the log open (it answers
    /// `None` once the log is gone), for long-lived holders such as a gRPC service whose
    /// connection tasks can outlive the node.
    pub fn lost_commit_floor_reader(&self) -> impl Fn() -> Option<LogId> + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.inner);
        move || weak.upgrade()?.shared.state.lock().lost_commit_floor
    }

    /// A probe that answers true once this log is released: every handle is gone and so are
    /// the log's threads, which held its state and meta db. A caller that reopens the log in
    /// the same process (a restarted node) waits for it; sled's own threads may hold the db's
    /// lock a moment longer, which the meta db's open retries.
    pub fn released_probe(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.inner.shared);
        move || weak.strong_count() == 0
    }

    /// Appends entries (readable when this returns). `on_durable` is called once they are
    /// durable under the node's flush policy (`sync`: after the flush covering them; `async`:
    /// at once), or with the error if flushing fails. Returns the physical end of the append.
    ///
    /// On error the callback is completed with the error as well.
    ///
    /// Entries must continue the log: index = last index + 1 (or any index above the purged
    /// id when every present entry is purged), terms non-decreasing.
    ///
    /// With inline flushing on ([`LogStore::set_inline_flush`]) a `sync` append to a quiet
    /// log runs its flush on the calling thread and completes `on_durable` before returning.
    pub fn append_entries(
        &self,
        entries: Vec<LogEntry>,
        on_durable: FlushCallback,
    ) -> LogResult<PhysOffset> {
        let inner = &*self.inner;
        let cycle = match inner.writer.config().flush {
            FlushPolicy::Sync if inner.inline.admits() => inner.flusher.try_lock_cycle(),
            _ => None,
        };
        let end = match cycle {
            None => inner
                .writer
                .append(&entries, on_durable, FlushBy::FlusherThread),
            Some(cycle) => {
                let started = Instant::now();
                let end = inner.writer.append(&entries, on_durable, FlushBy::Caller);
                if end.is_ok() {
                    inner.flusher.cycle_under(cycle);
                }
                inner.inline.record_inline(started.elapsed());
                end
            }
        };
        inner.inline.record_done();
        // An `async` leader (or candidate) starts a flush of what it appended at once, without
        // waiting for it: apply, the ack and the commit gate wait for the entry to be durable
        // (`Committer::save_async`), and this flush, run beside replication (the `sync`
        // leader's overlap), usually makes it so before the committer thread writes the id.
        // Followers still flush only every `flush-interval-ms`.
        if inner.writer.config().flush == FlushPolicy::Async
            && end.is_ok()
            && inner.committer.votes_for_itself()
        {
            inner.shared.waiters.wake();
        }
        end.map(PhysOffset::new)
    }

    /// Lets a quiet `sync` log flush an append on the appending thread (see
    /// [`crate::inline_flush`]): on for a node that is not the leader, off (the default) for a
    /// leader, whose replication starts only once its append returns.
    pub fn set_inline_flush(&self, on: bool) {
        self.inner.inline.set_enabled(on);
    }

    /// How many appends were flushed on the appending thread.
    pub fn inline_flushes(&self) -> u64 {
        self.inner.inline.count()
    }

    /// Removes every entry after `last` (all entries for `None`). Refuses to remove an entry
    /// at or below the persisted committed id. Pending appends are flushed first; the removed
    /// bytes are zeroed and synced before this returns.
    pub fn truncate_after(&self, last: Option<LogId>) -> LogResult<()> {
        self.inner.trimmer.truncate_after(last)
    }

    /// Logically purges every entry up to `upto` (persisted before returning). The bytes stay
    /// readable through [`LogStore::read_at`] until [`LogStore::delete_segments_below`].
    pub fn purge(&self, upto: LogId) -> LogResult<()> {
        self.inner.trimmer.purge(upto)
    }

    /// Saves the vote durably (sled flush) before returning.
    pub fn save_vote(&self, vote: &Vote) -> LogResult<()> {
        self.inner.shared.meta.set_vote(vote)?;
        self.inner.shared.state.lock().vote = Some(*vote);
        Ok(())
    }

    /// Saves the committed log id durably (`meta/committed-id`: pwrite + fdatasync) before
    /// returning; when this log is already flushed past it (and no lost-commit floor waits),
    /// the entries it covers cannot be lost, so it is written behind instead.
    pub fn save_committed(&self, committed: Option<LogId>) -> LogResult<()> {
        self.inner.committer.save(committed)
    }

    /// Records the committed log id and returns; the `raftlog-commit` thread makes it durable
    /// soon after. What the id covers must not be acknowledged to a client before
    /// [`LogStore::wait_durable`] says so.
    ///
    /// For `sync` logs, and for an `async` one following another node whose apply waits
    /// with [`LogStore::wait_applicable`] ([`LogStore::save_committed_async`]). A `sync` node
    /// counts itself toward a commit only after its own flush, and every peer it acked holds
    /// the entries durably, so a crash can cost it only its own unflushed tail, which a
    /// quorum holds. An `async` node may lose entries that others already know as committed;
    /// a leader broadcasts a commit index concurrently with this call, so only a committed id
    /// durable before the others learn it keeps the lost-commit floor covering every commit
    /// they may have learned (s5 caught the deferred version: two `async` nodes elected
    /// each other and overwrote entries the `sync` node held as committed; the
    /// [`LogStore::commit_gate`] is what holds the commit index back now). A follower
    /// broadcasts nothing: what its floor must cover is what it made visible, hence apply's
    /// wait.
    pub fn save_committed_deferred(&self, committed: Option<LogId>) -> LogResult<()> {
        self.inner.committer.save_deferred(committed)
    }

    /// Waits until entry `index` (committed) cannot be forgotten by a crash of this node:
    /// the entry is flushed in this log, or a committed id at or past it is durable (a crash
    /// that loses the entry then leaves the lost-commit floor). Fails once the log stopped.
    pub async fn wait_durable(&self, index: LogIndex) -> LogResult<()> {
        (self.inner.committer)
            .wait_durable(index.get(), Urgency::Ack)
            .await
    }

    /// Waits until apply may make entry `index` (committed) visible on this node: at once on
    /// a `sync` log (it holds the entry durably before it counts toward a commit, and a
    /// quorum of durable peers holds whatever it may lose); on an `async` one once a crash
    /// can no longer forget it, as for [`LogStore::wait_durable`], so the lost-commit floor
    /// covers everything a reader saw. A follower's committed id is written behind for this
    /// (see [`LogStore::save_committed_async`]) within `committer::APPLY_INTERVAL`.
    ///
    /// Only an entry the recorded committed id covers waits: openraft records the id before
    /// it applies, and a caller that applies past it (openraft's storage test suite feeds
    /// the state machine entries this log never saw committed) would wait forever.
    pub async fn wait_applicable(&self, index: LogIndex) -> LogResult<()> {
        if self.config().flush == FlushPolicy::Sync
            || self.committed().is_none_or(|c| c.index < index.get())
        {
            return Ok(());
        }
        (self.inner.committer)
            .wait_durable(index.get(), Urgency::Apply)
            .await
    }

    /// openraft's `save_committed` on an `async` log: recorded at once and written behind;
    /// apply waits for it with [`LogStore::wait_applicable`] (or for the log's flush past the
    /// entry), and the [`LogStore::commit_gate`] lets it out to the peers only once durable.
    /// Until [`LogStore::set_node_id`] (and while a lost-commit floor waits on a node with
    /// its own vote) it is durable before returning.
    pub fn save_committed_async(&self, committed: Option<LogId>) -> LogResult<()> {
        self.inner.committer.save_async(committed)
    }

    /// The gate of this node's commit index: an `async` node's transport lets a commit index
    /// out to its peers only through it ([`CommitGate::clamp`], [`CommitGate::admit`]), so no
    /// peer learns a commit this node could forget in a crash, however many threads run
    /// openraft's tasks (see [`LogStore::save_committed_deferred`] why that matters). Not
    /// needed on a `sync` log: a `sync` leader counts itself toward a commit only after its
    /// flush.
    ///
    /// [`CommitGate::clamp`]: crate::CommitGate::clamp
    /// [`CommitGate::admit`]: crate::CommitGate::admit
    pub fn commit_gate(&self) -> crate::CommitGate {
        self.inner.committer.gate()
    }

    /// Names this node (its Raft id), so an `async` log can tell when it follows another node
    /// ([`LogStore::save_committed_async`]). Set once, before Raft starts.
    pub fn set_node_id(&self, id: NodeId) {
        self.inner.committer.set_node_id(id);
    }
}
