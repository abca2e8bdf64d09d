//! [`SnapshotReceiver`]: the chunked rebuild of a snapshot on the receiving node, its size
//! cap, and its check before openraft sees it. The node's transport sink (`SnapshotSink` in
//! the node crate) delegates to the inherent methods here (see
//! `store/tests/snapshot_transport.rs`).
//!
//! Nothing a transfer writes outlives it unless openraft installs it: a [`PartialSnapshot`]
//! dropped before [`SnapshotReceiver::finish`] removes its file, a snapshot refused by
//! [`SnapshotReceiver::verify`] is removed, and the [`Leftover`] of a verified one removes the
//! file when dropped after openraft answered, if the install did not take it over (declined:
//! stale vote or already committed; failed).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::error::StoreError;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::verify::check_extent;
use crate::snapshot::verify::verify;
use raftmq_raft_log::types::LogId;

/// A snapshot being received. Dropped before [`SnapshotReceiver::finish`] (the transfer
/// failed or was refused), it removes its file.
#[derive(Debug)]
pub struct PartialSnapshot {
    /// Empty once `finish` took the file over.
    path: PathBuf,
    file: Option<File>,
    written: u64,
    /// Most bytes this transfer may write.
    cap: u64,
}

impl Drop for PartialSnapshot {
    fn drop(&mut self) {
        drop(self.file.take());
        if !self.path.as_os_str().is_empty() {
            remove_quietly(&self.path, "an unfinished snapshot transfer");
        }
    }
}

/// A verified incoming snapshot's file, removed on drop if it is still in the incoming dir
/// (install moves it out). Hold it until openraft answered the install.
#[derive(Debug)]
#[must_use = "dropping it at once removes the snapshot before openraft installs it"]
pub struct Leftover(Option<PathBuf>);

impl Drop for Leftover {
    fn drop(&mut self) {
        if let Some(p) = self.0.take().filter(|p| p.exists()) {
            remove_quietly(&p, "a snapshot openraft did not install");
        }
    }
}

fn remove_quietly(path: &Path, what: &str) {
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!(path = %path.display(), "removed {what}"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove {what}"),
    }
}

/// Receives snapshots into files under `<data_dir>/snapshots/incoming/` (the transport's sink).
#[derive(Clone, Debug)]
pub struct SnapshotReceiver {
    dir: PathBuf,
    max_snapshot_bytes: u64,
    segment_bytes: u64,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl SnapshotReceiver {
    /// A receiver writing under `dir`, refusing snapshots above `max_snapshot_bytes` (0: half
    /// the space available on `dir`'s file system when a transfer begins, since installing
    /// stages the segments a second time), for a node whose CommitLog segments are
    /// `segment_bytes` long.
    pub fn new(dir: PathBuf, max_snapshot_bytes: u64, segment_bytes: u64) -> Self {
        SnapshotReceiver {
            dir,
            max_snapshot_bytes,
            segment_bytes,
        }
    }

    /// The size cap of a transfer starting now (see [`new`](Self::new)).
    fn cap(&self) -> io::Result<u64> {
        if self.max_snapshot_bytes > 0 {
            return Ok(self.max_snapshot_bytes);
        }
        let s = crate::fs_space::statvfs(&self.dir).map_err(io::Error::other)?;
        Ok(s.available_bytes / 2)
    }

    /// Starts receiving.
    pub fn begin(&self) -> io::Result<PartialSnapshot> {
        std::fs::create_dir_all(&self.dir)?;
        let cap = self.cap()?;
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("incoming-{}-{n}.snap", std::process::id()));
        let file = File::create(&path)?;
        Ok(PartialSnapshot {
            path,
            file: Some(file),
            written: 0,
            cap,
        })
    }

    /// Appends `data`, which must start at `offset` = bytes written so far. Past the cap the
    /// error is [`io::ErrorKind::FileTooLarge`] naming `max-snapshot-bytes`.
    pub fn write_chunk(&self, p: &mut PartialSnapshot, offset: u64, data: &[u8]) -> io::Result<()> {
        if offset != p.written {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot chunk at offset {offset}, expected {}", p.written),
            ));
        }
        let end = offset.checked_add(data.len() as u64);
        if end.is_none_or(|e| e > p.cap) {
            let setting = if self.max_snapshot_bytes > 0 {
                "max-snapshot-bytes".to_owned()
            } else {
                "max-snapshot-bytes (0: half the free disk space)".to_owned()
            };
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "snapshot is larger than {} bytes, the limit {setting} allows",
                    p.cap
                ),
            ));
        }
        let file = p.file.as_ref().expect("the file is open until finish");
        file.write_all_at(data, offset)?;
        p.written += data.len() as u64;
        Ok(())
    }

    /// All chunks arrived: fsync and open for install.
    pub fn finish(&self, mut p: PartialSnapshot) -> io::Result<SnapshotFile> {
        let file = p.file.take().expect("the file is open until finish");
        file.sync_all()?;
        drop(file);
        let f = SnapshotFile::open(&p.path)?;
        // The file is the caller's now (verify, then install or the leftover guard).
        p.path = PathBuf::new();
        Ok(f)
    }

    /// The guard that removes `file` if openraft does not take it over (see [`Leftover`]).
    /// Files outside the incoming dir are never touched.
    pub fn leftover(&self, file: &SnapshotFile) -> Leftover {
        let path = file.path();
        Leftover((path.parent() == Some(self.dir.as_path())).then(|| path.to_owned()))
    }

    /// Checks a received snapshot that should end at `last_log_id` before it is handed to
    /// openraft (every part's CRC, lengths, manifest consistency, and that it carries the log
    /// up to its last entry; see `snapshot/verify.rs`).
    /// A bad one is removed and refused with an error naming what is wrong; the caller
    /// answers the sender with it, so the leader sends again and nothing was installed.
    pub fn verify(
        &self,
        file: SnapshotFile,
        last_log_id: Option<LogId>,
    ) -> Result<SnapshotFile, StoreError> {
        let checked = verify(&file, last_log_id, self.segment_bytes)
            .and_then(|v| check_extent(&file, &v.manifest));
        match checked {
            Ok(()) => Ok(file),
            Err(e) => {
                let path = file.path().to_owned();
                drop(file);
                if path.parent() == Some(self.dir.as_path()) {
                    remove_quietly(&path, "a refused snapshot");
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
#[path = "receiver_tests.rs"]
mod tests;
