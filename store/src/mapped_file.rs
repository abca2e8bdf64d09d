//! A fixed-size, preallocated, memory-mapped file: the storage primitive of ConsumeQueue and
//! IndexFile segments.
//!
//! Files are created at their full size with `posix_fallocate` (falling back to writing zeros
//! where the filesystem cannot), so blocks are reserved up front: a full disk fails the
//! creation with [`StoreError::DiskFull`] instead of faulting (SIGBUS) a later write into the
//! mapping. A new file's directory entry is fsynced. Writes go through [`MappedFile::write`]
//! and [`MappedFile::zero_from`], which track the dirty byte range that
//! [`MappedFile::flush`] msyncs.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use memmap2::MmapMut;

use crate::error::Result;
use crate::error::StoreError;

/// One mapped file.
pub(crate) struct MappedFile {
    path: PathBuf,
    /// Invariant: `map.len()` is the file's length, fixed at creation, > 0.
    map: MmapMut,
    /// Byte range `[lo, hi)` written since the last flush. Invariant: `lo < hi <= map.len()`.
    dirty: Option<(usize, usize)>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MappedFile({}, {} bytes)",
            self.path.display(),
            self.map.len()
        )
    }
}

/// Suffix of a file under construction.
const TMP_SUFFIX: &str = ".tmp";

fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(TMP_SUFFIX);
    PathBuf::from(s)
}

/// If `name` in `dir` is a leftover `.tmp` file of an interrupted [`MappedFile::create`],
/// removes it and returns true.
/// Creates `dir` if needed and lists the numbers of its files named by a 20-digit number
/// (ConsumeQueue start offsets, IndexFile sequence numbers), sorted; leftover `.tmp` files of an
/// interrupted creation are removed. Any other file is a corruption error naming `what`.
pub(crate) fn list_numbered_files(dir: &Path, what: &str) -> Result<Vec<u64>> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    let mut numbers = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("read dir", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("read dir", dir, e))?;
        let name = entry.file_name();
        if let Some(n) = name.to_str() {
            if remove_if_tmp(dir, n)? {
                continue;
            }
        }
        let number = name
            .to_str()
            .and_then(crate::consume_queue::format::parse_file_name)
            .ok_or_else(|| {
                StoreError::corruption(
                    dir.display().to_string(),
                    0,
                    format!("unexpected file {name:?} in {what} dir"),
                )
            })?;
        numbers.push(number);
    }
    numbers.sort_unstable();
    Ok(numbers)
}

pub(crate) fn remove_if_tmp(dir: &Path, name: &str) -> Result<bool> {
    if !name.ends_with(TMP_SUFFIX) {
        return Ok(false);
    }
    let p = dir.join(name);
    tracing::warn!(path = %p.display(), "removing file left by an interrupted create");
    std::fs::remove_file(&p).map_err(|e| StoreError::io("remove", &p, e))?;
    Ok(true)
}

/// fsyncs a directory so that created/removed entries are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync dir", dir, e))
}

fn map(file: &File, path: &Path) -> Result<MmapMut> {
    // SAFETY: the file is owned by this store (no other process maps or truncates it while we
    // run; the data dir belongs to one node), and its length is fixed, so the mapping stays
    // valid for its lifetime.
    unsafe { MmapMut::map_mut(file) }.map_err(|e| StoreError::io("mmap", path, e))
}

/// Reserves `len` bytes of disk for `file`.
pub(crate) fn preallocate(file: &mut File, path: &Path, len: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    let off_len = libc::off_t::try_from(len)
        .map_err(|_| StoreError::invalid(format!("file length {len} too large")))?;
    // SAFETY: plain syscall on a valid, open file descriptor.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
    match rc {
        0 => Ok(()),
        libc::ENOSPC => Err(StoreError::DiskFull {
            reason: format!("cannot reserve {len} bytes for {}", path.display()),
        }),
        libc::EOPNOTSUPP | libc::EINVAL => {
            let zeros = vec![0u8; 1 << 20];
            let mut left = len;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                file.write_all(&zeros[..n])
                    .map_err(|e| io_or_full("preallocate", path, e))?;
                left -= n as u64;
            }
            Ok(())
        }
        errno => Err(io_or_full(
            "fallocate",
            path,
            std::io::Error::from_raw_os_error(errno),
        )),
    }
}

fn io_or_full(op: &'static str, path: &Path, e: std::io::Error) -> StoreError {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return StoreError::DiskFull {
            reason: format!("{op} of {}: {e}", path.display()),
        };
    }
    StoreError::io(op, path, e)
}

