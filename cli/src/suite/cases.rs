//! The cases of `raftmq bench suite` (issue 14's table): their names, their loads and the
//! peer figures (NATS JetStream R3) targets 1 to 3 are relative to.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::bench::load::ProduceLoad;

/// Body size of every case, bytes.
pub const BODY_BYTES: usize = 1024;

/// Topic every case sends to.
pub const TOPIC: &str = "bench";

/// One case of the suite, each on a fresh cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Case {
    /// One producer, 1 send in flight (target 1).
    Single,
    /// One connection, 64 sends in flight (target 2).
    InFlight64,
    /// Four connections of 64 in flight (targets 3 and 6).
    FourBy64,
    /// SendBatch of 32 x 1 KiB, 64 in flight on one connection (targets 4 and 6).
    Batch32,
    /// Four connections of 64 in flight, every node `async` (target 5).
    Async,
    /// Produce 4 x 64, then pull everything from a follower (target 7).
    ConsumeFollower,
}

impl Case {
    /// Every case, in the order the suite runs them.
    pub const ALL: [Case; 6] = [
        Case::Single,
        Case::InFlight64,
        Case::FourBy64,
        Case::Batch32,
        Case::Async,
        Case::ConsumeFollower,
    ];

    /// The name `--cases` takes and the table shows.
    pub fn name(self) -> &'static str {
        match self {
            Case::Single => "single",
            Case::InFlight64 => "in-flight-64",
            Case::FourBy64 => "four-by-64",
            Case::Batch32 => "batch-32",
            Case::Async => "async",
            Case::ConsumeFollower => "consume-follower",
        }
    }

    /// Flush policy of every node.
    pub fn flush(self) -> &'static str {
        match self {
            Case::Async => "async",
            _ => "sync",
        }
    }

    /// Whether the leader's anonymous memory is sampled (target 6).
    pub fn samples_memory(self) -> bool {
        matches!(self, Case::FourBy64 | Case::Batch32)
    }

    /// The produce load of the case (for `consume-follower`: the fill before the pull).
    pub fn load(self, duration: Duration) -> ProduceLoad {
        let (producers, in_flight, batch) = match self {
            Case::Single => (1, 1, 1),
            Case::InFlight64 => (1, 64, 1),
            Case::Batch32 => (1, 64, 32),
            Case::FourBy64 | Case::Async | Case::ConsumeFollower => (4, 64, 1),
        };
        ProduceLoad {
            producers,
            in_flight,
            size: BODY_BYTES,
            batch,
            duration: Some(duration),
            count: None,
            topic: TOPIC.to_string(),
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Case {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for Case {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Case::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Case::ALL.iter().map(|c| c.name()).collect();
                format!("unknown case {s:?}; the cases are {}", names.join(", "))
            })
    }
}

/// NATS JetStream R3 rates (msg/s) for the cases targets 1 to 3 compare with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerFigures {
    /// One producer, 1 in flight.
    pub single: f64,
    /// 64 in flight, one connection.
    pub in_flight_64: f64,
    /// 4 x 64 in flight.
    pub four_by_64: f64,
    /// Where the figures come from.
    pub source: String,
}

impl PeerFigures {
    /// Issue 14's NATS JetStream R3 figures (upper end of each measured range), used when no
    /// `--nats-figures` are given: a reference from another run, not this machine now.
    pub fn issue_reference() -> Self {
        Self {
            single: 2158.0,
            in_flight_64: 13_700.0,
            four_by_64: 17_600.0,
            source: "issue 14's NATS JetStream R3 figures (upper ends; not measured in this run)"
                .to_string(),
        }
    }
}

impl FromStr for PeerFigures {
    type Err = String;

    /// `single=N,in-flight-64=N,four-by-64=N` (msg/s); a missing key keeps issue 14's figure.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut p = Self::issue_reference();
        p.source = format!("--nats-figures {s}");
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not CASE=MSG_PER_S"))?;
            let v: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("{value:?} in {part:?} is not a number of msg/s"))?;
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{part:?}: the rate must be > 0"));
            }
            match key.trim() {
                "single" => p.single = v,
                "in-flight-64" => p.in_flight_64 = v,
                "four-by-64" => p.four_by_64 = v,
                k => {
                    return Err(format!(
                        "unknown case {k:?} in --nats-figures; use single, in-flight-64, four-by-64"
                    ))
                }
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_names_round_trip_and_unknown_ones_are_named() {
        for c in Case::ALL {
            assert_eq!(c.name().parse::<Case>(), Ok(c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
        let err = "fast".parse::<Case>().unwrap_err();
        assert!(err.contains("single, in-flight-64"), "{err}");
    }

    #[test]
    fn loads_follow_the_issue_table() {
        let d = Duration::from_secs(1);
        let l = Case::Batch32.load(d);
        assert_eq!(
            (l.producers, l.in_flight, l.batch, l.size),
            (1, 64, 32, 1024)
        );
        let l = Case::Async.load(d);
        assert_eq!((l.producers, l.in_flight, l.batch), (4, 64, 1));
        assert_eq!(Case::Async.flush(), "async");
        assert_eq!(Case::FourBy64.flush(), "sync");
        assert!(Case::Batch32.samples_memory() && !Case::Single.samples_memory());
    }

    #[test]
    fn peer_figures_parse_and_reject_bad_input() {
        let p: PeerFigures = "single=1900,four-by-64=15000".parse().unwrap();
        assert_eq!(
            (p.single, p.in_flight_64, p.four_by_64),
            (1900.0, 13_700.0, 15_000.0)
        );
        assert!(p.source.contains("--nats-figures"));
        assert!("single"
            .parse::<PeerFigures>()
            .unwrap_err()
            .contains("CASE=MSG_PER_S"));
        assert!("single=x"
            .parse::<PeerFigures>()
            .unwrap_err()
            .contains("not a number"));
        assert!("single=0"
            .parse::<PeerFigures>()
            .unwrap_err()
            .contains("> 0"));
        assert!("batch=1"
            .parse::<PeerFigures>()
            .unwrap_err()
            .contains("unknown case"));
    }
}
