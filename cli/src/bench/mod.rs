//! Benchmark support shared by `raftmq bench produce|consume|suite`: the load generator, the
//! figures, the machine's own limits the suite compares against (disk, memory, a hop between
//! two processes), and the CPU time a load took.

pub mod cpu;
pub mod disk;
pub mod hop;
pub mod load;
pub mod rss;
pub mod stats;

pub use stats::BenchSummary;
pub use stats::Latencies;
pub use stats::LatencySummary;
