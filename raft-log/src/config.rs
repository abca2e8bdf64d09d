//! Configuration of one node's log.

use serde::Deserialize;
use serde::Serialize;

use crate::error::LogError;
use crate::format::ENTRY_HEADER_LEN;

/// When appended entries are reported durable to openraft.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum FlushPolicy {
    /// Group commit: an append's callback completes after the fdatasync that covers it.
    #[default]
    Sync,
    /// The callback completes once the bytes are in the page cache; a flush runs every
    /// `interval_ms`, on segment roll and on shutdown.
    Async {
        /// Milliseconds between background flushes. Default 500, range 1..=60000.
        #[serde(rename = "interval-ms")]
        interval_ms: u64,
    },
}

/// Configuration of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct LogConfig {
    /// Bytes per CommitLog segment; a cluster-wide setting (it fixes every entry's physical
    /// offset) and the largest entry record accepted. Default 1 GiB, range 4 KiB..=4 GiB.
    pub segment_bytes: u64,
    /// Flush policy of this node. Default `sync`.
    pub flush: FlushPolicy,
    /// On open, truncate at the first corrupted record even if it was flushed (the node must
    /// then catch up from its peers) instead of refusing to start. Default false.
    pub repair_truncate_corruption: bool,
    /// Preallocate the next segment in the background. Default true.
    pub preallocate: bool,
    /// On open, forget the lost-commit floor (see [`crate::LogStore::lost_commit_floor`]) so
    /// the node votes as plain Raft would again. Only for when every member lost the same
    /// committed entries (a whole-cluster power loss with `async` flush): those entries are
    /// then gone for good. Default false.
    pub accept_lost_commits: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            flush: FlushPolicy::Sync,
            repair_truncate_corruption: false,
            preallocate: true,
            accept_lost_commits: false,
        }
    }
}

/// Smallest segment accepted.
pub const MIN_SEGMENT_BYTES: u64 = 4096;
/// Largest segment accepted (record lengths are u32).
pub const MAX_SEGMENT_BYTES: u64 = 4 << 30;

impl LogConfig {
    /// Rejects out-of-range values, naming the field.
    pub fn validate(&self) -> Result<(), LogError> {
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return Err(LogError::InvalidArgument(format!(
                "segment-bytes = {} is out of range {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        if let FlushPolicy::Async { interval_ms } = self.flush {
            if !(1..=60_000).contains(&interval_ms) {
                return Err(LogError::InvalidArgument(format!(
                    "flush.interval-ms = {interval_ms} is out of range 1..=60000"
                )));
            }
        }
        Ok(())
    }

    /// The largest payload one entry can carry.
    pub fn max_payload_bytes(&self) -> u64 {
        self.segment_bytes.min(u32::MAX as u64) - ENTRY_HEADER_LEN as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_field() {
        let c = LogConfig {
            segment_bytes: 10,
            ..LogConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("segment-bytes"));
        let c = LogConfig {
            flush: FlushPolicy::Async { interval_ms: 0 },
            ..LogConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("interval-ms"));
        LogConfig::default().validate().unwrap();
    }

    #[test]
    fn serde_is_kebab_case() {
        let c: LogConfig = serde_json::from_str(
            r#"{"segment-bytes": 8192, "flush": {"mode": "async", "interval-ms": 5}}"#,
        )
        .unwrap();
        assert_eq!(c.segment_bytes, 8192);
        assert_eq!(c.flush, FlushPolicy::Async { interval_ms: 5 });
    }
}
