//! The stage file: an `async` log's write stage (`stage.rs`) kept in a shared mapping of
//! `<log dir>/write-stage`, so that the appends it acknowledged before writing them to their
//! segment survive the process (a kill -9), as they did in the page cache; and [`replay`],
//! which writes what such a process left there to the segment before the log opens.
//!
//! Layout: one 4 KiB header block, then the ring. The header's words (little-endian `u64`, in
//! the mapping) say which bytes only the ring holds: a magic word, the format version, the
//! ring's size, the boot the file was last used in (`/proc/sys/kernel/random/boot_id`), then
//! the owning segment (a flag, its device and inode) and the ring's `low`, `high` and
//! `clean_end` (`stage.rs`). The stage stores them as it moves; what a killed process left is
//! consistent because each is stored after the bytes it describes (`high` after the copy,
//! `clean_end` after the write-out; `Release` stores, the copy's streaming stores fenced).
//!
//! After a power loss the file holds whatever the kernel wrote back of it at some moment, a
//! mix of old pages: it is not replayed then. The boot id tells: a file from an earlier boot
//! is ignored, which loses only what an `async` node may lose in a power loss anyway (README,
//! "What each flush policy promises"). The owner is named by device and inode, so a segment
//! deleted and recreated at the same name is not written over.
//!
//! The mapping asks for huge pages (`huge.rs`): where the file system caches the file in large
//! folios (ext4 since Linux 6.16), the ring is mapped 2 MiB at a time and a write-out pins a
//! few pages instead of one per 4 KiB (an `async` follower's CPU per message at 4 × 64 5–6%
//! lower, BENCHMARKS thirty-seventh sitting).

use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use memmap2::MmapOptions;
use memmap2::MmapRaw;

use crate::error::LogError;
use crate::error::LogResult;
use crate::ring::Ring;
use crate::ring::BLOCK;
use crate::segments::parse_segment_name;

/// The stage file's name in the log directory.
pub const STAGE_FILE: &str = "write-stage";

const MAGIC: u64 = u64::from_le_bytes(*b"RMQSTAGE");
const VERSION: u64 = 1;
const HEADER: usize = BLOCK as usize;
/// Word indexes of the header.
const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_RING: usize = 2;
/// Five words: the boot id's 36 bytes, zero-padded.
const W_BOOT: usize = 3;
const W_OWNED: usize = 8;
const W_DEV: usize = 9;
const W_INO: usize = 10;
const W_LOW: usize = 11;
const W_HIGH: usize = 12;
const W_CLEAN: usize = 13;
const WORDS: usize = 14;
const BOOT_BYTES: usize = 40;

/// A boot's id (`/proc/sys/kernel/random/boot_id`), zero-padded.
pub type BootId = [u8; BOOT_BYTES];

/// This boot's id; `None` where the kernel does not give one (then an `async` log keeps its
/// appends in the page cache: a stage file could not tell a power loss).
pub fn boot_id() -> Option<BootId> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim().as_bytes();
    if id.is_empty() || id.len() > BOOT_BYTES {
        return None;
    }
    let mut out = [0u8; BOOT_BYTES];
    out[..id.len()].copy_from_slice(id);
    Some(out)
}

