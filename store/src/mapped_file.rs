//! A fixed-size, preallocated, memory-mapped file: the storage primitive of ConsumeQueue and
//! IndexFile segments.
//!
//! Files are created at their full size (zero-filled, `set_len`) so the mapping never grows;
//! a new file's directory entry is fsynced. Writes go into the mapping; [`MappedFile::flush`]
//! msyncs them.

use std::fs::File;
use std::fs::OpenOptions;
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
    /// Bytes written since the last flush.
    dirty: bool,
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

/// fsyncs a directory so that created/removed entries are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync dir", dir, e))
}

fn map(file: &File, path: &Path) -> Result<MmapMut> {
    // SAFETY: the file is owned by this store (no other process maps or truncates it while we
    // run; the data dir is locked by the node), and its length is fixed, so the mapping stays
    // valid for its lifetime.
    unsafe { MmapMut::map_mut(file) }.map_err(|e| StoreError::io("mmap", path, e))
}

impl MappedFile {
    /// Creates `path` (must not exist) with `len` zero bytes, maps it and fsyncs its directory.
    pub(crate) fn create(path: &Path, len: u64) -> Result<Self> {
        if len == 0 {
            return Err(StoreError::invalid(format!(
                "mapped file {} of length 0",
                path.display()
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| StoreError::io("create", path, e))?;
        file.set_len(len)
            .map_err(|e| StoreError::io("set_len", path, e))?;
        file.sync_all()
            .map_err(|e| StoreError::io("fsync", path, e))?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        let map = map(&file, path)?;
        Ok(MappedFile {
            path: path.to_owned(),
            map,
            dirty: false,
        })
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
            dirty: false,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.dirty = true;
        &mut self.map
    }

    /// msyncs if anything was written since the last flush.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.dirty {
            self.map
                .flush()
                .map_err(|e| StoreError::io("msync", &self.path, e))?;
            self.dirty = false;
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
        let mut f = MappedFile::create(&p, 64).expect("create");
        assert!(MappedFile::create(&p, 64).is_err(), "create_new");
        f.bytes_mut()[3] = 7;
        f.flush().expect("flush");
        drop(f);
        let f = MappedFile::open(&p, 64).expect("open");
        assert_eq!(f.bytes()[3], 7);
        assert!(MappedFile::open(&p, 32).expect_err("len").is_corruption());
        f.remove().expect("remove");
        assert!(!p.exists());
        assert!(MappedFile::create(&p, 0).is_err());
    }
}
