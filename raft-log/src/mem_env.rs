//! An in-memory [`Env`] for fault-injection tests: it remembers which bytes were synced, so
//! [`MemEnv::crash`] can drop everything unsynced or leave a torn partial write, and it can be
//! told to fail syncs with EIO.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::env::Env;
use crate::env::PlainFile;
use crate::env::SegmentFile;

/// How a simulated crash treats bytes written but not synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// All unsynced bytes are lost.
    DropUnsynced,
    /// Of the unsynced bytes of each file, only the first `keep` survive (a torn write).
    Torn {
        /// Unsynced bytes kept per file.
        keep: usize,
    },
}

#[derive(Default)]
struct MemFileData {
    /// What readers see.
    live: Vec<u8>,
    /// What survives a crash.
    durable: Vec<u8>,
}

/// One in-memory file.
#[derive(Default)]
struct MemFile {
    data: Mutex<MemFileData>,
    fail_sync: Arc<AtomicBool>,
    /// End of the furthest drop from the (simulated) page cache.
    dropped_to: AtomicU64,
}

impl MemFile {
    fn crash(&self, mode: CrashMode) {
        let mut d = self.data.lock();
        let live = std::mem::take(&mut d.live);
        let mut next = d.durable.clone();
        if let CrashMode::Torn { keep } = mode {
            next.resize(live.len().max(next.len()), 0);
            let first_diff = live.iter().zip(next.iter()).position(|(a, b)| a != b);
            if let Some(at) = first_diff {
                let end = (at + keep).min(live.len());
                next[at..end].copy_from_slice(&live[at..end]);
            }
            next.truncate(live.len().max(d.durable.len()));
        }
        d.live = next.clone();
        d.durable = next;
    }
}

fn eio() -> io::Error {
    io::Error::other("injected EIO")
}

impl SegmentFile for MemFile {
    fn capacity(&self) -> u64 {
        self.data.lock().live.len() as u64
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = self.data.lock();
        let end = offset as usize + data.len();
        if end > d.live.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write past segment end",
            ));
        }
        d.live[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.data.lock();
        let end = offset as usize + buf.len();
        let src = d
            .live
            .get(offset as usize..end)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past segment end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn sync_range(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(eio());
        }
        let mut d = self.data.lock();
        let (start, end) = (offset as usize, (offset + len) as usize);
        let src = d.live[start..end].to_vec();
        if d.durable.len() < d.live.len() {
            let n = d.live.len();
            d.durable.resize(n, 0);
        }
        d.durable[start..end].copy_from_slice(&src);
        Ok(())
    }

    /// Counts the bytes; fails unless every one of them is durable (a real page cache would
    /// write a dirty page back rather than drop it, but the log promises to drop only what
    /// it flushed, and this holds it to that).
    fn drop_cache(&self, offset: u64, len: u64) -> io::Result<()> {
        let d = self.data.lock();
        let (start, end) = (offset as usize, offset.saturating_add(len) as usize);
        let (Some(live), Some(durable)) = (d.live.get(start..end), d.durable.get(start..end))
        else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("dropping {start}..{end} from the cache: not durable yet"),
            ));
        };
        if live != durable {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("dropping {start}..{end} from the cache: holds bytes not durable yet"),
            ));
        }
        self.dropped_to.fetch_max(end as u64, Ordering::SeqCst);
        Ok(())
    }
}

impl PlainFile for MemFile {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = self.data.lock();
        let end = offset as usize + data.len();
        if d.live.len() < end {
            d.live.resize(end, 0);
        }
        d.live[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn read_all(&self) -> io::Result<Vec<u8>> {
        Ok(self.data.lock().live.clone())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.data.lock().live.resize(len as usize, 0);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(eio());
        }
        let mut d = self.data.lock();
        d.durable = d.live.clone();
        Ok(())
    }
}

/// File names and their files.
type Names = BTreeMap<PathBuf, Arc<MemFile>>;

/// In-memory file system with crash simulation. Directory operations are durable at once,
/// unless [`MemEnv::set_volatile_dirs`] asks for a crash to forget those not fsynced.
#[derive(Clone, Default)]
pub struct MemEnv {
    files: Arc<Mutex<Names>>,
    /// With volatile directories: the names a crash keeps (those of the last `sync_dir` of
    /// each directory, plus segments created durably).
    durable_names: Arc<Mutex<Option<Names>>>,
    fail_sync: Arc<AtomicBool>,
    disk_full: Arc<AtomicBool>,
}

