//! [`SnapshotFile`] (openraft's `SnapshotData`) and [`SnapshotReceiver`]: a snapshot readable
//! in chunks by offset, and its chunked rebuild on the receiving node.
//!
//! A snapshot built or installed here is the file prefix (manifest, units, CRC) plus a tail of
//! segment bytes read from the node's own CommitLog; a received snapshot is one plain file.
//! The node's transport traits (`SnapshotSource`, `SnapshotSink` in the node crate) are
//! implemented there by delegating to the inherent methods here (see
//! `store/tests/snapshot_transport.rs`).

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::error::StoreError;
use crate::snapshot::format::SegmentManifest;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::PinnedRange;

/// Segment bytes served from the CommitLog, pinned when the snapshot was opened: retention
/// deleting segments meanwhile changes nothing this snapshot reads.
struct Tail {
    pinned: PinnedRange,
    segments: Vec<SegmentManifest>,
}

/// A snapshot: a file, optionally followed by segment bytes read from the CommitLog.
pub struct SnapshotFile {
    path: PathBuf,
    file: File,
    file_len: u64,
    tail: Option<Tail>,
}

impl fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("file_len", &self.file_len)
            .field("len", &self.len())
            .finish()
    }
}

impl SnapshotFile {
    /// Opens a snapshot that lies entirely in one file (e.g. a received one).
    pub fn open(path: &Path) -> io::Result<SnapshotFile> {
        let file = File::open(path)?;
        let file_len = file.metadata()?.len();
        Ok(SnapshotFile {
            path: path.to_owned(),
            file,
            file_len,
            tail: None,
        })
    }

    /// Makes this stored prefix a whole snapshot: its segment part is read from `pinned`,
    /// which must cover every segment in `segments`.
    pub(crate) fn with_tail(mut self, pinned: PinnedRange, segments: Vec<SegmentManifest>) -> Self {
        debug_assert!(segments
            .iter()
            .all(|s| s.start >= pinned.start() && s.start + s.len <= pinned.end()));
        self.tail = Some(Tail { pinned, segments });
        self
    }

    /// Path of the file part.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the whole snapshot in bytes.
    pub fn len(&self) -> u64 {
        let tail: u64 = self
            .tail
            .as_ref()
            .map_or(0, |t| t.segments.iter().map(|s| s.len).sum());
        self.file_len + tail
    }

    /// True for an empty file (never a valid snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads exactly `buf.len()` bytes at `offset` of the file part.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// Reads at most `max_bytes` from `offset`; empty at the end (the transport's source).
    /// A chunk never spans the file part and a segment, or two segments.
    pub fn read_chunk(&self, offset: u64, max_bytes: usize) -> io::Result<Vec<u8>> {
        if offset < self.file_len {
            let n = (self.file_len - offset).min(max_bytes as u64) as usize;
            let mut buf = vec![0u8; n];
            self.file.read_exact_at(&mut buf, offset)?;
            return Ok(buf);
        }
        let Some(tail) = &self.tail else {
            return Ok(Vec::new());
        };
        let mut at = self.file_len;
        for s in &tail.segments {
            if offset < at + s.len {
                let rel = offset - at;
                let n = (s.len - rel).min(max_bytes as u64).min(u64::from(u32::MAX));
                return Ok(tail.pinned.read_at(s.start + rel, n as u32)?);
            }
            at += s.len;
        }
        Ok(Vec::new())
    }
}

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
        match crate::snapshot::verify::verify(&file, last_log_id, self.segment_bytes) {
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