impl MappedFile {
    /// Creates `path` (must not exist) with `len` bytes reserved on disk, starting with `prefix`
    /// and zero after it, and maps it. The file is built as `<path>.tmp`, fsynced, then renamed
    /// into place and the directory fsynced, so a crash never leaves a half-made file under a
    /// real name (directory scans remove leftover `.tmp` files with [`remove_if_tmp`]).
    pub(crate) fn create(path: &Path, len: u64, prefix: &[u8]) -> Result<Self> {
        if len == 0 || prefix.len() as u64 > len {
            let reason = format!(
                "mapped file {} of length {len}, prefix {}",
                path.display(),
                prefix.len()
            );
            return Err(StoreError::invalid(reason));
        }
        if path.exists() {
            let e = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
            return Err(StoreError::io("create", path, e));
        }
        let tmp = tmp_path(path);
        let _ = std::fs::remove_file(&tmp);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| StoreError::io("create", &tmp, e))?;
        let res = Self::init(&mut file, &tmp, len, prefix).and_then(|()| {
            std::fs::rename(&tmp, path).map_err(|e| StoreError::io("rename", &tmp, e))
        });
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        let map = map(&file, path)?;
        Ok(MappedFile {
            path: path.to_owned(),
            map,
            dirty: None,
        })
    }

    fn init(file: &mut File, path: &Path, len: u64, prefix: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        preallocate(file, path, len)?;
        file.set_len(len)
            .map_err(|e| io_or_full("set_len", path, e))?;
        file.write_all_at(prefix, 0)
            .map_err(|e| io_or_full("write", path, e))?;
        file.sync_all().map_err(|e| io_or_full("fsync", path, e))
    }

    /// Opens an existing file, which must be exactly `len` bytes.
    pub(crate) fn open(path: &Path, len: u64) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io("open", path, e))?;
        let actual = file
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .len();
        if actual != len || len == 0 {
            return Err(StoreError::corruption(
                path.display().to_string(),
                actual,
                format!(
                    "file is {actual} bytes, expected {len} (was the file size config changed?)"
                ),
            ));
        }
        let map = map(&file, path)?;
        Ok(MappedFile {
            path: path.to_owned(),
            map,
            dirty: None,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn mark(&mut self, lo: usize, hi: usize) {
        if lo < hi {
            self.dirty = Some(match self.dirty {
                Some((a, b)) => (a.min(lo), b.max(hi)),
                None => (lo, hi),
            });
        }
    }

    /// Copies `data` to byte `at`. Panics if out of bounds (callers compute positions from the
    /// file's fixed geometry).
    pub(crate) fn write(&mut self, at: usize, data: &[u8]) {
        self.map[at..at + data.len()].copy_from_slice(data);
        self.mark(at, at + data.len());
    }

    /// Zeroes bytes `[at, len)`, touching (dirtying) only pages that hold non-zero bytes.
    pub(crate) fn zero_from(&mut self, at: usize) {
        let Some(first) = self.map[at..].iter().position(|b| *b != 0) else {
            return;
        };
        let last = self.map.len()
            - self.map[at..]
                .iter()
                .rev()
                .position(|b| *b != 0)
                .unwrap_or(0);
        self.map[at + first..last].fill(0);
        self.mark(at + first, last);
    }

    /// msyncs the bytes written since the last flush.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if let Some((lo, hi)) = self.dirty {
            self.map
                .flush_range(lo, hi - lo)
                .map_err(|e| StoreError::io("msync", &self.path, e))?;
            self.dirty = None;
        }
        Ok(())
    }

    /// Unmaps and deletes the file (the caller fsyncs the directory).
    pub(crate) fn remove(self) -> Result<()> {
        let path = self.path;
        drop(self.map);
        std::fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_write_reopen_remove() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        let mut f = MappedFile::create(&p, 64, &[9, 9]).expect("create");
        assert!(MappedFile::create(&p, 64, &[]).is_err(), "exists");
        assert_eq!(&f.bytes()[..3], &[9, 9, 0]);
        f.write(3, &[7]);
        f.write(60, &[1, 2, 3, 4]);
        assert_eq!(f.dirty, Some((3, 64)));
        f.flush().expect("flush");
        assert_eq!(f.dirty, None);
        drop(f);
        let mut f = MappedFile::open(&p, 64).expect("open");
        assert_eq!(f.bytes()[3], 7);
        f.zero_from(10);
        assert_eq!(f.dirty, Some((60, 64)));
        assert_eq!(&f.bytes()[60..], &[0; 4]);
        f.zero_from(10);
        assert!(MappedFile::open(&p, 32).expect_err("len").is_corruption());
        f.remove().expect("remove");
        assert!(!p.exists());
        assert!(MappedFile::create(&p, 0, &[]).is_err());
        assert!(MappedFile::create(&p, 1, &[1, 2]).is_err());
    }

    #[test]
    fn leftover_tmp_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("00000000000000000000");
        std::fs::write(tmp_path(&p), b"half").expect("write");
        // create() replaces a leftover; scans remove them.
        let _f = MappedFile::create(&p, 8, &[]).expect("create");
        assert!(!tmp_path(&p).exists());
        std::fs::write(tmp_path(&p), b"half").expect("write");
        assert!(remove_if_tmp(dir.path(), "00000000000000000000.tmp").expect("rm"));
        assert!(!remove_if_tmp(dir.path(), "00000000000000000000").expect("keep"));
        assert!(p.exists() && !tmp_path(&p).exists());
    }

    #[test]
    fn blocks_are_reserved() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        let _f = MappedFile::create(&p, 1 << 20, &[]).expect("create");
        let md = std::fs::metadata(&p).expect("stat");
        assert_eq!(md.len(), 1 << 20);
        assert!(
            md.blocks() * 512 >= 1 << 20,
            "not sparse: {} blocks",
            md.blocks()
        );
    }
}