impl MemEnv {
    /// A new empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates a power loss: every file keeps only what the crash mode lets survive (and,
    /// with volatile directories, only the names their directory's last fsync saw).
    /// The log using this env must be stopped first.
    pub fn crash(&self, mode: CrashMode) {
        let mut files = self.files.lock();
        if let Some(names) = &*self.durable_names.lock() {
            *files = names.clone();
        }
        for f in files.values() {
            f.crash(mode);
        }
    }

    /// From now on, a crash keeps a created, removed or renamed name only once its directory
    /// was fsynced (`true`), as POSIX promises; `false`: every name is durable at once.
    pub fn set_volatile_dirs(&self, volatile: bool) {
        let names = volatile.then(|| self.files.lock().clone());
        *self.durable_names.lock() = names;
    }

    /// With volatile directories, makes `path`'s current name (or its absence) durable.
    fn persist_name(&self, path: &Path, file: Option<Arc<MemFile>>) {
        if let Some(names) = &mut *self.durable_names.lock() {
            match file {
                Some(f) => names.insert(path.to_path_buf(), f),
                None => names.remove(path),
            };
        }
    }

    /// Makes every later sync fail with EIO (`true`) or succeed again (`false`).
    pub fn set_fail_sync(&self, fail: bool) {
        self.fail_sync.store(fail, Ordering::SeqCst);
    }

    /// Makes every later segment creation fail with ENOSPC (`true`) or succeed (`false`).
    pub fn set_disk_full(&self, full: bool) {
        self.disk_full.store(full, Ordering::SeqCst);
    }

    /// Overwrites bytes of a file (both live and durable): simulated media corruption.
    pub fn corrupt(&self, path: &Path, offset: u64, data: &[u8]) -> bool {
        let files = self.files.lock();
        let Some(f) = files.get(path) else {
            return false;
        };
        let mut d = f.data.lock();
        let end = offset as usize + data.len();
        if end > d.live.len() {
            return false;
        }
        d.live[offset as usize..end].copy_from_slice(data);
        if d.durable.len() >= end {
            d.durable[offset as usize..end].copy_from_slice(data);
        }
        true
    }

    /// Bytes the files dropped from the page cache ([`SegmentFile::drop_cache`], each call
    /// checked to cover durable bytes only): per file, up to the end of its furthest drop.
    pub fn dropped_cache_bytes(&self) -> u64 {
        let files = self.files.lock();
        files
            .values()
            .map(|f| f.dropped_to.load(Ordering::SeqCst))
            .sum()
    }

    /// Paths of all files.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.lock().keys().cloned().collect()
    }

    fn new_file(&self, len: usize) -> Arc<MemFile> {
        Arc::new(MemFile {
            data: Mutex::new(MemFileData {
                live: vec![0; len],
                durable: vec![0; len],
            }),
            fail_sync: self.fail_sync.clone(),
            dropped_to: AtomicU64::new(0),
        })
    }
}

impl Env for MemEnv {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let files = self.files.lock();
        let names = files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        Ok(names.collect())
    }

    fn create_segment(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>> {
        if self.disk_full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(28));
        }
        let f = self.new_file(capacity as usize);
        self.files.lock().insert(path.to_path_buf(), f.clone());
        // Created durably (the trait's contract: temporary name, fsync, rename, dir fsync).
        self.persist_name(path, Some(f.clone()));
        Ok(f)
    }

    fn open_segment(&self, path: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        let files = self.files.lock();
        let f = files
            .get(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, path.display().to_string()))?;
        Ok(f.clone())
    }

    fn open_plain(&self, path: &Path) -> io::Result<Arc<dyn PlainFile>> {
        let mut files = self.files.lock();
        let f = files
            .entry(path.to_path_buf())
            .or_insert_with(|| self.new_file(0));
        Ok(f.clone())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.files.lock().remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = self.files.lock();
        let f = files
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, from.display().to_string()))?;
        files.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let files = self.files.lock();
        if let Some(names) = &mut *self.durable_names.lock() {
            names.retain(|p, _| p.parent() != Some(dir));
            for (p, f) in files.iter().filter(|(p, _)| p.parent() == Some(dir)) {
                names.insert(p.clone(), f.clone());
            }
        }
        Ok(())
    }
}
