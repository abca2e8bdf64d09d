//! Snapshots: what a node that joins, or falls behind past the purge point, installs to end
//! up with every message the others retain.
//!
//! A snapshot (byte table in [`format`]) holds the replicated state as of its last log id
//! (membership, topics, consumer offsets), every ConsumeQueue's units `[min, max)`, and the
//! bytes of the retained CommitLog segments up to the physical end of its last entry. Since
//! retention purges only whole segments, the Raft log still holds every retained message, so
//! the segments are the messages.
//!
//! - Files: every snapshot is its own file `snapshots/snapshot-<term>-<index>-<seq>.snap`,
//!   written once (temp file, fsync, rename, dir fsync) and never changed; the highest `seq`
//!   is the current one, the others are removed (a sender still holding one keeps reading its
//!   open file). Changes to the directory and the choice of the current file happen under
//!   `Shared::snapshot_files`.
//! - Build: writes only the prefix (manifest with per-segment CRCs, exactly the units it
//!   names, prefix CRC); the segment bytes are pinned in the CommitLog
//!   ([`raftmq_raft_log::PinnedRange`]) when the manifest is taken or the current snapshot
//!   is opened, so a snapshot being built or sent reads the same bytes even if retention
//!   deletes its segments meanwhile (their disk space is freed when it is dropped).
//! - Retention: before deleting segments it writes a new current snapshot (same last log id)
//!   without them and without the units pointing into them, so the stored one never names a
//!   deleted segment.
//! - Receive: [`SnapshotReceiver::verify`] checks the whole transfer (prefix CRC, lengths,
//!   manifest consistency, each segment's CRC, units inside the segments) before openraft
//!   sees it; the transport refuses a bad one and the leader sends again.
//! - Install: verifies again, stages each segment as a fallocated, fsynced file checking its
//!   CRC, then raft-log `replace_from_files` takes them over (byte-identical, same physical
//!   offsets; skipped when the local log already holds the last entry); the ConsumeQueues are
//!   rewritten from the units, the index rebuilt from the records, the dispatch checkpoint
//!   written, and the prefix published (cut or copied, fsync, rename).
//! - Crashes: an install that swaps the log records an intent first (`intent.rs`); a crash
//!   before the install ends is finished at open from the kept file, so the checkpoint never
//!   stays below the log's purge point.

mod build;
pub mod file;
pub mod format;
mod install;
mod intent;
mod verify;

use std::path::Path;
use std::path::PathBuf;

pub(crate) use build::build;
pub(crate) use build::trim_current;
pub use file::PartialSnapshot;
pub use file::SnapshotFile;
pub use file::SnapshotReceiver;
pub(crate) use install::install;
pub use install::read_manifest;
pub use install::InstallStop;
pub(crate) use intent::intent_path;
pub(crate) use intent::resume as resume_install;

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

/// File name of the `seq`-th snapshot written on this node, ending at `last`. Every snapshot
/// gets its own file, written once (temp file, fsync, rename) and never changed: retention
/// trimming the current snapshot writes a new file with the same `last` and a higher `seq`.
pub fn snapshot_name(last: Option<LogId>, seq: u64) -> String {
    match last {
        Some(l) => format!(
            "snapshot-{:020}-{:020}-{seq:020}.snap",
            l.leader_id.term, l.index
        ),
        None => format!("snapshot-none-{seq:020}.snap"),
    }
}

/// The `seq` of a snapshot file name (its last dash-separated field).
fn snapshot_seq(name: &str) -> Option<u64> {
    let body = name.strip_prefix("snapshot-")?.strip_suffix(".snap")?;
    body.rsplit('-').next()?.parse().ok()
}

/// The stored snapshots as `(seq, path)`, oldest first.
fn stored(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("read dir", dir, e))?;
    for e in rd {
        let name = e
            .map_err(|e| StoreError::io("read dir", dir, e))?
            .file_name();
        if let Some(seq) = snapshot_seq(&name.to_string_lossy()) {
            out.push((seq, dir.join(name)));
        }
    }
    out.sort();
    Ok(out)
}

/// Path of the next snapshot ending at `last`. The caller holds `Shared::snapshot_files`.
pub(crate) fn next_path(dir: &Path, last: Option<LogId>) -> Result<PathBuf> {
    let seq = stored(dir)?.last().map_or(1, |(s, _)| s + 1);
    Ok(dir.join(snapshot_name(last, seq)))
}

/// Removes every snapshot file in `dir` except `keep` (a snapshot being sent keeps its open
/// file; its name goes). The caller holds `Shared::snapshot_files`.
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

/// The newest snapshot built or installed, if any. Its segment bytes are pinned in the
/// CommitLog now, so what it serves never changes while it is being sent.
pub(crate) fn current(shared: &Shared) -> Result<Option<Snapshot>> {
    let dir = snapshots_dir(&shared.data_dir);
    let _files = shared.snapshot_files.lock();
    let Some((_, path)) = stored(&dir)?.pop() else {
        return Ok(None);
    };
    // One open: the manifest, the prefix and the tail all come from this file.
    let file = SnapshotFile::open(&path).map_err(|e| StoreError::io("open", &path, e))?;
    let m = read_manifest(&file)?;
    let file = if file.len() == install::crc_offset(&file, &m)? + 4 {
        with_pinned_tail(shared, file, &m)?
    } else {
        file
    };
    Ok(Some(Snapshot {
        meta: SnapshotMeta {
            last_log_id: m.last_log_id,
            last_membership: m.membership,
        },
        snapshot: file,
    }))
}

/// A stored prefix made whole: its segments pinned in the local CommitLog.
pub(crate) fn with_pinned_tail(
    shared: &Shared,
    file: SnapshotFile,
    m: &format::Manifest,
) -> Result<SnapshotFile> {
    let (Some(first), Some(last)) = (m.segments.first(), m.segments.last()) else {
        return Ok(file);
    };
    let pinned = shared
        .log
        .pin_range(first.start, last.start + last.len)
        .map_err(|e| {
            StoreError::corruption(
                file.path().display().to_string(),
                0,
                format!("snapshot segments not in the local log: {e}"),
            )
        })?;
    Ok(file.with_tail(pinned, m.segments.clone()))
}

impl Store {
    /// Test hook: make snapshot install stop with an error at `at` (see [`InstallStop`]).
    #[doc(hidden)]
    pub fn set_install_stop(&self, at: Option<InstallStop>) {
        *self.shared.install_stop.lock() = at;
    }

    /// A receiver for snapshots sent by the leader (the node's transport sink delegates to
    /// it), writing under `<data_dir>/snapshots/incoming`.
    pub fn snapshot_receiver(&self, max_snapshot_bytes: u64) -> SnapshotReceiver {
        SnapshotReceiver::new(
            snapshots_dir(&self.shared.data_dir).join("incoming"),
            max_snapshot_bytes,
            self.shared.log.config().segment_bytes,
        )
    }
}
