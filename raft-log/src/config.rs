//! [`LogConfig`]: the settings of one node's log, each declared, defaulted and validated here.
//!
//! Serde form: flat kebab-case keys (`segment-bytes`, `flush-policy = "sync" | "async"`,
//! `flush-interval-ms`, ...), so a node's config file can embed it with `#[serde(flatten)]`.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Serialize;

use crate::error::LogError;
use crate::format::ENTRY_HEADER_LEN;
use crate::stage::MAX_STAGE_BYTES;
use crate::stage::MIN_STAGE_BYTES;

/// When appended entries are reported durable to openraft.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushPolicy {
    /// Group commit: an append's callback completes after the fdatasync that covers it.
    #[default]
    Sync,
    /// The callback completes once the bytes are in the page cache; a flush runs every
    /// `flush-interval-ms`, on segment roll and on shutdown, and on a leader (or candidate)
    /// after each append, which nothing waits for.
    Async,
}

impl FlushPolicy {
    /// Every policy with its config name and what it means (for help texts).
    pub const ALL: [(FlushPolicy, &'static str, &'static str); 2] = [
        (
            FlushPolicy::Sync,
            "sync",
            "Acknowledge an append only after fsync (group commit)",
        ),
        (
            FlushPolicy::Async,
            "async",
            "Acknowledge once the bytes are in the mapping; fsync every flush-interval-ms \
             (a leader also after each append, not awaited)",
        ),
    ];

    /// The config name: `sync` or `async`.
    pub fn name(self) -> &'static str {
        match self {
            FlushPolicy::Sync => "sync",
            FlushPolicy::Async => "async",
        }
    }
}

impl fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlushPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .find(|(_, name, _)| *name == s)
            .map(|(p, _, _)| *p)
            .ok_or_else(|| format!("{s:?} is not a flush policy (sync | async)"))
    }
}

/// Configuration of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct LogConfig {
    /// Bytes per CommitLog segment; a cluster-wide setting (it fixes every entry's physical
    /// offset, so it must never change once a data dir exists) and the largest entry record
    /// accepted. Default 1073741824 (1 GiB); range 4096..=4294967296.
    pub segment_bytes: u64,
    /// When appends are fsynced: `sync` (before the ack, group commit) or `async` (every
    /// flush-interval-ms). Per node. Default sync; sync | async.
    #[serde(rename = "flush-policy")]
    pub flush: FlushPolicy,
    /// fsync period of the `async` flush policy, in ms (checked under `sync` too).
    /// Default 500; range 1..=60000.
    pub flush_interval_ms: u64,
    /// On open, truncate at the first corrupted record even if it was flushed (the node must
    /// then catch up from its peers) instead of refusing to start. Open then checks every
    /// record's CRC (a normal open takes the raft index below the durable flush checkpoint
    /// instead). Use only on a node whose data a majority still holds. Default false.
    pub repair_truncate_corruption: bool,
    /// Preallocate the next segment in the background. Default true.
    pub preallocate: bool,
    /// Segments retention deletes that are kept instead, up to this many, and reused as the
    /// next segments: their blocks are written already, so the fdatasyncs into them write no
    /// extent metadata (see `recycle.rs`). Each holds `segment-bytes` of disk after retention
    /// (and its deleted messages' bytes until overwritten); a node whose disk is full deletes
    /// them. Two cover the rolls between two retention passes (10 s) up to about 200 MB/s
    /// with 1 GiB segments. Per node. Default 2; range 0..=64 (0: delete them).
    pub recycle_segments: u32,
    /// Keep the active segment written with zeros a few MiB ahead of the appends, on a
    /// thread of its own, so an fdatasync finds no extent to convert (see `zero_ahead.rs`).
    /// Default true.
    pub zero_ahead: bool,
    /// On open, forget the lost-commit floor (see [`crate::LogStore::lost_commit_floor`]) so
    /// the node votes as plain Raft would again. Without it, a node that lost committed
    /// entries votes only for a candidate that still holds them (so two such nodes cannot
    /// elect each other and overwrite what a third committed); if *no* member holds them
    /// (a whole-cluster power loss with `async` flush), no leader can be elected until this is
    /// set. Those entries are then gone for good. Default false.
    pub accept_lost_commits: bool,
    /// Bytes of the CommitLog, back from its flushed end, left in the OS page cache; older
    /// pages are dropped from it once durable, so appends reuse warm pages and the log's
    /// cache stays this size instead of filling the free memory (see `drop_behind.rs`).
    /// Reads of older bytes (a consumer lagging further) go to the disk. 0: the cache is
    /// left to the kernel. Per node. Default 268435456 (256 MiB). With a write stage the
    /// appends leave no pages behind: reads more than half the stage behind (or this, if
    /// less) go around the page cache.
    pub log_cache_bytes: u64,
    /// Bytes of memory the newest appends are copied into, and written from to the segment
    /// around the OS page cache (`O_DIRECT`) by the flush that makes them durable; reads of
    /// them come from it (see `stage.rs`). Under `async` flush it is a shared mapping of the
    /// file `write-stage` in the log directory, which the next open replays after a kill -9
    /// (`stage_file.rs`). 0: appends go through the page cache (so they do where `O_DIRECT`
    /// is refused, e.g. tmpfs). Per node. Default 16777216 (16 MiB); 0, or
    /// 1048576..=1073741824 in multiples of 4096.
    pub write_stage_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            flush: FlushPolicy::Sync,
            flush_interval_ms: 500,
            repair_truncate_corruption: false,
            preallocate: true,
            recycle_segments: 2,
            zero_ahead: true,
            accept_lost_commits: false,
            log_cache_bytes: 256 << 20,
            write_stage_bytes: 16 << 20,
        }
    }
}

