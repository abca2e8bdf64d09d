//! [`LogStore`]: the open log (shared handle), its open/recovery, close, and the read side the
//! state machine uses.

use std::marker::PhantomData;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::committer::Committer;
use crate::config::FlushPolicy;
use crate::config::LogConfig;
use crate::env::Env;
use crate::env::FsEnv;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flusher::FlushCtl;
use crate::format::decode_record;
use crate::meta::Meta;
use crate::raft_index::EntryLocation;
use crate::raft_index::RaftIndex;
use crate::recovery::recover;
use crate::segments::Preallocator;
use crate::state::State;
use crate::types::LogEntry;
use crate::types::LogId;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::Vote;

/// The positions of the log, for metrics and for the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    /// Last entry appended (readable).
    pub appended: Option<LogId>,
    /// Physical end of the appended bytes.
    pub appended_phys_end: PhysOffset,
    /// Last entry known durable.
    pub flushed: Option<LogId>,
    /// Physical end of the durable bytes.
    pub flushed_phys_end: PhysOffset,
    /// First entry still physically present (purged or not).
    pub first_index: Option<LogIndex>,
    /// Start of the oldest segment kept.
    pub min_phys_offset: PhysOffset,
    /// Last purged log id.
    pub last_purged: Option<LogId>,
    /// Physical end of the last purged entry: `delete_segments_below` accepts up to here.
    pub purged_phys_end: PhysOffset,
    /// Persisted committed log id.
    pub committed: Option<LogId>,
}

