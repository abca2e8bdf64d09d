//! An `async` leader's commit index leaves the node only once it is durable.
//!
//! An `async` node may lose entries in a power loss that its peers already know as
//! committed; its lost-commit floor covers them (so that it neither stands for election nor
//! helps elect a node without them) only if its committed id was durable before any peer
//! learned of the commit. openraft hands a new commit index to the replication tasks before
//! it saves the id (alpha.37's core runs `Command::ReplicateCommitted`, a watch the
//! replication tasks read, ahead of `SaveCommittedAndApply`), so saving it durably before
//! `save_committed` returns holds only while one thread runs the node: with more workers
//! (the default is one per core) a replication task could send the commit during the
//! fdatasync.
//!
//! So on an `async` node every request leaves through the log's [`CommitGate`]: a request
//! with entries goes out at once, its `leader_commit` lowered to what is durable (a lower
//! commit index is always valid; the next request carries the newer one); a request that
//! only carries a new commit index (heartbeats too: openraft sends them on a stream of their
//! own) waits until that index is durable, one fdatasync of the committed id at most, but
//! never longer than [`MAX_WAIT`]: then it goes out lowered, so a slow disk never stops the
//! heartbeats that keep the leader in office. A unary `append_entries` is only lowered.
//!
//! The leader's `save_committed` only records the id; the log's commit thread writes it
//! (`Committer::save_async`), at once while this gate waits for it. The twenty-fourth sitting
//! found that hand-off a wake-up too many per commit (1 × 1 `async` 4-7% fewer messages/s);
//! since the leader flushes each append as it goes, the flush usually makes the entry durable
//! first, and the thirty-fifth measured 4 × 64 `async` 1.02-1.08 ×, 1 × 1 0.99-1.18 ×.
//!
//! Invariant: no request leaves this node with a `leader_commit` the node could forget in a
//! crash.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use futures::Stream;
use openraft::raft::AppendEntriesRequest;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::CommitGate;

/// Longest a commit-only request waits for its commit index to become durable before it
/// goes out with a lower one (below the least election timeout allowed, 50 ms; 150 ms by
/// default).
pub(super) const MAX_WAIT: Duration = Duration::from_millis(20);

/// Lowers `req`'s commit index to what the gate lets out now.
pub(super) fn clamp<C: LogTypes>(gate: &CommitGate, req: &mut AppendEntriesRequest<C>) {
    req.leader_commit = gate.clamp(req.leader_commit);
}

