//! Group commit across producers: while other producers' entries are being stored, a group
//! of single sends waits and merges with the other waiting groups into one entry.
//!
//! Every Raft entry costs the three nodes about the same fixed work whatever it holds (a log
//! record, an AppendEntries per follower, an apply and an answer on each node, and the task
//! wake-ups between them). [`SendStream`](crate::service::stream) already puts the messages
//! of one stream that arrive together into one entry, but each stream's groups stay entries
//! of their own: four producers with 64 sends in flight each kept about five entries of ~47
//! messages in flight. Here, once `max-group-proposals` entries of groups are being stored, a
//! group from a *different* source waits: it joins the oldest waiting group that has room
//! (`max-batch-messages`, `max-batch-bytes`; topics mix, as in a `SendBatch`), and when a
//! slot frees the oldest waiting group goes out as one entry.
//!
//! A source is a SendStream, or one client connection's unary requests (`Send`, `SendBatch`,
//! RocketMQ's `SendMessage`: [`Pipeline::submit_shared`], source [`connection_source`]), each
//! request one group: its messages stay together in one entry, all stored or none. Many
//! producers of small unary requests (a RocketMQ client sends one per message) made an entry
//! each before; merged, they share the fixed cost of an entry.
//!
//! Unless groups already wait (they go first, below), nothing waits while the load is light,
//! because waiting then only adds a round to a send's latency and leaves the nodes idle
//! between rounds:
//! - below the limit, so a single send is proposed at once;
//! - while the entries being stored hold fewer than [`MERGE_MIN_RUNNING_MESSAGES`] messages
//!   (four producers of one send in flight each lost 10% of their rate waiting, for two
//!   messages per entry);
//! - for a source whose own groups are all that is being stored, while they hold fewer than
//!   [`LONE_MERGE_RUNNING_MESSAGES`] messages: a lone producer of a few sends in flight is
//!   bound by its latency, not by the nodes' CPU (one producer of 64 in flight: 10% fewer
//!   messages/s when it waited). One with thousands in flight (64 batches of 32) is bound by
//!   the CPU, and its groups merge like different sources' do.
//!
//! Waiting groups go first (FIFO): a group arriving while any waits joins or queues behind
//! them. A waiting group that reaches [`FULL_MESSAGES`] (or [`FULL_BYTES`]) goes out at once,
//! beside the running entries: big enough, it gains nothing by waiting, and its round
//! overlaps theirs.
//!
//! Each group keeps the answer it would get alone: its share of the entry's acks, or the same
//! unknown outcome as the others, or, when the merged entry stored nothing (refused before
//! the proposal or by apply, perhaps for another producer's message: a queue id out of
//! range, a deleted topic), its own messages back, which the caller stores again as an entry
//! of their own ([`super::Pipeline::submit_group`]): one producer's bad message does not
//! send the others' one by one.
//!
//! Invariant: `running` counts the entries being stored (inline by their first caller or by
//! a runner task); a slot is handed to the oldest waiting group or released when its store
//! ends, also when the caller's future is dropped midway (the [`Slot`] guard), so no slot
//! leaks, and a group waits only while at least one entry is being stored (whose end hands
//! its slot on).

use std::collections::HashMap;
use std::collections::VecDeque;
use std::hash::DefaultHasher;
use std::hash::Hash;
use std::hash::Hasher;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::sync::MutexGuard;

use raftmq_store::limits::message_bytes;
use raftmq_store::MessageAck;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::batch::SubmitBatch;
use super::Failed;
use super::Pipeline;
use super::Sent;
use crate::error::NodeError;

/// What a group's store attempt gave: the entry, or the failure with the group's own
/// messages back when nothing was stored.
pub(super) type Stored = Result<Sent, Failed>;

/// A waiting group's answer: [`Stored`], and whether its entry held its messages alone.
pub(super) type Answer = (Stored, bool);

/// Who submits groups: one id per SendStream (see [`Coalescer::new_source`]), or per client
/// connection of unary requests ([`connection_source`]).
pub type Source = u64;

/// The source of the unary requests that arrive on the client connection from `remote`: a
/// producer's own requests never wait for each other, as a SendStream's groups do not.
/// Requests whose connection is unknown share one source, so they never wait for each other
/// either (as do two connections whose addresses hash alike). Disjoint from the SendStream
/// ids, which count up from 1.
pub fn connection_source(remote: Option<SocketAddr>) -> Source {
    const CONNECTION: Source = 1 << 63;
    remote.map_or(CONNECTION, |addr| {
        let mut h = DefaultHasher::new();
        addr.hash(&mut h);
        CONNECTION | (h.finish() >> 1)
    })
}

/// Below this many messages in the entries being stored the node is taken as lightly loaded
/// and nothing waits: with four producers of one send in flight each, waiting for the
/// running entry cost 10% of the rate and merged only two messages per entry.
const MERGE_MIN_RUNNING_MESSAGES: usize = 32;

