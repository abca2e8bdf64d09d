//! Checkers over each producer's stream: lost, never sent, duplicated, reordered messages.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use super::Attempt;
use super::History;
use super::MessageTag;
use super::Outcome;
use super::ReplicaRead;

/// Acknowledged messages missing from one replica, by where they sit in their producer's
/// stream relative to the messages of that producer the replica does hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// The replica.
    pub node: u64,
    /// Lost before the first message of the producer that was read.
    pub prefix: Vec<MessageTag>,
    /// Lost between read messages of the same producer (later messages survived).
    pub middle: Vec<MessageTag>,
    /// Lost after the last read message of the producer (or the producer has none read).
    pub suffix: Vec<MessageTag>,
}

impl Lost {
    /// Total lost messages on this replica.
    pub fn total(&self) -> usize {
        self.prefix.len() + self.middle.len() + self.suffix.len()
    }
}

/// Acknowledged messages missing from each replica (one entry per replica that lost any),
/// except those [`retired`] by retention.
pub fn lost(history: &History, replicas: &[ReplicaRead]) -> Vec<Lost> {
    let acked = history.acked();
    let mut out = Vec::new();
    for replica in replicas {
        let read = read_tags(replica);
        let mut lost = Lost {
            node: replica.node,
            ..Lost::default()
        };
        let missing = acked
            .iter()
            .filter(|(t, a)| !read.contains(t) && !below_min(replica, a));
        for (tag, _) in missing {
            let before = read.range(first_of(tag.producer)..*tag).next().is_some();
            let after = read.range(*tag..=last_of(tag.producer)).next().is_some();
            match (before, after) {
                (false, true) => lost.prefix.push(*tag),
                (true, true) => lost.middle.push(*tag),
                _ => lost.suffix.push(*tag),
            }
        }
        if lost.total() > 0 {
            out.push(lost);
        }
    }
    out
}

/// Acknowledged messages a replica no longer holds because retention removed them: missing
/// there, at an offset below the min its queue reported (`(node, count)`, one per replica with
/// any). Retention removes only the oldest messages of a queue, so these are not losses; a run
/// shorter than the retention time, with the disk below `disk-clean-ratio`, has none.
pub fn retired(history: &History, replicas: &[ReplicaRead]) -> Vec<(u64, usize)> {
    let acked = history.acked();
    replicas
        .iter()
        .filter_map(|replica| {
            let read = read_tags(replica);
            let n = acked
                .iter()
                .filter(|(t, a)| !read.contains(t) && below_min(replica, a))
                .count();
            (n > 0).then_some((replica.node, n))
        })
        .collect()
}

/// The tags of the messages read from `replica`.
fn read_tags(replica: &ReplicaRead) -> BTreeSet<MessageTag> {
    replica.messages.iter().filter_map(|m| m.tag).collect()
}

/// Whether `a` was acknowledged at an offset below the min `replica` reported for its queue.
fn below_min(replica: &ReplicaRead, a: &Attempt) -> bool {
    let Outcome::Acked {
        queue_id,
        queue_offset,
        ..
    } = a.outcome
    else {
        return false;
    };
    replica
        .ranges
        .get(&queue_id)
        .is_some_and(|&(min, _)| queue_offset < min)
}

fn first_of(producer: u32) -> MessageTag {
    MessageTag { producer, seq: 0 }
}

fn last_of(producer: u32) -> MessageTag {
    MessageTag {
        producer,
        seq: u64::MAX,
    }
}

/// A message read that no producer sent: `(node, queue, offset, tag)`; `tag` is `None` when the
/// message carries no parsable tag at all.
pub type NeverSent = (u64, u32, u64, Option<MessageTag>);

/// Messages read on any replica that were never sent.
pub fn never_sent(history: &History, replicas: &[ReplicaRead]) -> Vec<NeverSent> {
    let sent: BTreeSet<MessageTag> = history.attempts.iter().map(|a| a.tag).collect();
    let mut out = Vec::new();
    for r in replicas {
        for m in &r.messages {
            let known = m.tag.is_some_and(|t| sent.contains(&t));
            if !known {
                out.push((r.node, m.queue_id, m.queue_offset, m.tag));
            }
        }
    }
    out
}

