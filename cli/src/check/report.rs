//! All checkers in one report with a verdict.

use std::fmt;

use super::acks_match;
use super::contiguous;
use super::duplicates;
use super::identical;
use super::lost;
use super::never_sent;
use super::observations;
use super::order;
use super::replicas::AckMismatch;
use super::replicas::Divergence;
use super::replicas::Gap;
use super::retired;
use super::stream::Duplicates;
use super::stream::Lost;
use super::stream::NeverSent;
use super::stream::Reordered;
use super::History;
use super::Observation;
use super::ObservationFindings;
use super::Outcome;
use super::ReplicaRead;

/// Findings of every checker, and the counts of the history.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Distinct messages the producers tried to send.
    pub messages_sent: usize,
    /// Distinct messages acknowledged.
    pub acked: usize,
    /// Distinct messages whose every attempt failed definitely.
    pub failed: usize,
    /// Distinct messages never acknowledged with at least one unknown outcome.
    pub unknown: usize,
    /// Acknowledged messages missing, per replica.
    pub lost: Vec<Lost>,
    /// Acknowledged messages retention removed before the read, `(node, count)` (no failure).
    pub retired: Vec<(u64, usize)>,
    /// Messages read that were never sent.
    pub never_sent: Vec<NeverSent>,
    /// Messages stored twice.
    pub duplicates: Duplicates,
    /// Producer order violations.
    pub reordered: Vec<Reordered>,
    /// Offset gaps.
    pub gaps: Vec<Gap>,
    /// Replicas disagreeing.
    pub divergences: Vec<Divergence>,
    /// Acknowledgements not matching the stored message.
    pub ack_mismatches: Vec<AckMismatch>,
    /// Commit regressions and split brain.
    pub observed: ObservationFindings,
    /// The producers sent identified messages (producer id + sequence), which the broker
    /// deduplicates: then any duplicate, retried or not, violates exactly-once sends.
    /// [`check_all`] leaves it false; the caller sets it.
    pub exactly_once: bool,
}

impl Report {
    /// PASS: no invariant violated. Duplicates explained by a retry after an unknown outcome
    /// do not fail the run of at-least-once producers (the documented case); with
    /// `exactly_once` producers every duplicate fails it.
    pub fn is_pass(&self) -> bool {
        self.lost.is_empty()
            && self.never_sent.is_empty()
            && self.duplicates.unexplained.is_empty()
            && (!self.exactly_once || self.duplicates.retried_unknown.is_empty())
            && self.reordered.is_empty()
            && self.gaps.is_empty()
            && self.divergences.is_empty()
            && self.ack_mismatches.is_empty()
            && self.observed.is_clean()
    }
}

/// Runs every checker.
pub fn check_all(history: &History, replicas: &[ReplicaRead], samples: &[Observation]) -> Report {
    let by_tag = history.by_tag();
    let acked = by_tag
        .values()
        .filter(|a| a.iter().any(|x| matches!(x.outcome, Outcome::Acked { .. })))
        .count();
    let failed = by_tag
        .values()
        .filter(|a| a.iter().all(|x| x.outcome == Outcome::Failed))
        .count();
    Report {
        messages_sent: by_tag.len(),
        acked,
        failed,
        unknown: by_tag.len() - acked - failed,
        lost: lost(history, replicas),
        retired: retired(history, replicas),
        never_sent: never_sent(history, replicas),
        duplicates: duplicates(history, replicas),
        reordered: order(history, replicas),
        gaps: contiguous(replicas),
        divergences: identical(replicas),
        ack_mismatches: acks_match(history, replicas),
        observed: observations(samples),
        exactly_once: false,
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "messages: {} sent, {} acknowledged, {} failed, {} unknown",
            self.messages_sent, self.acked, self.failed, self.unknown
        )?;
        for l in &self.lost {
            writeln!(
                f,
                "LOST on node {}: {} acknowledged ({} prefix, {} middle = later messages of the producer survived, {} suffix); first: {:?}",
                l.node,
                l.total(),
                l.prefix.len(),
                l.middle.len(),
                l.suffix.len(),
                l.prefix.iter().chain(&l.middle).chain(&l.suffix).take(5).map(ToString::to_string).collect::<Vec<_>>()
            )?;
        }
        for (node, n) in &self.retired {
            writeln!(
                f,
                "retired by retention on node {node}: {n} acknowledged (below its queues' min offsets when read)"
            )?;
        }
        list(f, "NEVER SENT (node, queue, offset, tag)", &self.never_sent)?;
        match self.exactly_once {
            true => list(
                f,
                "DUPLICATES OF EXACTLY-ONCE SENDS (after a retried unknown outcome)",
                &self.duplicates.retried_unknown,
            )?,
            false => writeln!(
                f,
                "duplicates after a retried unknown outcome: {}",
                self.duplicates.retried_unknown.len()
            )?,
        }
        list(f, "UNEXPLAINED DUPLICATES", &self.duplicates.unexplained)?;
        list(f, "REORDERED (node, earlier, later)", &self.reordered)?;
        list(f, "OFFSET GAPS (node, queue, offset)", &self.gaps)?;
        list(
            f,
            "REPLICAS DIVERGE (queue, offset, [(node, id, digest)])",
            &self.divergences,
        )?;
        list(f, "ACK MISMATCH", &self.ack_mismatches)?;
        list(
            f,
            "COMMIT INDEX WENT BACKWARDS (node, from, to, at_us)",
            &self.observed.commit_regressions,
        )?;
        list(
            f,
            "TWO LEADERS IN ONE TERM (term, leaders)",
            &self.observed.split_brain,
        )?;
        write!(
            f,
            "verdict: {}",
            if self.is_pass() { "PASS" } else { "FAIL" }
        )
    }
}

fn list<T: fmt::Debug>(f: &mut fmt::Formatter<'_>, what: &str, items: &[T]) -> fmt::Result {
    if items.is_empty() {
        return Ok(());
    }
    writeln!(
        f,
        "{what}: {} (first: {:?})",
        items.len(),
        &items[..items.len().min(5)]
    )
}
