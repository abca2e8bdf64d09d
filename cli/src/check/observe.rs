//! Checkers over status samples taken while the test ran: commit index monotonic per node, at
//! most one leader per term.

use std::collections::BTreeMap;

/// One `ClusterStatus` sample of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// When it was taken, microseconds since the run began.
    pub at_us: u64,
    /// The node that answered.
    pub node: u64,
    /// Its current term.
    pub term: u64,
    /// Whether it said it was leader.
    pub is_leader: bool,
    /// Its committed log index, if any.
    pub committed: Option<u64>,
    /// Whether the node restarted since the previous sample (its in-memory commit index may
    /// then restart from its durable value; that is not a regression of the cluster).
    pub restarted: bool,
}

/// What the samples show wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservationFindings {
    /// `(node, earlier committed, later committed, at_us)` where a node's commit index went
    /// backwards without a restart in between.
    pub commit_regressions: Vec<(u64, u64, u64, u64)>,
    /// `(term, [leaders])` for terms in which more than one node said it was leader.
    pub split_brain: Vec<(u64, Vec<u64>)>,
}

impl ObservationFindings {
    /// True when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.commit_regressions.is_empty() && self.split_brain.is_empty()
    }
}

/// Checks the samples, in any order.
pub fn observations(samples: &[Observation]) -> ObservationFindings {
    let mut sorted: Vec<Observation> = samples.to_vec();
    sorted.sort_by_key(|o| (o.node, o.at_us));
    let mut findings = ObservationFindings::default();

    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for o in &sorted {
        if o.restarted {
            last.remove(&o.node);
        }
        let Some(c) = o.committed else { continue };
        if let Some(&prev) = last.get(&o.node) {
            if c < prev {
                findings.commit_regressions.push((o.node, prev, c, o.at_us));
            }
        }
        let best = last.get(&o.node).map_or(c, |&p| p.max(c));
        last.insert(o.node, best);
    }

    let mut leaders: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for o in sorted.iter().filter(|o| o.is_leader) {
        let l = leaders.entry(o.term).or_default();
        if !l.contains(&o.node) {
            l.push(o.node);
        }
    }
    findings.split_brain = leaders.into_iter().filter(|(_, l)| l.len() > 1).collect();
    findings
}
