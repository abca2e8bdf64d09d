//! Benchmark support shared by `raftmq bench produce|consume`.

pub mod stats;

pub use stats::BenchSummary;
pub use stats::Latencies;
pub use stats::LatencySummary;
