//! The committed-id persister thread.
//!
//! openraft awaits `save_committed` inside its core loop, before it applies the entries: a
//! sled flush there stalls every other Raft step (appends, replication, votes) for one fsync
//! per commit advance. On a `sync` node, [`LogStore::save_committed_deferred`] instead
//! records the id in memory, hands it to this thread and returns; the thread makes the newest
//! id durable (`meta/committed-id`), coalescing the ids that arrive while a write runs. An
//! `async` node writes it behind too, and its apply waits until it is durable or the log's
//! own flush covers the entry (`Committer::save_async`; an `async` leader starts a flush after
//! each append, so that usually comes first). What keeps a leader's peers from learning a
//! commit index before it is durable is the [`CommitGate`] its transport takes.
//!
//! What durability of the committed id protects is kept by a different rule: **a write is
//! acknowledged to a client only once this node cannot forget it in a crash**
//! ([`LogStore::wait_durable`]): either the entry is flushed in its own log (mostly so on a
//! `sync` node, which counts itself toward a commit only after its flush), or a committed id
//! covering it is durable, so the lost-commit floor a crashed `async` node computes still
//! covers every write it acknowledged. Entries may be applied (and served) before that: they
//! are committed by a quorum either way.
//!
//! On a `sync` node an ack waits for the committed id only when the entry committed before
//! the node's own flush ended: on a leader of three nodes whose two followers both answered
//! first (they are a quorum without it); the thread then writes it at once, racing the flush.
//! Otherwise it writes it at most every [`MIN_INTERVAL`]: a fsync per commit advance competed
//! with the log's own fsyncs. Each write was then a sled flush, an fsync on the log's disk
//! plus a wake-up of sled's I/O threads; at one every 10 ms they took about a tenth of a
//! follower's CPU under load, so the interval is 100 ms, as the flush checkpoint's. A
//! restarted node applies up to the stored id before it hears from a leader, so a staler id
//! only leaves more to the leader's commit index. A `sync` node never needs the floor for
//! safety: what it lost in a crash is its own unflushed tail, which a quorum of durable peers
//! holds.
//!
//! The lost-commit floor is cleared here too, only once a committed id at or past it is
//! durable. An I/O error stops the log like a failed flush.
//!
//! The thread holds only the [`Shared`] core (state, meta db, durable watch).
//!
//! [`LogStore::save_committed_deferred`]: crate::store::LogStore::save_committed_deferred
//! [`LogStore::wait_durable`]: crate::store::LogStore::wait_durable

use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::Weak;
use std::time::Duration;
use std::time::Instant;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::error::LogError;
use crate::error::LogResult;
use crate::shared::join_thread;
use crate::shared::Shared;
use crate::types::LogId;
use crate::types::NodeId;
use crate::types::RawIndex;

/// Least time between two writes of the committed id nobody waits for.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Least time between two writes of the committed id that only apply waits for (an `async`
/// follower, see [`Committer::save_async`]): a few commit advances share one fdatasync, and
/// the entries become visible on the follower at most this much later.
pub const APPLY_INTERVAL: Duration = Duration::from_millis(5);

/// Who waits for the committed id, and so how soon the thread writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// A client's ack: at once.
    Ack,
    /// Apply, before it makes entries visible: within [`APPLY_INTERVAL`].
    Apply,
}

#[derive(Default)]
struct Queue {
    /// The newest id not yet handed to a flush.
    pending: Option<Option<LogId>>,
    stop: bool,
    /// On stop: write `pending` first (a clean close) or drop it (a simulated crash).
    flush_on_stop: bool,
}

