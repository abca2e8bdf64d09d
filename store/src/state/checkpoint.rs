//! The durable dispatch checkpoint: `<data_dir>/store-meta/checkpoint.json`.
//!
//! It records the replicated state as of `last_applied` (membership, topics, consumer
//! offsets, pop state, dedup window, users). It is written atomically (tmp, fsync, rename, fsync dir) and only after the log,
//! the ConsumeQueues and the index were flushed, so every entry up to `last_applied` is durable
//! in the log and dispatched on disk. After a restart openraft re-applies the committed entries
//! after `last_applied`; re-dispatch is idempotent.

use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

use crate::dedup::DedupWindow;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::offsets::ConsumerOffsetTable;
pub use crate::paths::checkpoint_path;
use crate::paths::store_meta_dir;
use crate::raft_types::StoredMembership;
use crate::receive::ReceiveTable;
use crate::topic::TopicTable;
use crate::types::PhysOffset;
use crate::users::UserTable;
use raftmq_raft_log::types::LogId;

/// Replicated state as of `last_applied`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Checkpoint {
    /// Last entry applied (and dispatched) when this was taken.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership,
    /// Topics.
    pub topics: TopicTable,
    /// Consumer offsets.
    pub offsets: ConsumerOffsetTable,
    /// Pop state (absent in checkpoints written before it existed: empty).
    #[serde(default)]
    pub receive: ReceiveTable,
    /// Dedup window of idempotent sends (absent in checkpoints written before it existed:
    /// empty).
    #[serde(default)]
    pub dedup: DedupWindow,
    /// Users, secrets sealed (absent in checkpoints written before it existed: none).
    #[serde(default)]
    pub users: UserTable,
    /// Physical end of the last applied normal entry.
    pub dispatched_phys_end: PhysOffset,
}

impl Checkpoint {
    /// Loads the checkpoint, or the empty one if none was written yet.
    pub fn load(data_dir: &Path) -> Result<Checkpoint> {
        let path = checkpoint_path(data_dir);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Checkpoint::default()),
            Err(e) => return Err(StoreError::io("read", path, e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::corruption(path.display().to_string(), e.column() as u64, e.to_string())
        })
    }

    /// Writes atomically: tmp file, fsync, rename, fsync dir.
    pub fn store(&self, data_dir: &Path) -> Result<()> {
        let path = checkpoint_path(data_dir);
        let dir = store_meta_dir(data_dir);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create dir", &dir, e))?;
        let bytes = serde_json::to_vec(self)
            .map_err(|e| StoreError::invalid(format!("checkpoint does not serialize: {e}")))?;
        write_atomic(&path, &bytes)?;
        tracing::debug!(last_applied = ?self.last_applied, "dispatch checkpoint written");
        Ok(())
    }
}

/// Writes `bytes` to `path` atomically (tmp + fsync + rename + dir fsync).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    f.write_all(bytes)
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| StoreError::io("fsync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io("rename", path, e))?;
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::invalid(format!("{} has no parent", path.display())))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::TopicConfig;

    #[test]
    fn round_trip_and_missing_is_empty() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            Checkpoint::load(d.path()).expect("load"),
            Checkpoint::default()
        );
        let mut c = Checkpoint {
            last_applied: Some(LogId::new_term_index(2, 7)),
            dispatched_phys_end: PhysOffset::new(999),
            ..Checkpoint::default()
        };
        c.topics.create(TopicConfig::new("t", 4)).expect("create");
        c.store(d.path()).expect("store");
        assert_eq!(Checkpoint::load(d.path()).expect("load"), c);
        std::fs::write(checkpoint_path(d.path()), b"{").expect("write");
        assert!(Checkpoint::load(d.path()).expect_err("bad").is_corruption());
    }
}