/// Shared internals; the flusher thread holds one reference.
pub(crate) struct Inner {
    /// Root directory.
    pub dir: PathBuf,
    /// Configuration.
    pub config: LogConfig,
    /// I/O environment.
    pub env: Arc<dyn Env>,
    /// The `meta/` db.
    pub meta: Meta,
    /// Mutable state.
    pub state: Mutex<State>,
    /// Flush queue and thread.
    pub flush: FlushCtl,
    /// Next-segment preallocation.
    pub prealloc: Option<Preallocator>,
    /// Committed-id persister.
    pub committer: Committer,
}

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
    pub(crate) inner: Arc<Inner>,
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
        // pwrite for both policies (see `FsEnv`): stores into fresh mapped pages cost a
        // zero-fill and two faults per page.
        Self::open_with_env(
            dir,
            config,
            Arc::new(FsEnv {
                mapped_writes: false,
            }),
        )
    }

    /// Opens with a custom I/O environment (fault injection in tests). The meta db is always
    /// a real sled db under `dir/meta`.
    pub fn open_with_env(
        dir: impl AsRef<Path>,
        config: LogConfig,
        env: Arc<dyn Env>,
    ) -> LogResult<Self> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| LogError::io("create dir", &dir, e))?;
        let meta = Meta::open(&dir.join("meta"))?;
        let state = open_state(&dir, &config, env.clone(), &meta)?;
        let committed = state.committed;
        let prealloc = match config.preallocate {
            true => Some(Preallocator::start(
                env.clone(),
                dir.join("commitlog"),
                config.segment_bytes,
            )?),
            false => None,
        };
        if let Some(p) = &prealloc {
            p.request(state.segments.start_of(state.append_pos) + config.segment_bytes);
        }
        let interval = match config.flush {
            FlushPolicy::Sync => None,
            FlushPolicy::Async => Some(Duration::from_millis(config.flush_interval_ms)),
        };
        let inner = Arc::new(Inner {
            dir,
            config,
            env,
            meta,
            state: Mutex::new(state),
            flush: FlushCtl::default(),
            prealloc,
            committer: Committer::new(committed),
        });
        FlushCtl::start(inner.clone(), interval)?;
        Committer::start(inner.clone())?;
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
        self.inner.flush_once()
    }

    /// The configuration in use.
    pub fn config(&self) -> &LogConfig {
        &self.inner.config
    }

    /// Where entry `index` sits, if it is physically present (purged entries stay readable
    /// until their segment is deleted).
    pub fn entry_location(&self, index: LogIndex) -> Option<EntryLocation> {
        self.inner.state.lock().index.get(index)
    }

    /// Reads `len` bytes at `phys`; the range must lie inside the appended part of one segment.
    pub fn read_at(&self, phys: PhysOffset, len: u32) -> LogResult<Vec<u8>> {
        let (seg, off, path) = {
            let st = self.inner.state.lock();
            let end = phys
                .checked_add(len as u64)
                .ok_or_else(|| LogError::InvalidArgument("range overflows".into()))?;
            if phys < st.min_phys || end > st.append_pos {
                return Err(LogError::InvalidArgument(format!(
                    "range {phys}+{len} outside the log [{}, {})",
                    st.min_phys, st.append_pos
                )));
            }
            let start = st.segments.start_of(phys);
            if end > start + st.segments.segment_bytes() {
                return Err(LogError::InvalidArgument(format!(
                    "range {phys}+{len} spans two segments"
                )));
            }
            let (seg, off) = st.segments.locate(phys)?;
            (seg, off, st.segments.path(start))
        };
        let mut buf = vec![0u8; len as usize];
        seg.read_at(off, &mut buf)
            .map_err(|e| LogError::io("read", path, e))?;
        Ok(buf)
    }

    /// Decodes the entries with index in `[start, end)` that are physically present.
    pub fn read_entries(&self, start: LogIndex, end: LogIndex) -> LogResult<Vec<LogEntry>> {
        let locs = self.inner.state.lock().index.range(start, end);
        let mut out = Vec::with_capacity(locs.len());
        for l in locs {
            let bytes = self.read_at(l.phys, l.size)?;
            match decode_record(&bytes, l.phys, l.size as u64) {
                Ok(Some(e)) if e.log_id.index == l.index => out.push(e),
                Ok(_) => {
                    return Err(self.corruption(l.phys, format!("expected entry {} here", l.index)))
                }
                Err(reason) => return Err(self.corruption(l.phys, reason)),
            }
        }
        Ok(out)
    }

    fn corruption(&self, phys: PhysOffset, reason: String) -> LogError {
        let st = self.inner.state.lock();
        let start = st.segments.start_of(phys);
        LogError::Corruption {
            file: st.segments.path(start),
            offset: phys - start,
            reason,
        }
    }

    /// Current positions.
    pub fn watermarks(&self) -> Watermarks {
        let st = self.inner.state.lock();
        Watermarks {
            appended: st.last_entry_id(),
            appended_phys_end: st.append_pos,
            flushed: st.flushed.log_id,
            flushed_phys_end: st.flushed.phys_end,
            first_index: st.index.first().map(|l| l.index),
            min_phys_offset: st.min_phys,
            last_purged: st.purged,
            purged_phys_end: st.purged_phys_end,
            committed: st.committed,
        }
    }

    /// The persisted committed log id.
    pub fn committed(&self) -> Option<LogId> {
        self.inner.state.lock().committed
    }

    /// The persisted vote.
    pub fn vote(&self) -> Option<Vote> {
        self.inner.state.lock().vote
    }

    /// The lost-commit floor: after a crash lost entries this node had known as committed (an
    /// `async` node's unflushed tail), the committed log id it had, until the committed id
    /// reaches it again. While it is set the node must not help elect a candidate whose last
    /// log id is below it (see the node's vote guard): with plain Raft, two such nodes could
    /// elect each other and overwrite entries a third node committed.
    pub fn lost_commit_floor(&self) -> Option<LogId> {
        self.inner.state.lock().lost_commit_floor
    }

    /// A reader of [`Self::lost_commit_floor`] that does not keep the log open (it answers
    /// `None` once the log is gone), for long-lived holders such as a gRPC service whose
    /// connection tasks can outlive the node.
    pub fn lost_commit_floor_reader(&self) -> impl Fn() -> Option<LogId> + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.inner);
        move || weak.upgrade()?.state.lock().lost_commit_floor
    }
}