/// A segment as the header names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub(crate) fn of(file: &File) -> io::Result<FileId> {
        let m = file.metadata()?;
        Ok(FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The header's words in the mapping, stored as the stage moves.
pub(crate) struct Header {
    map: Arc<MmapRaw>,
}

impl Header {
    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < WORDS);
        // SAFETY: the mapping is at least HEADER bytes (created so), page-aligned, and lives
        // as long as `self`; word i < WORDS lies inside it, 8-byte aligned. Every access to
        // the header goes through these atomics.
        unsafe { &*(self.map.as_ptr().add(i * 8) as *const AtomicU64) }
    }

    fn set(&self, i: usize, v: u64) {
        self.word(i).store(v.to_le(), Ordering::Release);
    }

    /// No owner: nothing to replay.
    pub(crate) fn disown(&self) {
        self.set(W_OWNED, 0);
    }

    /// A new owner and its range (no owner while the words change).
    pub(crate) fn own(&self, id: FileId, low: u64, high: u64, clean_end: u64) {
        self.disown();
        self.set(W_DEV, id.dev);
        self.set(W_INO, id.ino);
        self.set(W_LOW, low);
        self.set(W_HIGH, high);
        self.set(W_CLEAN, clean_end);
        self.set(W_OWNED, 1);
    }

    pub(crate) fn set_low(&self, v: u64) {
        self.set(W_LOW, v);
    }

    /// `clean_end`, then `high`: a reader of a killed process's header never sees the new
    /// `high` with an old, higher `clean_end`.
    pub(crate) fn set_range(&self, clean_end: u64, high: u64) {
        self.set(W_CLEAN, clean_end);
        self.set(W_HIGH, high);
    }

    pub(crate) fn set_clean_end(&self, v: u64) {
        self.set(W_CLEAN, v);
    }
}

/// A write stage's memory: its ring, and the stage file's header if it lies in one.
pub(crate) struct Memory {
    pub ring: Ring,
    pub header: Option<Header>,
}

impl Memory {
    /// A ring of `bytes` in the process's memory (`file` `None`), or in the stage file at its
    /// path, made for this boot (see [`create`]).
    pub(crate) fn take(bytes: u64, file: Option<&(PathBuf, BootId)>) -> io::Result<Memory> {
        let Some((path, boot)) = file else {
            let ring = Ring::new(bytes as usize)?;
            return Ok(Memory { ring, header: None });
        };
        let (ring, header) = create(path, bytes, *boot)
            .map_err(|e| io::Error::new(e.kind(), format!("stage file {}: {e}", path.display())))?;
        Ok(Memory {
            ring,
            header: Some(header),
        })
    }
}

/// Creates (or reuses) the stage file at `path` for a ring of `bytes`, its blocks allocated
/// (a full disk fails here, not as SIGBUS on a store), its header fresh: this boot, no owner.
fn create(path: &Path, bytes: u64, boot: BootId) -> io::Result<(Ring, Header)> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let len = HEADER as u64 + bytes;
    if file.metadata()?.len() != len {
        file.set_len(0)?;
        crate::fs_env::allocate(&mut file, len)?;
        file.sync_all()?;
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
    }
    let map = Arc::new(MmapOptions::new().map_raw(&file)?);
    crate::huge::advise_huge(map.as_mut_ptr(), map.len());
    let header = Header { map: map.clone() };
    header.disown();
    header.set(W_MAGIC, MAGIC);
    header.set(W_VERSION, VERSION);
    header.set(W_RING, bytes);
    for (i, w) in boot.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        header.set(W_BOOT + i, u64::from_le_bytes(word));
    }
    let ring = Ring::in_map(map, HEADER, bytes as usize)?;
    Ok((ring, header))
}

/// How many bytes [`replay`] would write from the stage file at `path` (0: none, or no file).
pub fn pending(path: &Path) -> LogResult<u64> {
    Ok(read_pending(path)?.map_or(0, |p| p.high - p.from))
}

/// What a stage file holds for [`replay`].
struct Pending {
    file: File,
    bytes: u64,
    from: u64,
    high: u64,
    owner: FileId,
}

