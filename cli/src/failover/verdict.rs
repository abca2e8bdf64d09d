//! From a finished run (history, replicas read back, status samples, faults) to the summary
//! the failover test prints: the checkers' [`Report`] plus failovers and recovery times.

use serde::Serialize;

use crate::check::check_all;
use crate::check::History;
use crate::check::Observation;
use crate::check::ReplicaRead;
use crate::check::Report;

/// One injected fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// When, microseconds since the run began.
    pub at_us: u64,
    /// kill | stop | transfer.
    pub action: String,
    /// The node hit (for transfer: the old leader).
    pub node: u64,
    /// Whether it was the leader.
    pub was_leader: bool,
    /// The leader's term when the fault was injected.
    pub term: u64,
}

/// An acknowledged send: when it finished and the Raft term of its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckTerm {
    /// Microseconds since the run began.
    pub finished_us: u64,
    /// Term of the entry's log id.
    pub term: u64,
}

/// What `failover-test` prints (and `--json` emits).
#[derive(Clone, Debug, Serialize)]
pub struct FailoverSummary {
    /// Fault mode.
    pub mode: String,
    /// Distinct messages the producers tried to send.
    pub sent: usize,
    /// Distinct messages acknowledged.
    pub acknowledged: usize,
    /// Distinct messages that failed definitely.
    pub failed: usize,
    /// Distinct messages with an unknown outcome, never acknowledged.
    pub unknown: usize,
    /// Faults injected.
    pub faults: usize,
    /// Every fault, in order.
    pub fault_log: Vec<Fault>,
    /// Leader faults after which a later-term entry was acknowledged.
    pub failovers: usize,
    /// Per leader fault: ms until the first acknowledged send of a later term.
    pub recovery_ms: Vec<u64>,
    /// Median of `recovery_ms`.
    pub recovery_ms_p50: Option<u64>,
    /// Maximum of `recovery_ms`.
    pub recovery_ms_max: Option<u64>,
    /// Acknowledged messages missing, summed over replicas.
    pub lost: usize,
    /// Lost messages whose producer's later messages were read (middle of the stream).
    pub lost_with_later_read: usize,
    /// Acknowledged messages retention removed before they were read (below their queue's
    /// min offset), summed over replicas: not a loss.
    pub retired: usize,
    /// Messages read that were never sent.
    pub never_sent: usize,
    /// Whether the producers sent identified messages (exactly once): then every duplicate
    /// fails the run.
    pub exactly_once: bool,
    /// Messages stored more than once (retried or not).
    pub duplicates: usize,
    /// Duplicates explained by a retry after an unknown outcome.
    pub duplicates_after_retry: usize,
    /// Duplicates without such a retry.
    pub duplicates_unexplained: usize,
    /// Producer order violations.
    pub reordered: usize,
    /// Queue offset gaps.
    pub gaps: usize,
    /// Positions where replicas differ.
    pub divergences: usize,
    /// Acknowledgements not matching the stored message.
    pub ack_mismatches: usize,
    /// Commit index regressions observed.
    pub commit_regressions: usize,
    /// Terms with two leaders observed.
    pub split_brain: usize,
    /// PASS or FAIL.
    pub verdict: String,
    /// The checkers' full text.
    #[serde(skip)]
    pub report_text: String,
}

/// Milliseconds from each leader fault to the first acknowledgement of an entry whose term is
/// later than the leader's term at the fault (i.e. written by a new leader).
pub fn recovery_times(faults: &[Fault], acks: &[AckTerm]) -> Vec<u64> {
    faults
        .iter()
        .filter(|f| f.was_leader)
        .filter_map(|f| {
            acks.iter()
                .filter(|a| a.finished_us >= f.at_us && a.term > f.term)
                .map(|a| (a.finished_us - f.at_us) / 1000)
                .min()
        })
        .collect()
}

/// Runs every checker and assembles the summary.
pub fn summarize(
    mode: &str,
    history: &History,
    replicas: &[ReplicaRead],
    samples: &[Observation],
    faults: &[Fault],
    acks: &[AckTerm],
    exactly_once: bool,
) -> FailoverSummary {
    let mut report: Report = check_all(history, replicas, samples);
    report.exactly_once = exactly_once;
    let mut recovery = recovery_times(faults, acks);
    let failovers = recovery.len();
    recovery.sort_unstable();
    let p50 = (!recovery.is_empty()).then(|| recovery[(recovery.len() - 1) / 2]);
    FailoverSummary {
        mode: mode.to_string(),
        sent: report.messages_sent,
        acknowledged: report.acked,
        failed: report.failed,
        unknown: report.unknown,
        faults: faults.len(),
        fault_log: faults.to_vec(),
        failovers,
        recovery_ms_p50: p50,
        recovery_ms_max: recovery.last().copied(),
        recovery_ms: recovery,
        lost: report.lost.iter().map(|l| l.total()).sum(),
        lost_with_later_read: report
            .lost
            .iter()
            .map(|l| l.middle.len() + l.prefix.len())
            .sum(),
        retired: report.retired.iter().map(|r| r.1).sum(),
        never_sent: report.never_sent.len(),
        exactly_once,
        duplicates: report.duplicates.total(),
        duplicates_after_retry: report.duplicates.retried_unknown.len(),
        duplicates_unexplained: report.duplicates.unexplained.len(),
        reordered: report.reordered.len(),
        gaps: report.gaps.len(),
        divergences: report.divergences.len(),
        ack_mismatches: report.ack_mismatches.len(),
        commit_regressions: report.observed.commit_regressions.len(),
        split_brain: report.observed.split_brain.len(),
        verdict: if report.is_pass() { "PASS" } else { "FAIL" }.to_string(),
        report_text: report.to_string(),
    }
}

impl FailoverSummary {
    /// True when every invariant held.
    pub fn is_pass(&self) -> bool {
        self.verdict == "PASS"
    }

    /// The human text; its last line is the verdict.
    pub fn render(&self) -> String {
        let ms = |v: Option<u64>| v.map_or_else(|| "-".into(), |v| format!("{v} ms"));
        format!(
            "mode {}: {} faults injected, {} failovers; leader fault -> next acknowledged send: \
             p50 {}, max {}\n{}",
            self.mode,
            self.faults,
            self.failovers,
            ms(self.recovery_ms_p50),
            ms(self.recovery_ms_max),
            self.report_text
        )
    }
}