/// A waiting group this big (messages, or bytes as `max-batch-bytes` counts them) goes out at
/// once, whatever the slots: its entry's fixed cost is small beside its messages, and its
/// round overlaps the running entries' instead of following them. With one merged entry under
/// way at a time the leader and the followers waited for each other (20-24% of the machine
/// idle at 4 x 64, 105-124 messages per entry); full at 128 messages, 85-88 per entry and
/// 15-17% idle ran 1-12% faster (64: 59 per entry, 192: 103-109, both slower).
const FULL_MESSAGES: usize = 128;
const FULL_BYTES: usize = 256 << 10;

/// A source whose own entries being stored hold this many messages waits and merges its next
/// groups like another source's would: far above a latency-bound producer's window (one
/// producer of 64 sends in flight lost 10% waiting). One producer of 64 batches of 32 in
/// flight made an entry per batch; merged, 115 messages per entry ran 1.00-1.12 x the rate
/// with a p99 of 21-28 ms against 31-40 (the CPU per message unchanged).
const LONE_MERGE_RUNNING_MESSAGES: usize = 256;

/// The shared proposal slots of one node (see the module docs).
pub struct Coalescer {
    /// `max-group-proposals`: entries of groups stored at once before other sources wait; 0
    /// turns merging off.
    slots: usize,
    /// Bounds of one merged entry: `max-batch-messages`, `max-batch-bytes`.
    max_messages: usize,
    max_bytes: usize,
    /// [`MERGE_MIN_RUNNING_MESSAGES`] and [`FULL_MESSAGES`] (tests set their own).
    min_running_messages: usize,
    full_messages: usize,
    /// The last source id handed out.
    sources: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Entries being stored now.
    running: usize,
    /// Messages in them.
    running_messages: usize,
    /// Of those, how many hold the groups of one source only, by source.
    solo: HashMap<Source, usize>,
    /// Merged groups waiting for a slot, oldest first.
    waiting: VecDeque<Waiting>,
}

/// Groups merged into one entry-to-be, each with the channel its answer goes to.
struct Waiting {
    batch: SubmitBatch,
    /// Size of `batch` as `max-batch-bytes` counts it.
    bytes: usize,
    shares: Vec<Share>,
}

/// One submitted group's part of a merged entry.
struct Share {
    source: Source,
    /// Its messages: the next `len` of the entry's.
    len: usize,
    arrived: Instant,
    sends: usize,
    answer: oneshot::Sender<Answer>,
}

/// What [`Coalescer::enter`] decided for a group.
pub(super) enum Entered {
    /// A slot was taken for the group: store it now, holding the slot as a [`Slot`] made of
    /// the [`Running`] entry (dropping it hands the slot on).
    Run(SubmitBatch, Running),
    /// The group waits (merged with others); its answer comes here. With a [`Launch`], the
    /// merged group it joined is full and goes out now: the caller starts it
    /// ([`launch`]).
    Wait(oneshot::Receiver<Answer>, Option<Launch>),
}

/// A merged group that took a slot, to be stored on a task of its own.
pub(super) struct Launch {
    waiting: Waiting,
    running: Running,
}

/// An entry being stored: whose groups it holds, and how many messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Running {
    holder: Holder,
    messages: usize,
}

/// Whose groups an entry being stored holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holder {
    /// One source's only.
    Solo(Source),
    /// Several sources'.
    Mixed,
}

/// A held proposal slot. Dropping it hands the slot to the oldest waiting group (stored on a
/// task of its own) or frees it.
pub(super) struct Slot {
    pipeline: Pipeline,
    running: Running,
}

