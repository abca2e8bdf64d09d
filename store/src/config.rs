//! [`StoreConfig`]: everything the state machine and read path can be tuned with.
//!
//! Serde form: flat kebab-case keys, the ConsumeQueue and IndexFile settings and the limits
//! included (`cq-units-per-file`, `index-slots-per-file`, `max-message-bytes`, ...), so a
//! node's config file can embed it with `#[serde(flatten)]`.

use serde::Deserialize;
use serde::Serialize;

use crate::consume_queue::ConsumeQueueConfig;
use crate::error::Result;
use crate::error::StoreError;
use crate::index::IndexConfig;
use crate::limits::StoreLimits;

/// Store configuration (serde kebab-case; every field has a default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct StoreConfig {
    /// ConsumeQueue file sizing (flat keys).
    #[serde(flatten)]
    pub consume_queue: ConsumeQueueConfig,
    /// IndexFile sizing (flat keys).
    #[serde(flatten)]
    pub index: IndexConfig,
    /// Message and topic limits, checked by the leader before proposing (flat keys).
    #[serde(flatten)]
    pub limits: StoreLimits,
    /// Age after which a whole CommitLog segment is deleted (age of its newest message), in
    /// hours. Default 72; range 1..=87600.
    pub file_reserved_hours: u64,
    /// Disk usage ratio above which old segments are deleted before their time.
    /// Default 0.75; range 0.1..=1.0 and < disk-reject-ratio (1.0: never, usage cannot pass it).
    pub disk_clean_ratio: f64,
    /// Disk usage ratio above which sends fail with a "disk full" error.
    /// Default 0.90; range disk-clean-ratio..=1.0 (exclusive lower bound, but both may be 1.0);
    /// 1.0 turns the refusal off (for a disk shared with something else that watches it).
    pub disk_reject_ratio: f64,
    /// The dispatch checkpoint (log flush, ConsumeQueue and index msync, checkpoint file) is
    /// taken after this many applied entries (its file written in the background; the next
    /// one waits until that write ended). Default 10000; range 1..=10000000.
    pub checkpoint_every_entries: u64,
    /// Most ConsumeQueue units one pull scans (tag filtering may skip many). Default 16384;
    /// range 1..=1000000.
    pub max_pull_scan_units: u32,
    /// Largest pull answer when the request asks for more, in messages. Default 32; range
    /// 1..=65536.
    pub max_pull_messages: u32,
    /// Most messages a consumer group may have in flight (received, not acked) on one queue;
    /// a `Receive` on a full queue hands out only expired ones. The leader stamps it into
    /// each `Receive`. Default 4096; range 1..=1000000.
    pub max_inflight_per_queue: u32,
    /// How long an idempotent send (producer id + sequence, or a RocketMQ client message id)
    /// is remembered, so a retry is answered with its original result instead of being stored
    /// again; measured in the leader's timestamps, in ms. 0 turns deduplication off (new
    /// entries only). The leader stamps it into each entry, so nodes may differ without
    /// diverging; the leader's value applies. Default 120000 (2 min, as NATS' duplicate
    /// window: far longer than a client's retries across a failover); range 0..=86400000.
    pub dedup_window_ms: u64,
    /// Most idempotent sends remembered (all producers together); past it the oldest is
    /// forgotten first. Bounds memory (about 150 bytes a send, up to about 350 for a send
    /// whose producer has no other send in the window) and the checkpoint and snapshot size
    /// whatever the number of producers. Stamped by the leader like
    /// `dedup-window-ms`. Default 100000; range 1..=10000000.
    pub dedup_max_entries: u32,
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
            max_inflight_per_queue: 4096,
            dedup_window_ms: 120_000,
            dedup_max_entries: 100_000,
        }
    }
}