/// The committed-id persister: saves (durable or deferred), the `raftlog-commit` thread, and
/// the waits of acks for durability.
pub struct Committer {
    shared: Arc<Shared>,
    queue: Mutex<Queue>,
    cv: Condvar,
    /// Serializes writes of the committed id (the thread and `save`), so the stored id never
    /// goes back.
    write: Mutex<()>,
    /// Acks waiting for a committed id to be durable.
    waiting: AtomicUsize,
    /// Applies waiting for a committed id to be durable.
    applying: AtomicUsize,
    /// This node's id, once the owner set it ([`Committer::set_node_id`]); until then every
    /// `async` save is durable before it returns (tests of the log alone).
    node_id: OnceLock<NodeId>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Committer {
    /// Starts the thread.
    pub fn start(shared: Arc<Shared>) -> LogResult<Arc<Self>> {
        let committer = Arc::new(Committer {
            shared,
            queue: Mutex::default(),
            cv: Condvar::new(),
            write: Mutex::new(()),
            waiting: AtomicUsize::new(0),
            applying: AtomicUsize::new(0),
            node_id: OnceLock::new(),
            thread: Mutex::new(None),
        });
        let c = committer.clone();
        let t = std::thread::Builder::new()
            .name("raftlog-commit".into())
            .spawn(move || c.run())
            .map_err(|e| LogError::io("spawn committer", "", e))?;
        *committer.thread.lock() = Some(t);
        Ok(committer)
    }

    /// Stops and joins the thread; `flush` writes the last id first (else it is dropped, as a
    /// crash would). Waiters then see the log stopped.
    pub fn stop(&self, flush: bool) {
        {
            let mut q = self.queue.lock();
            q.stop = true;
            q.flush_on_stop = flush;
        }
        self.cv.notify_all();
        join_thread(&self.thread, "committer");
        self.shared.durable.fail("log closed");
    }

    /// Saves the committed log id durably (pwrite + fdatasync) before returning.
    /// When this log is already flushed past the id, the entries it covers cannot be lost
    /// in a crash, so no lost-commit floor needs it: it is handed to the thread instead, as on
    /// a `sync` node (unless a floor waits to be cleared by it).
    pub fn save(&self, committed: Option<LogId>) -> LogResult<()> {
        let flushed = self.shared.durable.log_flushed();
        if committed.is_some_and(|c| flushed.is_some_and(|f| f >= c.index))
            && self.shared.state.lock().lost_commit_floor.is_none()
        {
            return self.save_deferred(committed);
        }
        self.record(committed)?;
        self.persist(committed)
    }

    /// Names this node, so an `async` save can tell whether it follows another node
    /// ([`Committer::save_async`]). Set once; a second call is ignored.
    pub fn set_node_id(&self, id: NodeId) {
        let _ = self.node_id.set(id);
    }

    /// openraft's save on an `async` log: the id is handed to the thread, and nothing that
    /// depends on it waits for less than its durability. Apply waits for it
    /// ([`Urgency::Apply`], or the log's flush past the entry) before it makes the entries
    /// visible, so the floor covers everything a reader saw here and every answer to a
    /// client; the [`CommitGate`] lets the commit index out to the peers only as far, so the
    /// floor covers whatever the others learn. So openraft's core loop does not stop for an
    /// fdatasync per commit advance, and a few advances share one. On the leader (and a
    /// candidate) the log's flush, started at each append (`LogStore::append_entries`),
    /// usually covers the entry before the thread writes. Durable before returning
    /// ([`Committer::save`]) only until the node id is set or it first votes, or while a
    /// lost-commit floor waits to be cleared by it on a node with its own vote.
    ///
    /// Measured (thirty-fifth sitting): with the leader's save durable before returning,
    /// half of its commits at 4 × 64 found the log's flush still under way and ran an
    /// fdatasync of the committed id in openraft's core loop; written behind, `async` 4 × 64
    /// ran 1.02-1.08 × (p99 4.5-4.7 ms against 4.8-5.1).
    pub fn save_async(&self, committed: Option<LogId>) -> LogResult<()> {
        let durable_now = self.node_id.get().is_none_or(|id| {
            let st = self.shared.state.lock();
            st.vote
                .is_none_or(|v| v.leader_id.voted_for == *id && st.lost_commit_floor.is_some())
        });
        match durable_now {
            true => self.save(committed),
            false => self.save_deferred(committed),
        }
    }

    /// The gate of this node's commit index (see [`CommitGate`]).
    pub fn gate(self: &Arc<Self>) -> CommitGate {
        CommitGate {
            committer: Arc::downgrade(self),
        }
    }

    /// Whether this node's vote is its own (a candidate or the leader; false until the node
    /// id is set).
    pub(crate) fn votes_for_itself(&self) -> bool {
        self.vote_is_own() == Some(true)
    }

    /// Whether this node voted for itself: `None` before the node id is set or with no vote.
    fn vote_is_own(&self) -> Option<bool> {
        let id = self.node_id.get()?;
        let st = self.shared.state.lock();
        st.vote.map(|v| v.leader_id.voted_for == *id)
    }

    /// Records the committed log id and hands it to the thread (see
    /// `LogStore::save_committed_deferred` for when that is safe).
    pub fn save_deferred(&self, committed: Option<LogId>) -> LogResult<()> {
        if self.record(committed)? {
            // A pending id means the thread waits out MIN_INTERVAL (or is about to write) and
            // takes this newer one: only the first one wakes it (a wake-up per commit advance
            // only cost a context switch). An ack that waits wakes it itself (`demand`).
            let had_pending = self.queue.lock().pending.replace(committed).is_some();
            if !had_pending {
                self.cv.notify_one();
            }
        }
        Ok(())
    }

    /// Waits until entry `index` (committed) cannot be forgotten by a crash of this node
    /// (see `LogStore::wait_durable`); `urgency` says how soon the thread writes the committed
    /// id for it. Fails once the log stopped.
    pub async fn wait_durable(&self, index: RawIndex, urgency: Urgency) -> LogResult<()> {
        let mut rx = self.shared.durable.subscribe();
        let mut _demand = None;
        loop {
            {
                let d = rx.borrow_and_update();
                if d.covers(index) {
                    return Ok(());
                }
                if let Some(msg) = &d.stopped {
                    return Err(LogError::Stopped(msg.clone()));
                }
            }
            if _demand.is_none() {
                _demand = Some(self.demand(urgency));
            }
            if rx.changed().await.is_err() {
                return Err(LogError::Stopped("log closed".into()));
            }
        }
    }

    /// Registers a waiter for the committed id (the thread then writes at once for an ack,
    /// within [`APPLY_INTERVAL`] for apply) until the guard drops.
    fn demand(&self, urgency: Urgency) -> Demand<'_> {
        let count = match urgency {
            Urgency::Ack => &self.waiting,
            Urgency::Apply => &self.applying,
        };
        count.fetch_add(1, Ordering::AcqRel);
        // Taking the queue lock orders this with the thread's check of `waiting`: it either
        // sees the count or already waits on the condvar, so the notification is not lost
        // (it would have slept out MIN_INTERVAL).
        drop(self.queue.lock());
        self.cv.notify_one();
        Demand(count)
    }

