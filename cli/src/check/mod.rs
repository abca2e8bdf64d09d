//! Invariant checkers for a send history against what the replicas hold.
//!
//! The failover test (`raftmq failover-test`) and the `cluster-tests` scenarios both record every
//! send attempt ([`History`]) and afterwards read every queue back from every node
//! ([`ReplicaRead`]). Each checker here tests one invariant of the broker's promise and returns
//! its findings; [`check_all`] runs them all into one [`Report`]:
//!
//! - [`lost`]: every acknowledged message is on every replica (lost ones are split into prefix,
//!   middle and suffix of their producer's stream, as Jepsen's queue checker does), unless
//!   retention removed it ([`retired`]: below the min offset its queue reported, counted apart);
//! - [`never_sent`]: nothing is read that no producer sent;
//! - [`duplicates`]: a message is stored at most once, except where its producer retried after
//!   an unknown outcome (counted separately, since that is the documented at-least-once case);
//! - [`order`]: a producer's message acknowledged before it sent the next one to the same queue
//!   sits at a lower queue offset;
//! - [`contiguous`]: each replica's queue offsets run without gaps from min to max (the last min
//!   it reported: retention may raise it while the queue is read);
//! - [`identical`]: every replica has the same message (id and content digest) at each offset;
//! - [`acks_match`]: each acknowledgement's queue, offset and message id are where it was read;
//! - [`observations`]: the commit index never goes backwards on a node and no term has two leaders.
//!
//! [`read::read_replica`] reads one node's queues into a [`ReplicaRead`].
//!
//! Messages are identified by a [`MessageTag`] (producer id and sequence number) that the
//! producer writes into each message; the checkers never trust message ids alone.

mod observe;
pub mod read;
mod replicas;
mod report;
mod stream;

pub use observe::observations;
pub use observe::Observation;
pub use observe::ObservationFindings;
pub use replicas::acks_match;
pub use replicas::contiguous;
pub use replicas::identical;
pub use report::check_all;
pub use report::Report;
pub use stream::duplicates;
pub use stream::lost;
pub use stream::never_sent;
pub use stream::order;
pub use stream::retired;

use std::collections::BTreeMap;

/// A producer's identity in a test run.
pub type ProducerId = u32;

/// Identity of one logical message: which producer sent it, and its sequence number in that
/// producer's stream. Retries of one message keep its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageTag {
    /// The producer that sent it.
    pub producer: ProducerId,
    /// Position in the producer's stream, from 0, increasing by one per logical message.
    pub seq: u64,
}

impl std::fmt::Display for MessageTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{}#{}", self.producer, self.seq)
    }
}

/// What one send attempt ended with, as the producer saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Quorum-acknowledged, with where the broker says it put the message.
    Acked {
        /// Queue the message went to.
        queue_id: u32,
        /// Its offset in that queue.
        queue_offset: u64,
        /// Its message id (physical offset in the CommitLog).
        msg_id: u64,
    },
    /// A definite failure: the broker said the message was not written.
    Failed,
    /// The outcome is unknown (timeout, connection lost after the request went out).
    Unknown,
}

/// One send attempt of a logical message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// Which message.
    pub tag: MessageTag,
    /// 1 for the first try, 2 for the first retry, ...
    pub attempt: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// When the attempt started, in microseconds since the run began.
    pub started_us: u64,
    /// When its outcome was known, in microseconds since the run began.
    pub finished_us: u64,
}

/// Every send attempt of a run, in any order.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// The attempts.
    pub attempts: Vec<Attempt>,
}

impl History {
    /// Records one attempt.
    pub fn push(&mut self, attempt: Attempt) {
        self.attempts.push(attempt);
    }

    /// Every attempt per message tag, in attempt order.
    pub fn by_tag(&self) -> BTreeMap<MessageTag, Vec<Attempt>> {
        let mut map: BTreeMap<MessageTag, Vec<Attempt>> = BTreeMap::new();
        for a in &self.attempts {
            map.entry(a.tag).or_default().push(*a);
        }
        for attempts in map.values_mut() {
            attempts.sort_by_key(|a| a.attempt);
        }
        map
    }

    /// The acknowledged attempt of each message that was acknowledged at least once.
    pub fn acked(&self) -> BTreeMap<MessageTag, Attempt> {
        let mut map = BTreeMap::new();
        for a in &self.attempts {
            if matches!(a.outcome, Outcome::Acked { .. }) {
                map.entry(a.tag).or_insert(*a);
            }
        }
        map
    }
}

/// A message as read back from one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its queue.
    pub queue_id: u32,
    /// Its offset in the queue.
    pub queue_offset: u64,
    /// Its message id (physical offset).
    pub msg_id: u64,
    /// The tag parsed from the message, `None` if the message carries none (never sent by a
    /// test producer).
    pub tag: Option<MessageTag>,
    /// A digest of the body and properties, to compare replicas byte for byte.
    pub digest: u64,
}

/// Everything one node returned for the topic under test.
#[derive(Clone, Debug, Default)]
pub struct ReplicaRead {
    /// The node read from.
    pub node: u64,
    /// Per queue: `(min_offset, max_offset)` as the node last reported them (`max` is the next
    /// offset to be written; `min` rises when retention removes a queue's oldest messages).
    pub ranges: BTreeMap<u32, (u64, u64)>,
    /// The messages read, from `min` to `max` of each queue (and any read below a `min` that
    /// rose while the queue was read).
    pub messages: Vec<StoredMessage>,
}

impl ReplicaRead {
    /// Positions of each tag on this replica: `tag -> [(queue, offset)]`.
    pub fn positions(&self) -> BTreeMap<MessageTag, Vec<(u32, u64)>> {
        let mut map: BTreeMap<MessageTag, Vec<(u32, u64)>> = BTreeMap::new();
        for m in &self.messages {
            if let Some(tag) = m.tag {
                map.entry(tag)
                    .or_default()
                    .push((m.queue_id, m.queue_offset));
            }
        }
        map
    }
}

#[cfg(test)]
mod check_tests;
