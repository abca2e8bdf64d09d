//! The install intent: what makes a snapshot install that replaces the log crash-safe.
//!
//! Before the log swap, install keeps the verified snapshot as
//! `<data_dir>/snapshots/pending-install.snap` (a received file is renamed, any other copied;
//! fsynced, dir fsynced) and then writes `<data_dir>/store-meta/install-intent.json` (its last
//! log id; tmp, fsync, rename, dir fsync). Only then is the log swapped. The intent is removed
//! after the ConsumeQueues, the checkpoint and the published snapshot are durable, and the
//! pending file after it.
//!
//! At open, an intent means a crash between the log swap and the end of install:
//! [`super::install::resume`] runs the install again from the pending file (verified again;
//! the log swap is skipped when the log already holds the snapshot's last entry, the rest is
//! rewritten). A pending file without an intent is a leftover of a crash before the swap and
//! is removed.
//!
//! Invariant: while the intent exists, the pending file exists and is a whole, verified
//! snapshot ending at the intent's last log id.

use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::paths::incoming_dir;
use crate::paths::intent_path;
use crate::paths::pending_path;
use crate::paths::snapshots_dir;
use crate::paths::store_meta_dir;
use crate::snapshot::file::SnapshotFile;
use crate::state::checkpoint::write_atomic;
use raftmq_raft_log::types::LogId;

/// A snapshot install that replaced (or was about to replace) the log and is not finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct InstallIntent {
    /// Last log id of the pending snapshot.
    pub last_log_id: Option<LogId>,
}

impl InstallIntent {
    /// The recorded intent, if any.
    pub fn load(data_dir: &Path) -> Result<Option<InstallIntent>> {
        let path = intent_path(data_dir);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("read", path, e)),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            StoreError::corruption(path.display().to_string(), e.column() as u64, e.to_string())
        })
    }

    /// Keeps `file` (verified, ending at `self.last_log_id`) as the pending file, then
    /// records the intent; both durable on return. Returns the pending file.
    pub fn record(
        &self,
        data_dir: &Path,
        file: SnapshotFile,
        copy: impl FnOnce(&SnapshotFile, &Path) -> Result<()>,
    ) -> Result<SnapshotFile> {
        let pending = pending_path(data_dir);
        let dir = snapshots_dir(data_dir);
        if file.path() != pending {
            if file.path().parent() == Some(incoming_dir(&dir).as_path()) {
                std::fs::rename(file.path(), &pending)
                    .map_err(|e| StoreError::io("rename", &pending, e))?;
            } else {
                copy(&file, &pending)?;
            }
            sync_dir(&dir)?;
        }
        drop(file);
        let meta_dir = store_meta_dir(data_dir);
        std::fs::create_dir_all(&meta_dir)
            .map_err(|e| StoreError::io("create dir", &meta_dir, e))?;
        let bytes = serde_json::to_vec(self)
            .map_err(|e| StoreError::invalid(format!("install intent does not serialize: {e}")))?;
        write_atomic(&intent_path(data_dir), &bytes)?;
        SnapshotFile::open(&pending).map_err(|e| StoreError::io("open", &pending, e))
    }

    /// Removes the intent, then the pending file (each followed by a dir fsync).
    pub fn clear(data_dir: &Path) -> Result<()> {
        for (path, what) in [
            (intent_path(data_dir), "intent"),
            (pending_path(data_dir), "pending"),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("remove", &path, e)),
            }
            let dir = path
                .parent()
                .ok_or_else(|| StoreError::invalid(format!("{what} path has no parent")))?;
            sync_dir(dir)?;
        }
        Ok(())
    }
}
