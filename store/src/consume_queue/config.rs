//! ConsumeQueue configuration.

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;

/// How ConsumeQueue files are sized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ConsumeQueueConfig {
    /// Units per file (a file is `20 * units-per-file` bytes). Changing it for an existing data
    /// dir is refused at open. Default 300000 (6 MB files, as RocketMQ); range 1 ..= 50000000.
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
                field: "units-per-file",
                reason: format!("{} is out of range 1 ..= 50000000", self.units_per_file),
            });
        }
        Ok(())
    }
}
