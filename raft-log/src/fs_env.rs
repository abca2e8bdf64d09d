//! [`FsEnv`]: the real [`Env`] of the log: `std::fs` for files and directories, memmap2 for
//! segments (read through a shared mapping, written with pwrite by default).

use std::fs;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use crate::env::tmp_path;
use crate::env::Env;
use crate::env::PlainFile;
use crate::env::SegmentFile;
use crate::fs_segment::map_segment;
use crate::stage::Stage;
use crate::stage_file::BootId;

/// Default step of [`Env::remove_large`] on [`FsEnv`]: 64 MiB.
pub const REMOVE_STEP_BYTES: u64 = 64 << 20;

/// The real environment: `std::fs` and memmap2.
#[derive(Clone)]
pub struct FsEnv {
    /// Write segments by storing into the mapping and flush with msync; else (the default for
    /// both policies) pwrite + fdatasync. See the `MmapSegment` docs in `fs_segment.rs`.
    pub mapped_writes: bool,
    /// How much [`Env::remove_large`] shrinks a file per step. Default [`REMOVE_STEP_BYTES`];
    /// tests lower it to exercise the shrinking on small segments.
    pub remove_step_bytes: u64,
    /// The write stage its segments share (`write-stage-bytes`; see `stage.rs`): `None`,
    /// appends through the page cache.
    pub stage: Option<Arc<Stage>>,
}

impl std::fmt::Debug for FsEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsEnv")
            .field("mapped_writes", &self.mapped_writes)
            .field("remove_step_bytes", &self.remove_step_bytes)
            .field("stage", &self.stage.is_some())
            .finish()
    }
}

impl FsEnv {
    /// The default environment with a write stage of `bytes` (0: none).
    pub fn with_stage(bytes: u64) -> FsEnv {
        FsEnv {
            stage: (bytes > 0).then(|| Arc::new(Stage::new(bytes))),
            ..FsEnv::default()
        }
    }

    /// The default environment with a write stage of `bytes` in the stage file at `path` (see
    /// `stage_file.rs`), `boot` being this boot's id.
    pub fn with_stage_file(bytes: u64, path: PathBuf, boot: BootId) -> FsEnv {
        FsEnv {
            stage: Some(Arc::new(Stage::in_file(bytes, path, boot))),
            ..FsEnv::default()
        }
    }
}

impl Default for FsEnv {
    fn default() -> Self {
        FsEnv {
            mapped_writes: false,
            remove_step_bytes: REMOVE_STEP_BYTES,
            stage: None,
        }
    }
}

struct FsPlain {
    file: File,
}

impl PlainFile for FsPlain {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.file, data, offset)
    }

    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = self.file.metadata()?.len() as usize;
        let mut buf = vec![0u8; len];
        std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut buf, 0)?;
        Ok(buf)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// Reserves `len` zeroed bytes so that a full disk fails here, never as SIGBUS on the mapping
/// or mid-append: `fallocate` (blocks reserved, no data written), or zeros written where the
/// file system lacks it. Measured on the dev VM (ext4): 1 KiB pwrite into fallocated space
/// ≈ 2 µs against ≈ 10 µs over written zeros not in the page cache; but the fdatasync after a
/// first write into fallocated blocks also writes the extent metadata, which the
/// `zero_ahead` thread spares the appends.
pub(crate) fn allocate(file: &mut File, len: u64) -> io::Result<()> {
    {
        use std::os::fd::AsRawFd;
        let size = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
        // SAFETY: a plain syscall on the open descriptor owned by `file`.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err);
        }
    }
    let zeros = vec![0u8; 4 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

impl Env for FsEnv {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in fs::read_dir(dir)? {
            names.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn create_segment(&self, path: &Path, capacity: u64) -> io::Result<Arc<dyn SegmentFile>> {
        let tmp = tmp_path(path);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        allocate(&mut file, capacity)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            self.sync_dir(dir)?;
        }
        // Prefault only when appends store into the mapping. With pwrite, a populated shared
        // mapping makes every write slower (measured: 1 KiB pwrite into a populated segment
        // ≈ 3x slower than into an unmapped-so-far page).
        map_segment(
            file,
            self.mapped_writes,
            self.mapped_writes,
            self.stage.as_ref(),
            false,
        )
    }

    fn open_segment(&self, path: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        map_segment(file, false, self.mapped_writes, self.stage.as_ref(), false)
    }

    fn reuse_segment(&self, from: &Path, to: &Path) -> io::Result<Arc<dyn SegmentFile>> {
        fs::rename(from, to)?;
        if let Some(dir) = to.parent() {
            self.sync_dir(dir)?;
        }
        let file = OpenOptions::new().read(true).write(true).open(to)?;
        // As `create_segment` maps a new one (prefaulted only for mapped writes).
        map_segment(
            file,
            self.mapped_writes,
            self.mapped_writes,
            self.stage.as_ref(),
            true,
        )
    }

    fn open_plain(&self, path: &Path) -> io::Result<Arc<dyn PlainFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(FsPlain { file }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    /// Shrinks the file [`FsEnv::remove_step_bytes`] (64 MiB) at a time, pausing 2 ms between
    /// steps, then unlinks it:
    /// unlinking a 1 GiB file frees all its extents in one journal transaction, and the
    /// log's fdatasyncs waited behind it for over 150 ms (a missed replication round).
    fn remove_large(&self, path: &Path) -> io::Result<()> {
        let step = self.remove_step_bytes.max(1);
        match OpenOptions::new().write(true).open(path) {
            Ok(f) => {
                let mut len = f.metadata()?.len();
                while len > step {
                    len -= step;
                    f.set_len(len)?;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        self.remove(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn halt(&self) {
        if let Some(stage) = &self.stage {
            stage.halt();
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}
