//! [`IndexConfig`]: the geometry of IndexFiles.

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;

/// Geometry of IndexFiles. Changing it for an existing data dir is refused at open. Keys are
/// prefixed `index-` (flat in a node's config file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct IndexConfig {
    /// Hash slots per IndexFile. Key `index-slots-per-file`. Default 5000000 (RocketMQ);
    /// range 1..=100000000.
    #[serde(rename = "index-slots-per-file")]
    pub slots_per_file: u32,
    /// Index units (indexed keys, 20 bytes each) per IndexFile; a new file starts when one is
    /// full. Key `index-units-per-file`. Default 20000000 (RocketMQ); range 1..=100000000.
    #[serde(rename = "index-units-per-file")]
    pub max_units_per_file: u32,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            slots_per_file: 5_000_000,
            max_units_per_file: 20_000_000,
        }
    }
}

impl IndexConfig {
    /// Rejects out-of-range fields, naming the field.
    pub fn validate(&self) -> Result<()> {
        for (field, v) in [
            ("index-slots-per-file", self.slots_per_file),
            ("index-units-per-file", self.max_units_per_file),
        ] {
            if v == 0 || v > 100_000_000 {
                return Err(StoreError::Config {
                    field,
                    reason: format!("{v} is outside 1..=100000000"),
                });
            }
        }
        Ok(())
    }
}
