//! [`SnapshotFile`] (openraft's `SnapshotData`) and [`SnapshotReceiver`]: a file-backed
//! snapshot readable in chunks by offset, and its chunked rebuild on the receiving node.
//!
//! The node's transport traits (`SnapshotSource`, `SnapshotSink` in the node crate) are
//! implemented there by delegating to the inherent methods here.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

/// A snapshot on disk.
#[derive(Debug)]
pub struct SnapshotFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl SnapshotFile {
    /// Opens an existing snapshot file.
    pub fn open(path: &Path) -> io::Result<SnapshotFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(SnapshotFile {
            path: path.to_owned(),
            file,
            len,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file (never a valid snapshot).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// Reads at most `max_bytes` from `offset`; empty at the end (the transport's source).
    pub fn read_chunk(&self, offset: u64, max_bytes: usize) -> io::Result<Vec<u8>> {
        let n = self.len.saturating_sub(offset).min(max_bytes as u64) as usize;
        let mut buf = vec![0u8; n];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
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
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl SnapshotReceiver {
    /// A receiver writing under `dir`, refusing snapshots above `max_snapshot_bytes`.
    pub fn new(dir: PathBuf, max_snapshot_bytes: u64) -> Self {
        SnapshotReceiver {
            dir,
            max_snapshot_bytes,
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
}
