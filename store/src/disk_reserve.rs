//! The disk reserve: a preallocated file `<data_dir>/disk-reserve` that retention deletes
//! before it writes on a full disk, so freeing space never needs free space first.
//!
//! Retention writes before it deletes: the stored snapshot is trimmed (a new prefix file is
//! written, then the old one removed), the Raft purge records the purged id in `meta/` (sled),
//! and when no stored snapshot covers the purge point a new snapshot prefix is written. On a
//! disk without a free block each of these fails with ENOSPC, and a full disk could never be
//! cleaned. So each node keeps this reserve: as many bytes as its stored snapshot files take
//! plus a margin of `min(16 MiB, segment-bytes)` (one snapshot prefix of today's size, room for
//! its growth and for the metadata writes). The retention driver releases it (unlink) before a
//! pass that deletes segments and makes it again afterwards, at the new size; when the disk is
//! still too full to make it, that is logged and tried again at the next pass.
//!
//! The reserve's bytes are never read, so it is not fsynced: after a crash it may be lost or
//! short, and [`ensure`] makes it whole again.

use std::fs::OpenOptions;

use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::preallocate;
use crate::paths::disk_reserve_path;
use crate::paths::snapshots_dir;
use crate::state::Shared;

/// Most margin above the stored snapshots' size, in bytes.
pub const MAX_MARGIN_BYTES: u64 = 16 << 20;

/// Bytes the reserve should hold now: the stored snapshot files plus the margin.
pub(crate) fn target_bytes(shared: &Shared) -> Result<u64> {
    let dir = snapshots_dir(&shared.data_dir);
    let mut snapshots = 0u64;
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(margin(shared)),
        Err(e) => return Err(StoreError::io("read dir", &dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("read dir", &dir, e))?;
        let is_snapshot = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("snapshot-") && n.ends_with(".snap"));
        if !is_snapshot {
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| StoreError::io("stat", entry.path(), e))?;
        snapshots = snapshots.saturating_add(meta.len());
    }
    Ok(snapshots.saturating_add(margin(shared)))
}

fn margin(shared: &Shared) -> u64 {
    MAX_MARGIN_BYTES.min(shared.log.config().segment_bytes)
}

/// Bytes the reserve file holds (0: none).
pub(crate) fn reserved_bytes(shared: &Shared) -> u64 {
    std::fs::metadata(disk_reserve_path(&shared.data_dir)).map_or(0, |m| m.len())
}

/// Makes the reserve hold [`target_bytes`] (grows it, never shrinks it). Returns the bytes
/// reserved; `Ok(0)` with a warning when the disk has no room for it (the file is then
/// removed: a partial allocation is not kept).
pub(crate) fn ensure(shared: &Shared) -> Result<u64> {
    let target = target_bytes(shared)?;
    let have = reserved_bytes(shared);
    if have >= target {
        return Ok(have);
    }
    let path = disk_reserve_path(&shared.data_dir);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StoreError::io("create", &path, e))?;
    match preallocate(&mut file, &path, target) {
        Ok(()) => {
            tracing::debug!(bytes = target, "disk reserve made");
            Ok(target)
        }
        Err(e) if e.is_disk_full() => {
            drop(file);
            let _ = std::fs::remove_file(&path);
            tracing::warn!(bytes = target, error = %e,
                "disk reserve not made: the disk is full; retention will try again");
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// Deletes the reserve, giving its bytes back to the file system; returns how many.
pub(crate) fn release(shared: &Shared) -> Result<u64> {
    let path = disk_reserve_path(&shared.data_dir);
    let have = reserved_bytes(shared);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            tracing::info!(bytes = have, "disk reserve released for retention");
            Ok(have)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StoreError::io("remove", &path, e)),
    }
}