/// Smallest segment accepted.
pub const MIN_SEGMENT_BYTES: u64 = 4096;
/// Largest segment accepted (record lengths are u32).
pub const MAX_SEGMENT_BYTES: u64 = 4 << 30;
/// Most segments `recycle-segments` keeps.
pub const MAX_RECYCLE_SEGMENTS: u32 = 64;

impl LogConfig {
    /// Rejects out-of-range values with [`LogError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), LogError> {
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return Err(LogError::Config {
                field: "segment-bytes",
                reason: format!(
                    "{} is outside {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}",
                    self.segment_bytes
                ),
            });
        }
        if !(1..=60_000).contains(&self.flush_interval_ms) {
            return Err(LogError::Config {
                field: "flush-interval-ms",
                reason: format!("{} is outside 1..=60000", self.flush_interval_ms),
            });
        }
        if self.recycle_segments > MAX_RECYCLE_SEGMENTS {
            return Err(LogError::Config {
                field: "recycle-segments",
                reason: format!(
                    "{} is outside 0..={MAX_RECYCLE_SEGMENTS}",
                    self.recycle_segments
                ),
            });
        }
        let stage = self.write_stage_bytes;
        if stage != 0
            && (!(MIN_STAGE_BYTES..=MAX_STAGE_BYTES).contains(&stage) || stage % 4096 != 0)
        {
            return Err(LogError::Config {
                field: "write-stage-bytes",
                reason: format!(
                    "{stage} is not 0 or a multiple of 4096 in {MIN_STAGE_BYTES}..={MAX_STAGE_BYTES}"
                ),
            });
        }
        Ok(())
    }

    /// The write stage in use: `write-stage-bytes` (an `async` log's in the stage file, whose
    /// appends are acknowledged before they are written out and must survive a kill -9).
    pub fn stage_bytes(&self) -> u64 {
        self.write_stage_bytes
    }

    /// Bytes behind the flushed end whose reads go through the segments' mappings rather than
    /// around the page cache (see `drop_behind.rs`): `log-cache-bytes`, or less with a write
    /// stage, whose appends leave no pages to read (then what it holds, half of it).
    pub fn cached_read_bytes(&self) -> u64 {
        match self.stage_bytes() {
            0 => self.log_cache_bytes,
            stage if self.log_cache_bytes > 0 => self.log_cache_bytes.min(stage / 2),
            _ => 0,
        }
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
            flush: FlushPolicy::Async,
            flush_interval_ms: 0,
            ..LogConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("flush-interval-ms"));
        let c = LogConfig {
            recycle_segments: 65,
            ..LogConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("recycle-segments"), "{e}");
        for bad in [5000, 4096, (1 << 20) + 1, 2 << 30] {
            let c = LogConfig {
                write_stage_bytes: bad,
                ..LogConfig::default()
            };
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("write-stage-bytes"), "{bad}: {e}");
        }
        LogConfig::default().validate().unwrap();
    }

    #[test]
    fn the_stage_shortens_the_cached_reads_under_either_policy() {
        let c = LogConfig::default();
        assert_eq!(c.stage_bytes(), 16 << 20);
        assert_eq!(c.cached_read_bytes(), 8 << 20);
        let c = LogConfig {
            flush: FlushPolicy::Async,
            ..LogConfig::default()
        };
        assert_eq!(c.stage_bytes(), 16 << 20);
        assert_eq!(c.cached_read_bytes(), 8 << 20);
        let c = LogConfig {
            write_stage_bytes: 0,
            ..LogConfig::default()
        };
        assert_eq!(c.cached_read_bytes(), 256 << 20);
        let c = LogConfig {
            log_cache_bytes: 0,
            ..LogConfig::default()
        };
        assert_eq!(c.cached_read_bytes(), 0);
    }

    #[test]
    fn serde_is_flat_kebab_case() {
        let c: LogConfig = serde_json::from_str(
            r#"{"segment-bytes": 8192, "flush-policy": "async", "flush-interval-ms": 5}"#,
        )
        .unwrap();
        assert_eq!(c.segment_bytes, 8192);
        assert_eq!(c.flush, FlushPolicy::Async);
        assert_eq!(c.flush_interval_ms, 5);
        assert_eq!("async".parse::<FlushPolicy>(), Ok(FlushPolicy::Async));
        assert_eq!(FlushPolicy::Sync.to_string(), "sync");
        assert!("fast".parse::<FlushPolicy>().is_err());
    }
}