fn range_u64(field: &'static str, v: u64, lo: u64, hi: u64) -> Result<()> {
    if v < lo || v > hi {
        return Err(StoreError::Config {
            field,
            reason: format!("{v} is outside {lo}..={hi}"),
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
        if !(0.1..=1.0).contains(&self.disk_clean_ratio) {
            return Err(StoreError::Config {
                field: "disk-clean-ratio",
                reason: format!("{} is outside 0.1..=1.0", self.disk_clean_ratio),
            });
        }
        let both_off = self.disk_clean_ratio == 1.0 && self.disk_reject_ratio == 1.0;
        let above_clean = self.disk_reject_ratio > self.disk_clean_ratio || both_off;
        if !(above_clean && self.disk_reject_ratio <= 1.0) {
            return Err(StoreError::Config {
                field: "disk-reject-ratio",
                reason: format!(
                    "{} must be above disk-clean-ratio {} and at most 1.0",
                    self.disk_reject_ratio, self.disk_clean_ratio
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
        )?;
        range_u64(
            "max-inflight-per-queue",
            u64::from(self.max_inflight_per_queue),
            1,
            1_000_000,
        )?;
        range_u64("dedup-window-ms", self.dedup_window_ms, 0, 86_400_000)?;
        range_u64(
            "dedup-max-entries",
            u64::from(self.dedup_max_entries),
            1,
            10_000_000,
        )
    }

    /// The dedup bounds the leader stamps into a batch with identified messages; `None` when
    /// deduplication is off.
    pub fn dedup_params(&self) -> Option<crate::dedup::DedupParams> {
        (self.dedup_window_ms > 0).then_some(crate::dedup::DedupParams {
            window_ms: self.dedup_window_ms,
            max_entries: self.dedup_max_entries,
        })
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
        let c = StoreConfig {
            max_inflight_per_queue: 0,
            ..StoreConfig::default()
        };
        let e = c.validate().expect_err("zero in flight");
        assert!(e.to_string().contains("max-inflight-per-queue"), "{e}");
        for (field, c) in [
            (
                "dedup-window-ms",
                StoreConfig {
                    dedup_window_ms: 86_400_001,
                    ..StoreConfig::default()
                },
            ),
            (
                "dedup-max-entries",
                StoreConfig {
                    dedup_max_entries: 0,
                    ..StoreConfig::default()
                },
            ),
        ] {
            let e = c.validate().expect_err(field);
            assert!(e.to_string().contains(field), "{e}");
        }
        let d = StoreConfig::default();
        assert_eq!((d.dedup_window_ms, d.dedup_max_entries), (120_000, 100_000));
        assert_eq!(d.dedup_params().map(|p| p.window_ms), Some(120_000));
        let off = StoreConfig {
            dedup_window_ms: 0,
            ..StoreConfig::default()
        };
        off.validate().expect("0 = off is valid");
        assert_eq!(off.dedup_params(), None);
        let toml_like: StoreConfig =
            serde_json::from_str(r#"{"file-reserved-hours": 5}"#).expect("serde");
        assert_eq!(toml_like.file_reserved_hours, 5);
    }

    #[test]
    fn sub_configs_are_flat_keys() {
        let c: StoreConfig = serde_json::from_str(
            r#"{"cq-units-per-file": 8, "index-slots-per-file": 16, "index-units-per-file": 32}"#,
        )
        .expect("serde");
        assert_eq!(c.consume_queue.units_per_file, 8);
        assert_eq!(c.index.slots_per_file, 16);
        assert_eq!(c.index.max_units_per_file, 32);
        let c: StoreConfig =
            serde_json::from_str(r#"{"max-batch-messages": 8, "max-batch-bytes": 65536}"#)
                .expect("serde");
        assert_eq!(c.limits.max_batch_messages, 8);
        assert_eq!(c.limits.max_batch_bytes, 65536);
        let e = StoreConfig {
            index: IndexConfig {
                slots_per_file: 0,
                ..IndexConfig::default()
            },
            ..StoreConfig::default()
        }
        .validate()
        .expect_err("zero slots");
        assert!(e.to_string().contains("index-slots-per-file"), "{e}");
    }
}
