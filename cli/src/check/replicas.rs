//! Checkers across replicas: contiguous offsets, identical content, acknowledgements matching.

use std::collections::BTreeMap;

use super::History;
use super::Outcome;
use super::ReplicaRead;

/// A queue on one replica whose offsets are not contiguous: `(node, queue, first missing
/// offset)`; an offset read past the reported max, or in a queue without a reported range,
/// counts too.
pub type Gap = (u64, u32, u64);

/// Each replica's queues hold every offset from their min to their max, and nothing past the
/// max. Offsets below the min were read before retention raised it (the reader pulls from the
/// min it was told, and retention may move it meanwhile): they are not gaps.
pub fn contiguous(replicas: &[ReplicaRead]) -> Vec<Gap> {
    let mut out = Vec::new();
    for r in replicas {
        let mut by_queue: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for m in &r.messages {
            by_queue.entry(m.queue_id).or_default().push(m.queue_offset);
        }
        for (&queue, &(min, max)) in &r.ranges {
            let mut offsets = by_queue.remove(&queue).unwrap_or_default();
            offsets.retain(|&o| o >= min);
            offsets.sort_unstable();
            offsets.dedup();
            let mut expect = min;
            for &o in &offsets {
                if o != expect {
                    out.push((r.node, queue, expect.min(o)));
                    break;
                }
                expect += 1;
            }
            let ran_through = offsets.len() as u64 == expect - min;
            if ran_through && expect != max {
                // Short of the reported max (missing tail) or past it (read beyond the range).
                out.push((r.node, queue, expect.min(max)));
            }
        }
        for (queue, offsets) in by_queue {
            if let Some(&o) = offsets.first() {
                out.push((r.node, queue, o));
            }
        }
    }
    out
}

/// Replicas disagreeing at one position: `(queue, offset, [(node, msg_id, digest)])`.
pub type Divergence = (u32, u64, Vec<Holder>);

/// One replica's message at a position: `(node, msg_id, digest)`.
pub type Holder = (u64, u64, u64);

/// Every replica holding a queue offset holds the same message there (same message id and
/// digest); a replica whose range covers the offset but lacks it also diverges.
pub fn identical(replicas: &[ReplicaRead]) -> Vec<Divergence> {
    let mut at: BTreeMap<(u32, u64), Vec<Holder>> = BTreeMap::new();
    for r in replicas {
        for m in &r.messages {
            at.entry((m.queue_id, m.queue_offset))
                .or_default()
                .push((r.node, m.msg_id, m.digest));
        }
    }
    let mut out = Vec::new();
    for ((queue, offset), holders) in at {
        let same = holders
            .windows(2)
            .all(|w| (w[0].1, w[0].2) == (w[1].1, w[1].2));
        let missing = replicas.iter().any(|r| {
            let covers = r
                .ranges
                .get(&queue)
                .is_some_and(|&(min, max)| (min..max).contains(&offset));
            covers && !holders.iter().any(|h| h.0 == r.node)
        });
        if !same || missing {
            out.push((queue, offset, holders));
        }
    }
    out
}

/// An acknowledgement that does not match the stored message: `(tag, node, why)`.
pub type AckMismatch = (super::MessageTag, u64, String);

/// Every acknowledged message is stored on each replica at the queue, offset and message id
/// its acknowledgement named (a replica that lacks it is reported by [`super::lost`] instead).
pub fn acks_match(history: &History, replicas: &[ReplicaRead]) -> Vec<AckMismatch> {
    let mut out = Vec::new();
    for r in replicas {
        let mut by_position = BTreeMap::new();
        for m in &r.messages {
            by_position.insert((m.queue_id, m.queue_offset), m);
        }
        let positions = r.positions();
        for (tag, attempt) in history.acked() {
            let Outcome::Acked {
                queue_id,
                queue_offset,
                msg_id,
            } = attempt.outcome
            else {
                continue;
            };
            if !positions.contains_key(&tag) {
                continue;
            }
            match by_position.get(&(queue_id, queue_offset)) {
                Some(m) if m.tag == Some(tag) && m.msg_id == msg_id => {}
                Some(m) => out.push((
                    tag,
                    r.node,
                    format!(
                        "acked at queue {queue_id} offset {queue_offset} id {msg_id}, found {:?} id {} there",
                        m.tag, m.msg_id
                    ),
                )),
                None => out.push((
                    tag,
                    r.node,
                    format!("acked at queue {queue_id} offset {queue_offset}, nothing stored there"),
                )),
            }
        }
    }
    out
}
