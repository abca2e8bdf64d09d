//! [`SnapshotReceiver`]: the chunked rebuild of a snapshot on the receiving node, and its
//! check before openraft sees it. The node's transport sink (`SnapshotSink` in the node crate)
//! delegates to the inherent methods here (see `store/tests/snapshot_transport.rs`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::error::StoreError;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::verify::verify;
use raftmq_raft_log::types::LogId;

/// A snapshot being received.
#[derive(Debug)]
pub struct PartialSnapshot {
    path: PathBuf,
    file: File,
    written: u64,
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
    /// A receiver writing under `dir`, refusing snapshots above `max_snapshot_bytes`, for a
    /// node whose CommitLog segments are `segment_bytes` long.
    pub fn new(dir: PathBuf, max_snapshot_bytes: u64, segment_bytes: u64) -> Self {
        SnapshotReceiver {
            dir,
            max_snapshot_bytes,
            segment_bytes,
        }
    }

    /// Starts receiving.
    pub fn begin(&self) -> io::Result<PartialSnapshot> {
        std::fs::create_dir_all(&self.dir)?;
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("incoming-{}-{n}.snap", std::process::id()));
        let file = File::create(&path)?;
        Ok(PartialSnapshot {
            path,
            file,
            written: 0,
        })
    }

    /// Appends `data`, which must start at `offset` = bytes written so far.
    pub fn write_chunk(&self, p: &mut PartialSnapshot, offset: u64, data: &[u8]) -> io::Result<()> {
        if offset != p.written {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot chunk at offset {offset}, expected {}", p.written),
            ));
        }
        if offset + data.len() as u64 > self.max_snapshot_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot larger than {} bytes", self.max_snapshot_bytes),
            ));
        }
        p.file.write_all_at(data, offset)?;
        p.written += data.len() as u64;
        Ok(())
    }

    /// All chunks arrived: fsync and open for install.
    pub fn finish(&self, p: PartialSnapshot) -> io::Result<SnapshotFile> {
        p.file.sync_all()?;
        drop(p.file);
        SnapshotFile::open(&p.path)
    }

    /// Checks a received snapshot that should end at `last_log_id` before it is handed to
    /// openraft (every part's CRC, lengths, manifest consistency; see `snapshot/verify.rs`).
    /// A bad one is removed and refused with an error naming what is wrong; the caller
    /// answers the sender with it, so the leader sends again and nothing was installed.
    pub fn verify(
        &self,
        file: SnapshotFile,
        last_log_id: Option<LogId>,
    ) -> Result<SnapshotFile, StoreError> {
        match verify(&file, last_log_id, self.segment_bytes) {
            Ok(_) => Ok(file),
            Err(e) => {
                let path = file.path().to_owned();
                drop(file);
                if path.parent() == Some(self.dir.as_path()) {
                    if let Err(rm) = std::fs::remove_file(&path) {
                        tracing::warn!(path = %path.display(), error = %rm, "cannot remove a refused snapshot");
                    }
                }
                Err(e)
            }
        }
    }
}