/// A replication request stream whose commit indexes pass the gate (see the module docs).
pub(super) struct GateCommits<C: LogTypes, S> {
    input: S,
    gate: CommitGate,
    /// A commit-only request waiting for its commit index to become durable (or for
    /// [`MAX_WAIT`]).
    waiting: Option<(AppendEntriesRequest<C>, BoxFuture<'static, ()>)>,
}

impl<C: LogTypes, S> GateCommits<C, S> {
    pub(super) fn new(input: S, gate: CommitGate) -> Self {
        GateCommits {
            input,
            gate,
            waiting: None,
        }
    }
}

// No field is pinned in place: the input is `Unpin` and the wait is boxed.
impl<C: LogTypes, S: Unpin> Unpin for GateCommits<C, S> {}

impl<C, S> Stream for GateCommits<C, S>
where
    C: LogTypes,
    S: Stream<Item = AppendEntriesRequest<C>> + Unpin,
{
    type Item = AppendEntriesRequest<C>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some((_, wait)) = this.waiting.as_mut() {
            // Durable, or the log stopped, or out of time: it goes with what clamp allows.
            if Pin::new(wait).poll(cx).is_pending() {
                return Poll::Pending;
            }
            let (mut req, _) = this.waiting.take().expect("a request waits");
            clamp(&this.gate, &mut req);
            return Poll::Ready(Some(req));
        }
        let mut req = match Pin::new(&mut this.input).poll_next(cx) {
            Poll::Ready(Some(req)) => req,
            other => return other,
        };
        let allowed = this.gate.clamp(req.leader_commit);
        if allowed == req.leader_commit || !req.entries.is_empty() {
            req.leader_commit = allowed;
            return Poll::Ready(Some(req));
        }
        let admit = this.gate.admit(req.leader_commit);
        let wait = tokio::time::timeout(MAX_WAIT, admit).map(|_| ()).boxed();
        this.waiting = Some((req, wait));
        // Polls the wait once, so its waker is registered.
        Pin::new(this).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use futures::StreamExt;
    use raftmq_raft_log::config::FlushPolicy;
    use raftmq_raft_log::config::LogConfig;
    use raftmq_raft_log::store::LogStore;
    use raftmq_raft_log::types::LogEntry;
    use raftmq_raft_log::types::LogIndex;
    use raftmq_raft_log::types::Payload;
    use raftmq_raft_log::types::Vote;

    use super::*;
    use crate::network::split::tests::log_id;
    use crate::network::split::tests::TestConfig;

    /// A request after entry `prev` with `n` entries and the commit index at `commit`.
    fn req(prev: u64, n: u64, commit: u64) -> AppendEntriesRequest<TestConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: Some(log_id(prev)),
            entries: (prev + 1..=prev + n).map(entry).collect(),
            leader_commit: Some(log_id(commit)),
        }
    }

    fn entry(index: u64) -> LogEntry {
        LogEntry {
            log_id: log_id(index),
            payload: Payload::Blank,
        }
    }

    /// The commit index of the next request out, if one comes within `d`.
    async fn next_commit<S>(out: &mut S, d: Duration) -> Option<Option<u64>>
    where
        S: Stream<Item = AppendEntriesRequest<TestConfig>> + Unpin,
    {
        match tokio::time::timeout(d, out.next()).await {
            Ok(Some(r)) => Some(r.leader_commit.map(|c| c.index)),
            Ok(None) => panic!("the stream ended"),
            Err(_) => None,
        }
    }

    /// A gate over a request channel, and the leader's log behind it (see [`leader`]).
    fn gated(
        dir: &tempfile::TempDir,
    ) -> (
        LogStore<TestConfig>,
        mpsc::UnboundedSender<AppendEntriesRequest<TestConfig>>,
        impl Stream<Item = AppendEntriesRequest<TestConfig>> + Unpin,
    ) {
        let log = leader(dir);
        let (tx, rx) = mpsc::unbounded();
        let out = GateCommits::new(rx, log.commit_gate());
        (log, tx, out)
    }

    /// An `async` leader with entries 1-3 flushed and 4-6 only appended. It votes for itself
    /// after appending: a leader's own appends are flushed at once (not awaited), which would
    /// soon cover 4-6 too.
    fn leader(dir: &tempfile::TempDir) -> LogStore<TestConfig> {
        let config = LogConfig {
            segment_bytes: 1 << 16,
            flush: FlushPolicy::Async,
            flush_interval_ms: 60_000,
            ..LogConfig::default()
        };
        let log = LogStore::open(dir.path(), config).unwrap();
        log.set_node_id(1);
        let append = |r: std::ops::RangeInclusive<u64>| {
            log.append_entries(r.map(entry).collect(), Box::new(|_| {}))
                .unwrap()
        };
        append(1..=3);
        log.flush().unwrap();
        append(4..=6);
        log.save_vote(&Vote::new_committed(1, 1)).unwrap();
        log
    }

    /// Time is paused: a timeout fires only once nothing else can run.
    #[tokio::test(start_paused = true)]
    async fn commits_leave_only_once_durable() {
        let dir = tempfile::tempdir().unwrap();
        let (log, tx, mut out) = gated(&dir);

        // Covered by the log's flush: as it is.
        tx.unbounded_send(req(2, 1, 2)).unwrap();
        assert_eq!(next_commit(&mut out, MAX_WAIT).await, Some(Some(2)));
        // Entries go out at once, with only what is durable (no committed id yet).
        tx.unbounded_send(req(3, 3, 5)).unwrap();
        assert_eq!(next_commit(&mut out, MAX_WAIT).await, Some(None));
        // A commit alone waits until it is durable: not before the leader saved it, and the
        // save only records it (the committer thread writes it, at once since the gate waits).
        tx.unbounded_send(req(6, 0, 6)).unwrap();
        assert_eq!(next_commit(&mut out, MAX_WAIT / 2).await, None, "waits");
        log.save_committed_async(Some(log_id(6))).unwrap();
        // The thread's fsync runs in real time, which the paused clock does not wait for.
        log.wait_durable(LogIndex::new(6)).await.unwrap();
        assert_eq!(next_commit(&mut out, MAX_WAIT / 4).await, Some(Some(6)));
        drop(tx);
        assert!(out.next().await.is_none());
    }

    /// A commit that does not become durable in time goes out lowered: a stuck disk does not
    /// stop the heartbeats.
    #[tokio::test(start_paused = true)]
    async fn a_commit_waits_at_most_max_wait() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, tx, mut out) = gated(&dir);
        tx.unbounded_send(req(6, 0, 6)).unwrap();
        assert_eq!(next_commit(&mut out, MAX_WAIT / 2).await, None, "waits");
        assert_eq!(next_commit(&mut out, MAX_WAIT).await, Some(None));
    }

    /// A unary request is only lowered, never held.
    #[tokio::test]
    async fn unary_requests_are_only_lowered() {
        let dir = tempfile::tempdir().unwrap();
        let log = leader(&dir);
        let gate = log.commit_gate();
        let mut hb = req(6, 0, 6);
        clamp(&gate, &mut hb);
        assert_eq!(hb.leader_commit, None);
        log.save_committed_async(Some(log_id(4))).unwrap();
        log.wait_durable(LogIndex::new(4)).await.unwrap();
        let mut hb = req(6, 0, 6);
        clamp(&gate, &mut hb);
        assert_eq!(hb.leader_commit, Some(log_id(4)));
    }
}
