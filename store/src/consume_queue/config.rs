//! [`ConsumeQueueConfig`]: how ConsumeQueue files are sized.

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;

/// How ConsumeQueue files are sized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ConsumeQueueConfig {
    /// ConsumeQueue units (20 bytes each) per ConsumeQueue file. Changing it for an existing
    /// data dir is refused at open. Key `cq-units-per-file` (flat in a node's config file).
    /// Default 300000 (6 MB files, as RocketMQ); range 1..=50000000.
    #[serde(rename = "cq-units-per-file")]
    pub units_per_file: u32,
}

impl Default for ConsumeQueueConfig {
    fn default() -> Self {
        ConsumeQueueConfig {
            units_per_file: 300_000,
        }
    }
}

impl ConsumeQueueConfig {
    /// Rejects out-of-range fields, naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.units_per_file == 0 || self.units_per_file > 50_000_000 {
            return Err(StoreError::Config {
                field: "cq-units-per-file",
                reason: format!("{} is outside 1..=50000000", self.units_per_file),
            });
        }
        Ok(())
    }
}