/// Messages stored more than once on one replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Duplicates {
    /// Duplicated because the producer retried after an attempt with an unknown outcome: the
    /// documented at-least-once case.
    pub retried_unknown: Vec<MessageTag>,
    /// Duplicated with no retry after an unknown outcome to explain it: a defect.
    pub unexplained: Vec<MessageTag>,
}

impl Duplicates {
    /// Every duplicated message, explained or not.
    pub fn total(&self) -> usize {
        self.retried_unknown.len() + self.unexplained.len()
    }
}

/// Messages that appear at more than one queue position on any replica.
pub fn duplicates(history: &History, replicas: &[ReplicaRead]) -> Duplicates {
    let by_tag = history.by_tag();
    let mut seen = BTreeSet::new();
    let mut out = Duplicates::default();
    for r in replicas {
        for (tag, positions) in r.positions() {
            if positions.len() < 2 || !seen.insert(tag) {
                continue;
            }
            let explained = by_tag.get(&tag).is_some_and(|a| retried_after_unknown(a));
            if explained {
                out.retried_unknown.push(tag);
            } else {
                out.unexplained.push(tag);
            }
        }
    }
    out
}

fn retried_after_unknown(attempts: &[Attempt]) -> bool {
    let first_unknown = attempts.iter().position(|a| a.outcome == Outcome::Unknown);
    first_unknown.is_some_and(|i| i + 1 < attempts.len())
}

/// A pair of messages of one producer stored in the wrong order: `(node, earlier, later)`
/// where `earlier` was acknowledged before `later` was first sent, to the same queue, yet
/// `later` sits at a lower offset.
pub type Reordered = (u64, MessageTag, MessageTag);

/// `(acked_us, queue_offset, tag)` of one acknowledged message.
type AckedAt = (u64, u64, MessageTag);

/// Per-producer order: within one queue, a message acknowledged before the producer started
/// the next one sits at a lower offset.
pub fn order(history: &History, replicas: &[ReplicaRead]) -> Vec<Reordered> {
    let acked = history.acked();
    let first_start: BTreeMap<MessageTag, u64> = history
        .by_tag()
        .into_iter()
        .map(|(t, a)| (t, a[0].started_us))
        .collect();
    let mut out = Vec::new();
    for r in replicas {
        let positions = r.positions();
        // Per (producer, queue): acked messages in ack-time order with their read offset.
        let mut streams: BTreeMap<(u32, u32), Vec<AckedAt>> = BTreeMap::new();
        for (tag, attempt) in &acked {
            let Some(&(queue, offset)) = positions.get(tag).and_then(|p| p.first()) else {
                continue;
            };
            streams.entry((tag.producer, queue)).or_default().push((
                attempt.finished_us,
                offset,
                *tag,
            ));
        }
        for stream in streams.values_mut() {
            // Sorted by ack time; prefix_max[i] = the highest-offset message among the first i+1.
            stream.sort();
            let mut prefix_max: Vec<(u64, MessageTag)> = Vec::with_capacity(stream.len());
            for &(_, offset, tag) in stream.iter() {
                let best = match prefix_max.last() {
                    Some(&(o, t)) if o > offset => (o, t),
                    _ => (offset, tag),
                };
                prefix_max.push(best);
            }
            for &(_, offset, tag) in stream.iter() {
                let started = first_start.get(&tag).copied().unwrap_or(0);
                // Messages acknowledged strictly before this one was first sent.
                let n = stream.partition_point(|&(acked_us, _, _)| acked_us < started);
                if n == 0 {
                    continue;
                }
                let (max_offset, prev) = prefix_max[n - 1];
                if max_offset > offset {
                    out.push((r.node, prev, tag));
                }
            }
        }
    }
    out
}
