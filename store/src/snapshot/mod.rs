//! Snapshots: what a node that joins, or falls behind past the purge point, installs to end
//! up with every message the others retain.
//!
//! A snapshot (byte table in [`format`]) holds the replicated state as of its last log id
//! (membership, topics, consumer offsets), every ConsumeQueue's units `[min, max)`, and the
//! bytes of the retained CommitLog segments up to the physical end of its last entry. Since
//! retention purges only whole segments, the Raft log still holds every retained message, so
//! the segments are the messages. Install verifies the CRC, replaces the CommitLog with the
//! segments (byte-identical, same physical offsets: raft-log `replace_from_files`, staged segment files; skipped when
//! the local log already holds the last entry), rewrites the ConsumeQueues from the units,
//! rebuilds the index from the records and writes the dispatch checkpoint.

mod build;
pub mod file;
pub mod format;
mod install;

use std::path::Path;
use std::path::PathBuf;

pub(crate) use build::build;
pub use file::PartialSnapshot;
pub use file::SnapshotFile;
pub use file::SnapshotReceiver;
pub(crate) use install::install;
pub use install::read_manifest;

use crate::error::Result;
use crate::error::StoreError;
use crate::sm::machine::Snapshot;
use crate::sm::machine::SnapshotMeta;
use crate::store::Shared;
use crate::store::Store;
use raftmq_raft_log::types::LogId;

/// `<data_dir>/snapshots`.
pub fn snapshots_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("snapshots")
}

/// File name of the snapshot ending at `last`.
pub fn snapshot_name(last: Option<LogId>) -> String {
    match last {
        Some(l) => format!("snapshot-{:020}-{:020}.snap", l.leader_id.term, l.index),
        None => "snapshot-none.snap".to_owned(),
    }
}

/// Removes every snapshot file in `dir` except `keep`.
pub(crate) fn remove_others(dir: &Path, keep: &Path) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("read dir", dir, e))?;
    for e in rd {
        let p = e.map_err(|e| StoreError::io("read dir", dir, e))?.path();
        let is_snap = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("snapshot-") && (n.ends_with(".snap") || n.ends_with(".tmp"))
        });
        if is_snap && p != keep {
            std::fs::remove_file(&p).map_err(|e| StoreError::io("remove", &p, e))?;
        }
    }
    Ok(())
}

/// Removes what an interrupted transfer or install left behind (`incoming/`, `staged/`).
/// Called at open, before any transfer can start.
pub(crate) fn remove_leftovers(data_dir: &Path) -> Result<()> {
    for sub in ["incoming", "staged"] {
        let d = snapshots_dir(data_dir).join(sub);
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| StoreError::io("remove dir", &d, e))?;
            tracing::info!(dir = %d.display(), "snapshot leftovers removed");
        }
    }
    Ok(())
}

/// The newest snapshot built or installed, if any.
pub(crate) fn current(shared: &Shared) -> Result<Option<Snapshot>> {
    let dir = snapshots_dir(&shared.data_dir);
    if !dir.exists() {
        return Ok(None);
    }
    let mut names = Vec::new();
    let rd = std::fs::read_dir(&dir).map_err(|e| StoreError::io("read dir", &dir, e))?;
    for e in rd {
        let name = e
            .map_err(|e| StoreError::io("read dir", &dir, e))?
            .file_name();
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("snapshot-") && name.ends_with(".snap") {
            names.push(name);
        }
    }
    // Zero-padded names sort by (term, index); "snapshot-none" sorts last but is the oldest.
    names.sort_by_key(|n| (!n.starts_with("snapshot-none"), n.clone()));
    let Some(name) = names.pop() else {
        return Ok(None);
    };
    let path = dir.join(name);
    let file = SnapshotFile::open(&path).map_err(|e| StoreError::io("open", &path, e))?;
    let m = read_manifest(&file)?;
    Ok(Some(Snapshot {
        meta: SnapshotMeta {
            last_log_id: m.last_log_id,
            last_membership: m.membership,
        },
        snapshot: file,
    }))
}

impl Store {
    /// A receiver for snapshots sent by the leader (the node's transport sink delegates to
    /// it), writing under `<data_dir>/snapshots/incoming`.
    pub fn snapshot_receiver(&self, max_snapshot_bytes: u64) -> SnapshotReceiver {
        SnapshotReceiver::new(
            snapshots_dir(&self.shared.data_dir).join("incoming"),
            max_snapshot_bytes,
        )
    }
}