impl Coalescer {
    /// `slots` concurrent group entries before other sources wait (0: never wait), merging
    /// up to `max_messages` messages and `max_bytes` bytes into one entry.
    pub fn new(slots: usize, max_messages: usize, max_bytes: usize) -> Self {
        Self {
            slots,
            max_messages: max_messages.max(1),
            max_bytes,
            min_running_messages: MERGE_MIN_RUNNING_MESSAGES,
            full_messages: FULL_MESSAGES,
            sources: AtomicU64::new(0),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new source id (one per SendStream).
    pub fn new_source(&self) -> Source {
        self.sources.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Takes a slot for `group` of `source`, or queues it (merged into the oldest waiting
    /// group with room). See the module docs for when it waits.
    pub(super) fn enter(&self, source: Source, group: SubmitBatch) -> Entered {
        let mut st = self.lock();
        let own = st.solo.get(&source).copied().unwrap_or(0);
        let free = self.slots == 0
            || st.running < self.slots
            || (st.running == own && st.running_messages < LONE_MERGE_RUNNING_MESSAGES)
            || st.running_messages < self.min_running_messages;
        if free && st.waiting.is_empty() {
            let running = Running {
                holder: Holder::Solo(source),
                messages: group.len(),
            };
            st.start(running);
            return Entered::Run(group, running);
        }
        let (tx, rx) = oneshot::channel();
        let bytes: usize = group.messages().iter().map(message_bytes).sum();
        let share = Share {
            source,
            len: group.len(),
            arrived: group.arrived,
            sends: group.sends,
            answer: tx,
        };
        let open = st.waiting.iter_mut().enumerate().find(|(_, w)| {
            w.batch.len() + group.len() <= self.max_messages && w.bytes + bytes <= self.max_bytes
        });
        let at = match open {
            Some((at, w)) => {
                w.batch.join(group);
                w.bytes += bytes;
                w.shares.push(share);
                at
            }
            None => {
                st.waiting.push_back(Waiting {
                    batch: group,
                    bytes,
                    shares: vec![share],
                });
                st.waiting.len() - 1
            }
        };
        let full = st
            .waiting
            .get(at)
            .is_some_and(|w| w.batch.len() >= self.full_messages || w.bytes >= FULL_BYTES);
        let launch = if full {
            let waiting = st.waiting.remove(at);
            waiting.map(|w| st.take_slot(w))
        } else {
            None
        };
        Entered::Wait(rx, launch)
    }

    /// Ends the store of the entry `done`: the oldest waiting group takes its slot (and is
    /// returned, to be stored), or the slot is freed.
    fn leave(&self, done: Running) -> Option<Launch> {
        let mut st = self.lock();
        st.finish(done);
        let next = st.waiting.pop_front()?;
        Some(st.take_slot(next))
    }
}

impl State {
    /// Starts `waiting` as an entry being stored.
    fn take_slot(&mut self, waiting: Waiting) -> Launch {
        let first = waiting.shares[0].source;
        let holder = if waiting.shares.iter().all(|s| s.source == first) {
            Holder::Solo(first)
        } else {
            Holder::Mixed
        };
        let running = Running {
            holder,
            messages: waiting.batch.len(),
        };
        self.start(running);
        Launch { waiting, running }
    }

    fn start(&mut self, r: Running) {
        self.running += 1;
        self.running_messages += r.messages;
        if let Holder::Solo(s) = r.holder {
            *self.solo.entry(s).or_insert(0) += 1;
        }
    }

    fn finish(&mut self, r: Running) {
        self.running = self.running.saturating_sub(1);
        self.running_messages = self.running_messages.saturating_sub(r.messages);
        if let Holder::Solo(s) = r.holder {
            if let Some(n) = self.solo.get_mut(&s) {
                *n -= 1;
                if *n == 0 {
                    self.solo.remove(&s);
                }
            }
        }
    }
}

impl Slot {
    /// The slot [`Entered::Run`] took.
    pub(super) fn held(pipeline: Pipeline, running: Running) -> Self {
        Self { pipeline, running }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(next) = self.pipeline.core().proposals.leave(self.running) {
            launch(self.pipeline.clone(), next);
        }
    }
}

/// Stores `first` on a task of its own, then, holding its slot, the oldest waiting group after
/// each entry, until none waits.
pub(super) fn launch(pipeline: Pipeline, first: Launch) {
    let run = async move {
        let mut next = Some(first);
        while let Some(Launch { waiting, running }) = next {
            let stored = pipeline.store(waiting.batch, true).await;
            answer(stored, waiting.shares);
            next = pipeline.core().proposals.leave(running);
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(run);
        }
        // Outside a runtime (a node's last handle dropped after its runtime): nothing can
        // store the waiting groups; their callers see their channels closed.
        Err(_) => drop(run),
    }
}

/// Sends each share its part of `stored` (see the module docs).
fn answer(stored: Stored, mut shares: Vec<Share>) {
    if shares.len() == 1 {
        if let Some(s) = shares.pop() {
            let _ = s.answer.send((stored, true));
        }
        return;
    }
    match stored {
        Ok(Sent { log_id, acks }) => {
            let mut acks = acks.into_iter();
            for s in shares {
                let part: Vec<MessageAck> = acks.by_ref().take(s.len).collect();
                let _ = s.answer.send((Ok(Sent { log_id, acks: part }), false));
            }
        }
        Err(Failed {
            error,
            unsent: Some(mut batch),
        }) => {
            for s in shares {
                let rest = batch.split_off(s.len.min(batch.len()));
                let mut own = std::mem::replace(&mut batch, rest);
                own.arrived = s.arrived;
                own.sends = s.sends;
                let failed = Failed {
                    error: copy_error(&error),
                    unsent: Some(own),
                };
                let _ = s.answer.send((Err(failed), false));
            }
        }
        Err(Failed {
            error,
            unsent: None,
        }) => {
            for s in shares {
                let failed = Failed {
                    error: copy_error(&error),
                    unsent: None,
                };
                let _ = s.answer.send((Err(failed), false));
            }
        }
    }
}

/// The same failure again for each group of a merged entry. An entry whose outcome is unknown
/// failed with one of the three variants kept exactly; a refusal (nothing stored: each group
/// is submitted again on its own, and this error is only logged) keeps its text.
fn copy_error(e: &NodeError) -> NodeError {
    match e {
        NodeError::Timeout(m) => NodeError::Timeout(m.clone()),
        NodeError::OutcomeUnknown(m) => NodeError::OutcomeUnknown(m.clone()),
        NodeError::Internal(m) => NodeError::Internal(m.clone()),
        other => NodeError::FailedPrecondition(other.to_string()),
    }
}

#[cfg(test)]
#[path = "coalesce_tests.rs"]
mod tests;
