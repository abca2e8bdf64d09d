//! [`StoreConfig`]: everything the state machine and read path can be tuned with.

use serde::Deserialize;
use serde::Serialize;

use crate::consume_queue::ConsumeQueueConfig;
use crate::error::Result;
use crate::error::StoreError;
use crate::index::IndexConfig;
use crate::limits::StoreLimits;

/// Store configuration (serde kebab-case; every field has a default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct StoreConfig {
    /// ConsumeQueue file sizing.
    pub consume_queue: ConsumeQueueConfig,
    /// IndexFile sizing.
    pub index: IndexConfig,
    /// Message and topic limits (checked by the leader before proposing).
    pub limits: StoreLimits,
    /// Commit-log segments whose newest message is older than this are deleted. Default 72;
    /// range 1 ..= 87600.
    pub file_reserved_hours: u64,
    /// Past this disk usage (0..1), the oldest segments are deleted whatever their age.
    /// Default 0.75; range 0.1 ..= 0.99, at most `disk-reject-ratio`.
    pub disk_clean_ratio: f64,
    /// Past this disk usage (0..1), sends are refused with a disk-full error. Default 0.90;
    /// range 0.1 ..= 0.99.
    pub disk_reject_ratio: f64,
    /// The dispatch checkpoint (log flush, ConsumeQueue and index msync, checkpoint file) is
    /// written after this many applied entries. Default 10000; range 1 ..= 10000000.
    pub checkpoint_every_entries: u64,
    /// Most ConsumeQueue units one pull scans (tag filtering may skip many). Default 16384;
    /// range 1 ..= 1000000.
    pub max_pull_scan_units: u32,
    /// Largest pull answer when the request asks for more. Default 32 (messages); range
    /// 1 ..= 65536.
    pub max_pull_messages: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            consume_queue: ConsumeQueueConfig::default(),
            index: IndexConfig::default(),
            limits: StoreLimits::default(),
            file_reserved_hours: 72,
            disk_clean_ratio: 0.75,
            disk_reject_ratio: 0.90,
            checkpoint_every_entries: 10_000,
            max_pull_scan_units: 16_384,
            max_pull_messages: 32,
        }
    }
}

fn range_u64(field: &'static str, v: u64, lo: u64, hi: u64) -> Result<()> {
    if v < lo || v > hi {
        return Err(StoreError::Config {
            field,
            reason: format!("{v} is out of range {lo} ..= {hi}"),
        });
    }
    Ok(())
}

fn ratio(field: &'static str, v: f64) -> Result<()> {
    if !(0.1..=0.99).contains(&v) {
        return Err(StoreError::Config {
            field,
            reason: format!("{v} is out of range 0.1 ..= 0.99"),
        });
    }
    Ok(())
}

impl StoreConfig {
    /// Rejects out-of-range fields, naming the field.
    pub fn validate(&self) -> Result<()> {
        self.consume_queue.validate()?;
        self.index.validate()?;
        self.limits.validate()?;
        range_u64("file-reserved-hours", self.file_reserved_hours, 1, 87_600)?;
        ratio("disk-clean-ratio", self.disk_clean_ratio)?;
        ratio("disk-reject-ratio", self.disk_reject_ratio)?;
        if self.disk_clean_ratio > self.disk_reject_ratio {
            return Err(StoreError::Config {
                field: "disk-clean-ratio",
                reason: format!(
                    "{} is above disk-reject-ratio {}",
                    self.disk_clean_ratio, self.disk_reject_ratio
                ),
            });
        }
        range_u64(
            "checkpoint-every-entries",
            self.checkpoint_every_entries,
            1,
            10_000_000,
        )?;
        range_u64(
            "max-pull-scan-units",
            u64::from(self.max_pull_scan_units),
            1,
            1_000_000,
        )?;
        range_u64(
            "max-pull-messages",
            u64::from(self.max_pull_messages),
            1,
            65_536,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_bad_fields_are_named() {
        StoreConfig::default().validate().expect("default");
        let c = StoreConfig {
            disk_clean_ratio: 0.95,
            ..StoreConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("disk-clean-ratio"));
        let c = StoreConfig {
            file_reserved_hours: 0,
            ..StoreConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("file-reserved-hours"));
        let toml_like: StoreConfig =
            serde_json::from_str(r#"{"file-reserved-hours": 5}"#).expect("serde");
        assert_eq!(toml_like.file_reserved_hours, 5);
    }
}
