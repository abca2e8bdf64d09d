//! The `snapshots/` directory: snapshot file names (`snapshot-<term>-<index>-<seq>.snap`, the
//! highest `seq` is current), listing, the next name, removing the others and the leftovers of
//! interrupted transfers. Changes happen under `Shared::snapshot_files`.

use std::path::Path;
use std::path::PathBuf;

use crate::error::Result;
use crate::error::StoreError;
use crate::paths::incoming_dir;
use crate::paths::snapshots_dir;
use crate::paths::staged_dir;
use raftmq_raft_log::types::LogId;

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
pub(crate) fn stored(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
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
    let dir = snapshots_dir(data_dir);
    for d in [incoming_dir(&dir), staged_dir(&dir)] {
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| StoreError::io("remove dir", &d, e))?;
            tracing::info!(dir = %d.display(), "snapshot leftovers removed");
        }
    }
    Ok(())
}
