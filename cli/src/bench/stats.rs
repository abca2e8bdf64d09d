//! Benchmark figures: throughput, latency percentiles from an HDR histogram, errors by kind.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histogram tracks exactly; longer ones are clamped to it (and counted).
const MAX_TRACKED_US: u64 = 600_000_000;

/// Latencies of one benchmark run, in microseconds, 3 significant digits.
#[derive(Clone, Debug)]
pub struct Latencies {
    histogram: Histogram<u64>,
    clamped: u64,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty recorder.
    pub fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, MAX_TRACKED_US, 3)
            .expect("bounds 1..600s with 3 significant digits are valid for hdrhistogram");
        Self {
            histogram,
            clamped: 0,
        }
    }

    /// Records one operation's latency.
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        if us > MAX_TRACKED_US {
            self.clamped += 1;
        }
        self.histogram.saturating_record(us.min(MAX_TRACKED_US));
    }

    /// Adds another recorder's samples (one recorder per producer task, merged at the end).
    pub fn merge(&mut self, other: &Latencies) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms built by Latencies::new share bounds, so add cannot fail");
        self.clamped += other.clamped;
    }

    /// Number of recorded operations.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The percentile summary.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.histogram;
        LatencySummary {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            over_max_tracked: self.clamped,
        }
    }
}

/// Latency percentiles, microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Operations measured.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Maximum.
    pub max_us: u64,
    /// Operations slower than the tracked maximum (600 s), recorded as 600 s.
    pub over_max_tracked: u64,
}

/// The outcome of a throughput benchmark.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchSummary {
    /// What was measured, e.g. `produce`.
    pub kind: String,
    /// Successful messages.
    pub messages: u64,
    /// Payload bytes of the successful messages.
    pub bytes: u64,
    /// Wall time of the run, seconds.
    pub elapsed_s: f64,
    /// Messages per second.
    pub messages_per_s: f64,
    /// Payload megabytes (10^6) per second.
    pub mb_per_s: f64,
    /// Per-operation latency (one send or batch, one pull).
    pub latency: LatencySummary,
    /// Failed operations by error kind.
    pub errors: BTreeMap<String, u64>,
}

impl BenchSummary {
    /// Computes the rates from the counts.
    pub fn new(
        kind: &str,
        messages: u64,
        bytes: u64,
        elapsed: Duration,
        latencies: &Latencies,
    ) -> Self {
        let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        Self {
            kind: kind.to_string(),
            messages,
            bytes,
            elapsed_s: elapsed.as_secs_f64(),
            messages_per_s: messages as f64 / secs,
            mb_per_s: bytes as f64 / secs / 1e6,
            latency: latencies.summary(),
            errors: BTreeMap::new(),
        }
    }

    /// Counts one failed operation of the given kind.
    pub fn add_error(&mut self, kind: &str) {
        *self.errors.entry(kind.to_string()).or_default() += 1;
    }
}

impl fmt::Display for BenchSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency;
        writeln!(
            f,
            "{}: {} messages, {} bytes in {:.2} s",
            self.kind, self.messages, self.bytes, self.elapsed_s
        )?;
        writeln!(
            f,
            "throughput   {:>12.0} msg/s {:>10.2} MB/s",
            self.messages_per_s, self.mb_per_s
        )?;
        writeln!(
            f,
            "latency (us) p50 {} | p90 {} | p99 {} | p99.9 {} | max {} | mean {:.0}",
            l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us, l.mean_us
        )?;
        if self.errors.is_empty() {
            write!(f, "errors       none")
        } else {
            let list: Vec<String> = self
                .errors
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            write!(f, "errors       {}", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_samples() {
        let mut a = Latencies::new();
        let mut b = Latencies::new();
        for us in 1..=500 {
            a.record(Duration::from_micros(us));
        }
        for us in 501..=1000 {
            b.record(Duration::from_micros(us));
        }
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 1000);
        assert!((499..=501).contains(&s.p50_us), "{s:?}");
        assert!((989..=991).contains(&s.p99_us), "{s:?}");
        assert_eq!(s.max_us, 1000);
    }

    #[test]
    fn very_slow_operations_are_clamped_and_counted() {
        let mut l = Latencies::new();
        l.record(Duration::from_secs(3600));
        assert_eq!(l.summary().over_max_tracked, 1);
    }

    #[test]
    fn rates_and_json_shape() {
        let mut l = Latencies::new();
        l.record(Duration::from_millis(2));
        let mut s = BenchSummary::new("produce", 1000, 1_000_000, Duration::from_secs(2), &l);
        s.add_error("unavailable");
        assert_eq!(s.messages_per_s, 500.0);
        assert_eq!(s.mb_per_s, 0.5);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["errors"]["unavailable"], 1);
        assert!(json["latency"]["p99_us"].is_u64());
        assert!(s.to_string().contains("unavailable: 1"));
    }
}
