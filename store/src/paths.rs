//! The store's part of a node's data dir: every path the store reads or writes, in one place.
//!
//! ```text
//! <data_dir>/
//!   abort                         present while open (found at open = unclean shutdown)
//!   disk-reserve                  preallocated room retention releases on a full disk
//!   consumequeue/<topic>/<queue>/ ConsumeQueue files
//!   index/                        IndexFiles
//!   store-meta/checkpoint         dispatch checkpoint (older nodes: checkpoint.json)
//!   store-meta/install-intent.json  an unfinished snapshot install that swaps the log
//!   snapshots/snapshot-*.snap     snapshot files (the highest seq is current)
//!   snapshots/pending-install.snap  the snapshot an install intent names
//!   snapshots/incoming/           transfers being received
//!   snapshots/staged/             segments staged for an install
//! ```
//!
//! raft-log owns `commitlog/`, `raft-index/` and `meta/` beside these.

use std::path::Path;
use std::path::PathBuf;

/// `<data_dir>/abort`.
pub(crate) fn abort_path(data_dir: &Path) -> PathBuf {
    data_dir.join("abort")
}

/// `<data_dir>/disk-reserve` (see [`crate::disk_reserve`]).
pub(crate) fn disk_reserve_path(data_dir: &Path) -> PathBuf {
    data_dir.join("disk-reserve")
}

/// `<data_dir>/consumequeue`.
pub(crate) fn consume_queue_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("consumequeue")
}

/// `<data_dir>/index`.
pub(crate) fn index_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("index")
}

/// `<data_dir>/store-meta`.
pub(crate) fn store_meta_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("store-meta")
}

/// `<data_dir>/store-meta/checkpoint`.
pub fn checkpoint_path(data_dir: &Path) -> PathBuf {
    store_meta_dir(data_dir).join("checkpoint")
}

/// `<data_dir>/store-meta/checkpoint.json`: the checkpoint as nodes before the binary file
/// wrote it (read when `checkpoint` does not exist).
pub(crate) fn legacy_checkpoint_path(data_dir: &Path) -> PathBuf {
    store_meta_dir(data_dir).join("checkpoint.json")
}

/// `<data_dir>/store-meta/install-intent.json`.
pub(crate) fn intent_path(data_dir: &Path) -> PathBuf {
    store_meta_dir(data_dir).join("install-intent.json")
}

/// `<data_dir>/snapshots`.
pub fn snapshots_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("snapshots")
}

/// `<data_dir>/snapshots/pending-install.snap` (not a `snapshot-*` name: never current).
pub(crate) fn pending_path(data_dir: &Path) -> PathBuf {
    snapshots_dir(data_dir).join("pending-install.snap")
}

/// `<snapshots dir>/incoming`: where received transfers are written.
pub(crate) fn incoming_dir(snapshots_dir: &Path) -> PathBuf {
    snapshots_dir.join("incoming")
}

/// `<snapshots dir>/staged`: where an install stages the segments for the log swap.
pub(crate) fn staged_dir(snapshots_dir: &Path) -> PathBuf {
    snapshots_dir.join("staged")
}
