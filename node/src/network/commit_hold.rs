//! Holding back a replication stream's commit-only requests for a moment.
//!
//! When the leader's commit index moves and no new entry is waiting, openraft sends every
//! follower an AppendEntries without entries just to carry the new commit index. At one send
//! in flight that doubles the replication traffic: each entry is followed by such a request
//! per follower, which wakes the follower (a halted vCPU on a VM), runs its Raft core and
//! apply, and brings the leader another reply to handle, while the leader is answering the
//! client and the client is sending its next message. The next entry's request carries the
//! same commit index (openraft reads it when it builds each request), so [`HoldCommits`]
//! keeps an entry-less request back for up to [`COMMIT_HOLD`]: when another request follows
//! within that time the held one is dropped, otherwise it goes out late.
//!
//! Nothing waits for it: a client's ack comes from the leader's commit and apply, and Raft's
//! safety never depends on a follower knowing the commit index. What it delays by at most
//! [`COMMIT_HOLD`] (plus the timer's 1 ms granularity) is a follower applying the last
//! entries of a burst, so reading them from a follower. openraft matches replies to requests
//! by log id (a reply acknowledges everything up to its matching id), so a request that is
//! never sent leaves no gap.
//!
//! Only requests after one that carried entries are held: a session's first request (a probe
//! for the follower's log) and the heartbeat worker's stream, which never carries entries, go
//! out as they come. `async` nodes hold them too since their followers write the committed id
//! behind (`LogStore::save_committed_async`): before, each new commit index was an fdatasync
//! in the follower's Raft core, which a merged request put in the entries' path (4 × 64
//! `async`: 0.94 × in two alternating rounds then; 0.96–1.20 ×, five of six faster, since).

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;
use std::time::Duration;

use futures::Stream;
use openraft::raft::AppendEntriesRequest;
use openraft::RaftTypeConfig;
use tokio::time::Instant;
use tokio::time::Sleep;

/// Longest a commit-only request is held back. At one send in flight the next entry follows
/// a commit within about a client round trip (0.3-0.7 ms on the dev VM).
pub const COMMIT_HOLD: Duration = Duration::from_millis(1);

/// An AppendEntries request stream whose commit-only requests wait for the next request (see
/// the module docs).
///
/// One timer serves every hold of the stream, and it is moved, never dropped, between them.
/// tokio wakes its driver (a write to its eventfd, and a turn of the loop that finds nothing)
/// whenever a timer is registered earlier than every deadline it knew when it last parked;
/// a new timer per hold, dropped when the next entries came, was such a timer each time (1.2
/// eventfd writes per send on the leader at one send in flight). Moved later, the one timer
/// is never earlier than what the driver knows. When it fires with nothing held, the stream
/// is polled once for nothing.
pub(super) struct HoldCommits<C: RaftTypeConfig, S> {
    input: S,
    hold: Duration,
    /// The held request (it goes out anyway at `deadline`).
    held: Option<AppendEntriesRequest<C>>,
    /// The timer of the current hold, or of the last one (created on the first hold).
    deadline: Option<Pin<Box<Sleep>>>,
    /// A request with entries went out on this stream.
    carried_entries: bool,
}

impl<C: RaftTypeConfig, S> HoldCommits<C, S> {
    pub(super) fn new(input: S, hold: Duration) -> Self {
        HoldCommits {
            input,
            hold,
            held: None,
            deadline: None,
            carried_entries: false,
        }
    }
}

// No field is pinned in place: the input is `Unpin` and the timer is boxed.
impl<C: RaftTypeConfig, S: Unpin> Unpin for HoldCommits<C, S> {}