    /// Sets the in-memory committed id; false if it did not change.
    fn record(&self, committed: Option<LogId>) -> LogResult<bool> {
        let mut st = self.shared.state.lock();
        if let Some(msg) = &st.failed {
            return Err(LogError::Stopped(msg.clone()));
        }
        if st.committed == committed {
            return Ok(false);
        }
        st.committed = committed;
        Ok(true)
    }

    fn run(&self) {
        let mut last_write: Option<Instant> = None;
        loop {
            let (next, last) = self.next_write(last_write);
            last_write = Some(Instant::now());
            if let Some(c) = next {
                if let Err(e) = self.persist(c) {
                    // Stops the log and tells the waiters.
                    self.shared.fail(e);
                    return;
                }
            }
            if last {
                return;
            }
        }
    }

    /// Waits for the next id to write (at most every [`MIN_INTERVAL`], or [`APPLY_INTERVAL`]
    /// while apply waits, or at once while an ack waits); returns it and whether the thread
    /// stops after it.
    fn next_write(&self, last_write: Option<Instant>) -> (Option<Option<LogId>>, bool) {
        let mut q = self.queue.lock();
        loop {
            if q.stop {
                return (q.pending.take().filter(|_| q.flush_on_stop), true);
            }
            if q.pending.is_some() {
                let interval = if self.waiting.load(Ordering::Acquire) > 0 {
                    Duration::ZERO
                } else if self.applying.load(Ordering::Acquire) > 0 {
                    APPLY_INTERVAL
                } else {
                    MIN_INTERVAL
                };
                let due = last_write.map(|t| t + interval);
                let now = Instant::now();
                match due {
                    Some(due) if now < due => {
                        self.cv.wait_for(&mut q, due - now);
                        continue;
                    }
                    _ => return (q.pending.take(), false),
                }
            }
            self.cv.wait(&mut q);
        }
    }

    /// Makes `committed` durable, then clears the lost-commit floor if it reached it.
    fn persist(&self, committed: Option<LogId>) -> LogResult<()> {
        let shared = &*self.shared;
        let _write = self.write.lock();
        if shared.state.lock().failed.is_some() || shared.durable.committed() >= committed {
            return Ok(());
        }
        shared.meta.set_committed(&committed)?;
        shared.durable.note_committed(committed);
        let floor = shared.state.lock().lost_commit_floor;
        if let (Some(f), Some(c)) = (floor, committed) {
            if c.index >= f.index {
                shared.meta.set_lost_commit_floor(&None)?;
                shared.state.lock().lost_commit_floor = None;
                tracing::info!(lost_commit_floor = %f, committed = %c, "caught up past the committed entries lost in the crash; voting as usual again");
            }
        }
        Ok(())
    }
}

/// What lets this node's commit index out to its peers: only as far as this node cannot
/// forget it in a crash (its committed id is durable that far, or its log is flushed that
/// far).
///
/// Why: an `async` node may lose entries in a power loss that others already know as
/// committed; its lost-commit floor covers them only if its committed id was durable before
/// any peer learned of the commit. openraft hands the new commit index to the replication
/// tasks before it saves the id, so a save that is durable before it returns is not enough
/// once another worker thread can run a replication task during the fdatasync.
///
/// The gate does not keep the log open: once the log is gone it lets no commit index out.
#[derive(Clone)]
pub struct CommitGate {
    committer: Weak<Committer>,
}

impl std::fmt::Debug for CommitGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitGate").finish_non_exhaustive()
    }
}

impl CommitGate {
    /// The commit index this node may tell a peer now: `commit` when it cannot be forgotten
    /// any more, else the newest durable committed id (never past `commit`).
    pub fn clamp(&self, commit: Option<LogId>) -> Option<LogId> {
        let committer = self.committer.upgrade()?;
        committer.shared.durable.clamp(commit)
    }

    /// Waits until `commit` may be told ([`CommitGate::clamp`] gives it back), having the
    /// thread write the committed id at once. Fails once the log stopped.
    pub fn admit(
        &self,
        commit: Option<LogId>,
    ) -> impl Future<Output = LogResult<()>> + Send + 'static {
        let committer = self.committer.upgrade();
        async move {
            let Some(committer) = committer else {
                return Err(LogError::Stopped("log closed".into()));
            };
            match commit {
                Some(c) => committer.wait_durable(c.index, Urgency::Ack).await,
                None => Ok(()),
            }
        }
    }
}

/// A waiter for the committed id: its count (see [`Committer::demand`]).
struct Demand<'a>(&'a AtomicUsize);

impl Drop for Demand<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