/// The stage file at `path`, if it holds bytes to replay.
fn read_pending(path: &Path) -> LogResult<Option<Pending>> {
    let io_err = |what: &'static str, e| LogError::io(what, path, e);
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open write stage", e)),
    };
    let len = file
        .metadata()
        .map_err(|e| io_err("stat write stage", e))?
        .len();
    let mut head = [0u8; WORDS * 8];
    if len < HEADER as u64 {
        tracing::warn!(path = %path.display(), len, "write stage file too short; ignored");
        return Ok(None);
    }
    file.read_exact_at(&mut head, 0)
        .map_err(|e| io_err("read write stage", e))?;
    let w = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let bytes = w(W_RING);
    if w(W_MAGIC) != MAGIC || w(W_VERSION) != VERSION || bytes + HEADER as u64 != len {
        return Err(LogError::Corruption {
            file: path.to_path_buf(),
            offset: 0,
            reason: format!(
                "write stage header not understood (magic {:#x}, version {}, ring {bytes} \
                 bytes, file {len}); it may hold acknowledged appends: move it away to open \
                 the log without them",
                w(W_MAGIC),
                w(W_VERSION)
            ),
        });
    }
    if w(W_OWNED) != 1 {
        return Ok(None);
    }
    if boot_id().map(|b| b[..] != head[W_BOOT * 8..W_BOOT * 8 + BOOT_BYTES]) != Some(false) {
        tracing::info!(path = %path.display(), "write stage from an earlier boot; not replayed");
        return Ok(None);
    }
    let (low, high, clean) = (w(W_LOW), w(W_HIGH), w(W_CLEAN));
    let from = clean.max(low);
    if from >= high {
        return Ok(None);
    }
    if high - from > bytes {
        return Err(LogError::Corruption {
            file: path.to_path_buf(),
            offset: 0,
            reason: format!("write stage range {from}..{high} larger than its ring ({bytes})"),
        });
    }
    let owner = FileId {
        dev: w(W_DEV),
        ino: w(W_INO),
    };
    Ok(Some(Pending {
        file,
        bytes,
        from,
        high,
        owner,
    }))
}

/// Writes the bytes a killed process left only in the stage file at `path` to their segment
/// in `segments_dir`, fdatasyncs it and clears the owner; nothing if there is no file, no
/// owner, nothing unwritten, or the file is from an earlier boot. An unreadable file is an
/// error (it may hold acknowledged appends), kept for the next attempt.
pub fn replay(path: &Path, segments_dir: &Path) -> LogResult<()> {
    let io_err = |what: &'static str, e| LogError::io(what, path, e);
    let Some(Pending {
        file,
        bytes,
        from,
        high,
        owner,
    }) = read_pending(path)?
    else {
        return Ok(());
    };
    let Some((seg_path, seg)) = find_segment(segments_dir, owner)? else {
        tracing::warn!(path = %path.display(), from, high,
            "the write stage's segment is gone; its bytes are not replayed");
        return Ok(());
    };
    let mut buf = vec![0u8; (high - from) as usize];
    let mut done = 0;
    while done < buf.len() {
        let at = from + done as u64;
        let slot = at % bytes;
        let n = (buf.len() - done).min((bytes - slot) as usize);
        file.read_exact_at(&mut buf[done..done + n], HEADER as u64 + slot)
            .map_err(|e| io_err("read write stage", e))?;
        done += n;
    }
    let seg_io = |what: &'static str, e| LogError::io(what, &seg_path, e);
    if seg.metadata().map_err(|e| seg_io("stat", e))?.len() < high {
        return Err(LogError::Corruption {
            file: seg_path.clone(),
            offset: high,
            reason: "segment shorter than the write stage's bytes for it".into(),
        });
    }
    seg.write_all_at(&buf, from)
        .map_err(|e| seg_io("replay write stage", e))?;
    seg.sync_data().map_err(|e| seg_io("fdatasync", e))?;
    file.write_all_at(&0u64.to_le_bytes(), (W_OWNED * 8) as u64)
        .map_err(|e| io_err("write write stage", e))?;
    tracing::info!(segment = %seg_path.display(), from, bytes = high - from,
        "replayed appends a stopped process left in the write stage");
    Ok(())
}

/// The segment file in `dir` that is `id`, opened for writing.
fn find_segment(dir: &Path, id: FileId) -> LogResult<Option<(PathBuf, File)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io("list", dir, e))?;
        let name = entry.file_name();
        if name.to_str().and_then(parse_segment_name).is_none() {
            continue;
        }
        let path = entry.path();
        let meta = entry
            .metadata()
            .map_err(|e| LogError::io("stat", &path, e))?;
        if meta.dev() == id.dev && meta.ino() == id.ino {
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| LogError::io("open", &path, e))?;
            return Ok(Some((path, f)));
        }
    }
    Ok(None)
}

#[cfg(test)]
#[path = "stage_file_tests.rs"]
mod tests;
