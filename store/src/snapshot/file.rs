//! [`SnapshotFile`] (openraft's `SnapshotData`): a snapshot readable in chunks by offset, and
//! the openraft [`Snapshot`] / [`SnapshotMeta`] types over it.
//!
//! A snapshot built or installed here is the file prefix (manifest, units, CRC) plus a tail of
//! segment bytes read from the node's own CommitLog; a received snapshot is one plain file
//! (see [`super::receiver`]). The node's transport source (`SnapshotSource` in the node crate)
//! delegates to [`SnapshotFile::read_chunk`] (see `store/tests/snapshot_transport.rs`).

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;

use crate::error::Result;
use crate::error::StoreError;
use crate::snapshot::format::read_head;
use crate::snapshot::format::Manifest;
use crate::snapshot::format::SegmentManifest;
use crate::snapshot::format::SnapshotBytes;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::PinnedRange;

/// openraft snapshot with our data type.
pub type Snapshot = openraft::storage::Snapshot<CommittedLeaderId, NodeId, PeerNode, SnapshotFile>;

/// openraft snapshot metadata with our types.
pub type SnapshotMeta = openraft::storage::SnapshotMeta<CommittedLeaderId, NodeId, PeerNode>;

/// Bytes read at a time by [`SnapshotBytes::read_range`].
const CHUNK_BYTES: u64 = 4 << 20;

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
            .all(|s| s.start >= pinned.start() && s.end() <= pinned.end()));
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
                return Ok(tail.pinned.read_at(s.start.advance(rel), n as u32)?);
            }
            at += s.len;
        }
        Ok(Vec::new())
    }
}

impl SnapshotBytes for SnapshotFile {
    fn source_name(&self) -> String {
        self.path.display().to_string()
    }

    fn total_len(&self) -> u64 {
        self.len()
    }

    fn read_range(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let corrupt =
            |at: u64, reason: String| StoreError::corruption(self.source_name(), at, reason);
        if offset.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(corrupt(
                offset,
                format!("{len} bytes expected, file too short"),
            ));
        }
        let mut buf = Vec::with_capacity(len as usize);
        while (buf.len() as u64) < len {
            let at = offset + buf.len() as u64;
            let want = (len - buf.len() as u64).min(CHUNK_BYTES) as usize;
            let c = self
                .read_chunk(at, want)
                .map_err(|e| StoreError::io("read", self.path(), e))?;
            if c.is_empty() {
                return Err(corrupt(at, "snapshot ends early".to_owned()));
            }
            buf.extend_from_slice(&c);
        }
        Ok(buf)
    }
}

/// Checks the magic and decodes the manifest of `f`.
pub fn read_manifest(f: &SnapshotFile) -> Result<Manifest> {
    read_head(f).map(|(_, m)| m)
}