pub(crate) fn open_state(
    dir: &Path,
    config: &LogConfig,
    env: Arc<dyn Env>,
    meta: &Meta,
) -> LogResult<State> {
    let purged = meta.purged()?;
    let checkpoint = meta.checkpoint()?;
    let rec = recover(
        env.clone(),
        dir.join("commitlog"),
        config,
        meta.log_start()?,
        checkpoint,
        purged,
    )?;
    meta.set_log_start(rec.start)?;
    let index_dir = dir.join("raft-index");
    env.create_dir_all(&index_dir)
        .map_err(|e| LogError::io("create dir", &index_dir, e))?;
    let index_path = index_dir.join("index");
    let file = env
        .open_plain(&index_path)
        .map_err(|e| LogError::io("open raft index", &index_path, e))?;
    let (index, rebuilt) = RaftIndex::load(file, rec.locations)
        .map_err(|e| LogError::io("rebuild raft index", &index_path, e))?;
    if rebuilt {
        tracing::info!(path = %index_path.display(), "raft index rebuilt from the commitlog");
    }
    let last = index.last().copied();
    let purged_phys_end = match (purged, last) {
        (_, None) => rec.end,
        (Some(p), Some(l)) if p.index >= l.index => rec.end,
        (Some(p), Some(_)) => index.get(p.index).map_or(rec.start, |l| l.end()),
        (None, Some(_)) => rec.start,
    };
    let mut committed = meta.committed()?;
    let mut floor = meta.lost_commit_floor()?;
    let last_id = std::cmp::max(last.map(|l| LogId::new_term_index(l.term, l.index)), purged);
    if committed.is_some() && committed.map(|c| c.index) > last_id.map(|l| l.index) {
        tracing::error!(committed = ?committed, last_log_id = ?last_id, "committed entries were lost: the committed index lies past the recovered log end (they were not flushed); lowering it, and voting only for candidates that hold them until this node has them again");
        floor = std::cmp::max(floor, committed);
        // The floor first: it keeps what the lowered committed id forgets.
        meta.set_lost_commit_floor(&floor)?;
        committed = last_id;
        meta.set_committed(&committed)?;
    }
    if floor.is_some() && config.accept_lost_commits {
        tracing::warn!(lost_commit_floor = ?floor, "accept-lost-commits: forgetting the committed entries this node lost; it votes as plain Raft again");
        floor = None;
        meta.set_lost_commit_floor(&floor)?;
    }
    let unsynced_from = checkpoint.phys_end.clamp(rec.start, rec.end);
    let flushed = crate::meta::FlushCheckpoint {
        phys_end: unsynced_from,
        log_id: None,
    };
    let mut st = State {
        segments: rec.segments,
        index,
        append_pos: rec.end,
        min_phys: rec.start,
        purged,
        purged_phys_end,
        committed,
        vote: meta.vote()?,
        lost_commit_floor: floor,
        flushed,
        failed: None,
        closed: false,
    };
    // What survived past the checkpoint may sit only in the page cache: make it durable.
    for (seg, path, off, len) in st.dirty_ranges() {
        seg.sync_range(off, len)
            .map_err(|e| LogError::io("msync", path, e))?;
    }
    st.flushed = crate::meta::FlushCheckpoint {
        phys_end: rec.end,
        log_id: last_id,
    };
    meta.set_checkpoint(&st.flushed, true)?;
    st.debug_validate();
    Ok(st)
}

impl Inner {
    /// Closes the log: optionally flushes, stops the threads, fails leftover waiters.
    pub fn close(&self, flush: bool) -> LogResult<()> {
        if self.state.lock().closed {
            return Ok(());
        }
        let res = if flush { self.flush_once() } else { Ok(()) };
        self.flush.stop();
        self.committer.stop(flush);
        if let Some(p) = &self.prealloc {
            p.stop();
        }
        self.state.lock().closed = true;
        self.flush.fail_all("log closed");
        if flush {
            let mut st = self.state.lock();
            st.index
                .sync()
                .map_err(|e| LogError::io("fsync raft index", self.dir.join("raft-index"), e))?;
            drop(st);
            self.meta.flush()?;
        }
        tracing::info!(dir = %self.dir.display(), "log closed");
        res
    }
}
