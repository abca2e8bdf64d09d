//! The current snapshot (the highest `seq` in `snapshots/`), opened for openraft with its
//! segment bytes pinned in the CommitLog.

use crate::error::Result;
use crate::error::StoreError;
use crate::paths::snapshots_dir;
use crate::snapshot::dir::stored;
use crate::snapshot::file::Snapshot;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::file::SnapshotMeta;
use crate::snapshot::format::layout;
use crate::snapshot::format::read_head;
use crate::snapshot::format::Manifest;
use crate::state::Shared;

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
    let (h, m) = read_head(&file)?;
    let file = if file.len() == layout(&file, &h, &m)?.segments_at {
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
fn with_pinned_tail(shared: &Shared, file: SnapshotFile, m: &Manifest) -> Result<SnapshotFile> {
    let (Some(first), Some(last)) = (m.segments.first(), m.segments.last()) else {
        return Ok(file);
    };
    let pinned = shared.log.pin_range(first.start, last.end()).map_err(|e| {
        StoreError::corruption(
            file.path().display().to_string(),
            0,
            format!("snapshot segments not in the local log: {e}"),
        )
    })?;
    Ok(file.with_tail(pinned, m.segments.clone()))
}