impl<C, S> Stream for HoldCommits<C, S>
where
    C: RaftTypeConfig,
    S: Stream<Item = AppendEntriesRequest<C>> + Unpin,
{
    type Item = AppendEntriesRequest<C>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.input).poll_next(cx) {
                Poll::Ready(Some(req)) => {
                    if req.entries.is_empty() && this.carried_entries && !this.hold.is_zero() {
                        // A newer commit-only request replaces the held one (its commit index
                        // is at least as new) but keeps its deadline.
                        if this.held.replace(req).is_none() {
                            let at = Instant::now() + this.hold;
                            match this.deadline.as_mut() {
                                Some(d) => d.as_mut().reset(at),
                                None => {
                                    this.deadline = Some(Box::pin(tokio::time::sleep_until(at)))
                                }
                            }
                        }
                        continue;
                    }
                    this.carried_entries |= !req.entries.is_empty();
                    // The held request's commit index travels with this one.
                    this.held = None;
                    return Poll::Ready(Some(req));
                }
                // The session is over: a held commit has no one to go to; the next session's
                // first request carries it.
                Poll::Ready(None) => {
                    this.held = None;
                    return Poll::Ready(None);
                }
                Poll::Pending => {
                    let (Some(_), Some(deadline)) = (&this.held, this.deadline.as_mut()) else {
                        return Poll::Pending;
                    };
                    if deadline.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    return Poll::Ready(this.held.take());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use futures::StreamExt;
    use raftmq_raft_log::types::LogEntry;
    use raftmq_raft_log::types::Payload;
    use raftmq_raft_log::types::Vote;

    use super::*;
    use crate::network::split::tests::log_id;
    use crate::network::split::tests::TestConfig;

    const HOLD: Duration = Duration::from_millis(300);

    /// A request after entry `prev` with `n` entries and the commit index at `commit`.
    fn req(prev: u64, n: u64, commit: u64) -> AppendEntriesRequest<TestConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: Some(log_id(prev)),
            entries: (prev + 1..=prev + n)
                .map(|i| LogEntry {
                    log_id: log_id(i),
                    payload: Payload::Blank,
                })
                .collect(),
            leader_commit: Some(log_id(commit)),
        }
    }

    /// (last log index of the request, commit index) of what the stream yields.
    fn seen(r: &AppendEntriesRequest<TestConfig>) -> (u64, u64) {
        let last = r.entries.last().map(|e| e.log_id).or(r.prev_log_id);
        (last.unwrap().index, r.leader_commit.unwrap().index)
    }

    type Input = mpsc::UnboundedSender<AppendEntriesRequest<TestConfig>>;
    type Output =
        HoldCommits<TestConfig, mpsc::UnboundedReceiver<AppendEntriesRequest<TestConfig>>>;

    fn pair(hold: Duration) -> (Input, Output) {
        let (tx, rx) = mpsc::unbounded();
        (tx, HoldCommits::new(rx, hold))
    }

    /// A stream (held for [`HOLD`]) whose first request, entry 10 with commit 9, went out.
    async fn after_entries() -> (Input, Output) {
        let (tx, mut out) = pair(HOLD);
        tx.unbounded_send(req(9, 1, 9)).unwrap();
        assert_eq!(next_within(&mut out, HOLD).await, Some((10, 9)));
        (tx, out)
    }

    /// Asserts that a request held at `since` went out after [`HOLD`], and not much later.
    fn went_out_after_one_hold(since: std::time::Instant) {
        let waited = since.elapsed();
        assert!(
            waited >= HOLD && waited < 2 * HOLD,
            "went out after {waited:?}"
        );
    }

    async fn next_within(out: &mut Output, d: Duration) -> Option<(u64, u64)> {
        match tokio::time::timeout(d, out.next()).await {
            Ok(Some(r)) => Some(seen(&r)),
            Ok(None) => panic!("the stream ended"),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn a_commit_followed_by_entries_travels_with_them() {
        let (tx, mut out) = after_entries().await;
        tx.unbounded_send(req(10, 0, 10)).unwrap();
        assert_eq!(
            next_within(&mut out, Duration::from_millis(30)).await,
            None,
            "held"
        );
        tx.unbounded_send(req(10, 2, 10)).unwrap();
        // The commit-only request is gone: the next one carries commit 10.
        assert_eq!(next_within(&mut out, HOLD).await, Some((12, 10)));
        drop(tx);
        assert!(out.next().await.is_none());
    }

    #[tokio::test]
    async fn a_commit_alone_goes_out_after_the_hold() {
        let (tx, mut out) = after_entries().await;
        let sent = std::time::Instant::now();
        tx.unbounded_send(req(10, 0, 10)).unwrap();
        assert_eq!(next_within(&mut out, HOLD / 2).await, None, "held");
        // A newer commit replaces the held one but not its deadline.
        tx.unbounded_send(req(10, 0, 11)).unwrap();
        assert_eq!(next_within(&mut out, 4 * HOLD).await, Some((10, 11)));
        went_out_after_one_hold(sent);
        assert_eq!(next_within(&mut out, Duration::from_millis(30)).await, None);
        drop(tx);
        assert!(out.next().await.is_none());
    }

    #[tokio::test]
    async fn each_hold_waits_its_own_time_on_the_one_timer() {
        let (tx, mut out) = after_entries().await;
        // A hold ended by the next entries: its timer stays, and fires with nothing held.
        tx.unbounded_send(req(10, 0, 10)).unwrap();
        tx.unbounded_send(req(10, 1, 10)).unwrap();
        assert_eq!(next_within(&mut out, HOLD).await, Some((11, 10)));
        tokio::time::sleep(HOLD / 2).await;
        // The next hold starts after half the first one's time: it goes out a whole hold
        // after it starts, not when the first hold would have ended.
        let started = std::time::Instant::now();
        tx.unbounded_send(req(11, 0, 11)).unwrap();
        assert_eq!(next_within(&mut out, 4 * HOLD).await, Some((11, 11)));
        went_out_after_one_hold(started);
        // And once more after the timer fired.
        let started = std::time::Instant::now();
        tx.unbounded_send(req(11, 0, 12)).unwrap();
        assert_eq!(next_within(&mut out, 4 * HOLD).await, Some((11, 12)));
        went_out_after_one_hold(started);
    }

    #[tokio::test]
    async fn probes_heartbeats_and_a_zero_hold_are_not_held() {
        // A session's first request and a heartbeat stream carry no entries.
        let (tx, mut out) = pair(HOLD);
        for commit in [5, 5, 6] {
            tx.unbounded_send(req(9, 0, commit)).unwrap();
            assert_eq!(next_within(&mut out, HOLD / 10).await, Some((9, commit)));
        }
        let (tx, mut out) = pair(Duration::ZERO);
        tx.unbounded_send(req(9, 1, 9)).unwrap();
        tx.unbounded_send(req(10, 0, 10)).unwrap();
        assert_eq!(next_within(&mut out, HOLD / 10).await, Some((10, 9)));
        assert_eq!(next_within(&mut out, HOLD / 10).await, Some((10, 10)));
    }

    #[tokio::test]
    async fn a_held_commit_ends_with_the_session() {
        let (tx, mut out) = pair(HOLD);
        tx.unbounded_send(req(9, 1, 9)).unwrap();
        tx.unbounded_send(req(10, 0, 10)).unwrap();
        assert_eq!(next_within(&mut out, HOLD).await, Some((10, 9)));
        drop(tx);
        assert!(
            out.next().await.is_none(),
            "the held commit is not sent after the end"
        );
    }
}
