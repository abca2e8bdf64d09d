//! `meta/committed-id`: the committed log id, durable with one `pwrite` + `fdatasync`.
//!
//! An `async` node saves every commit advance durably inside openraft's core loop (see
//! `LogStore::save_committed_deferred` for why), so the cost of one save bounds how many
//! commit advances a second that loop can take. In sled that save was a `pwrite`, a
//! `sync_file_range` that waits for the write (sled's flush) and an `fdatasync` (which sled's
//! flush lacks): two device round trips, 0.19 ms p50 each under a 4 x 64 load on the dev VM
//! (BENCHMARKS.md, seventh sitting). Here it is one write of one 512-byte slot into a file whose blocks were written at
//! creation (no allocation, no size change: `fdatasync` commits no metadata) and one
//! `fdatasync`.
//!
//! Two slots alternate, so a torn write damages only the slot being written; the other holds
//! the previous id, which is what a crash before the write would have left. Open takes the
//! valid slot with the higher sequence number.
//!
//! All integers little-endian. File: [`FILE_BYTES`] bytes, slot `s` at `s * SLOT_STRIDE`:
//!
//! | offset | size | field        | meaning                                                |
//! |-------:|-----:|--------------|--------------------------------------------------------|
//! | 0      | 4    | `magic` u32  | [`MAGIC`]                                              |
//! | 4      | 2    | `version` u16| [`VERSION`]                                            |
//! | 6      | 2    | `len` u16    | bytes of the value, at most [`MAX_VALUE_BYTES`]        |
//! | 8      | 8    | `seq` u64    | write sequence number; the higher valid slot wins (>= 1) |
//! | 16     | 4    | `crc` u32    | CRC32 (crc32fast) of bytes `[0, 16)` and the value     |
//! | 20     | len  | value        | `Option<LogId>` as JSON (as the sled key held it)      |
//!
//! The rest of a slot is zero. An all-zero slot is an unwritten one, not corruption.

use std::fs::File;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;

use parking_lot::Mutex;

use crate::env::tmp_path;
use crate::env::Env;
use crate::env::FsEnv;
use crate::error::LogError;
use crate::error::LogResult;
use crate::types::LogId;

/// File name inside the meta directory.
pub const FILE_NAME: &str = "committed-id";
/// Magic of a slot (`"RMCI"` read as little-endian bytes `I C M R`).
pub const MAGIC: u32 = 0x524D_4349;
/// Current slot version.
pub const VERSION: u16 = 1;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 512;
/// Distance between the two slots (a page apart, so one write never touches both).
pub const SLOT_STRIDE: u64 = 4096;
/// Size of the file.
pub const FILE_BYTES: u64 = 2 * SLOT_STRIDE;
/// Size of a slot's fixed part.
pub const HEADER_BYTES: usize = 20;
/// Longest value a slot holds.
pub const MAX_VALUE_BYTES: usize = SLOT_BYTES - HEADER_BYTES;

const _: () = assert!(HEADER_BYTES == 4 + 2 + 2 + 8 + 4);
const _: () = assert!(SLOT_BYTES as u64 <= SLOT_STRIDE);

/// Where the slot of write `seq` starts: writes alternate between the two slots.
pub fn slot_offset(seq: u64) -> u64 {
    (seq % 2) * SLOT_STRIDE
}

/// Encodes slot `seq` holding `committed`.
pub fn encode_slot(seq: u64, committed: &Option<LogId>) -> LogResult<[u8; SLOT_BYTES]> {
    let value = serde_json::to_vec(committed).map_err(|e| LogError::meta("encode", e))?;
    let len = u16::try_from(value.len())
        .ok()
        .filter(|n| usize::from(*n) <= MAX_VALUE_BYTES)
        .ok_or_else(|| {
            LogError::InvalidArgument(format!(
                "committed id encodes to {} bytes; a slot holds {MAX_VALUE_BYTES}",
                value.len()
            ))
        })?;
    let mut slot = [0u8; SLOT_BYTES];
    slot[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    slot[4..6].copy_from_slice(&VERSION.to_le_bytes());
    slot[6..8].copy_from_slice(&len.to_le_bytes());
    slot[8..16].copy_from_slice(&seq.to_le_bytes());
    slot[HEADER_BYTES..HEADER_BYTES + value.len()].copy_from_slice(&value);
    let crc = slot_crc(&slot, value.len());
    slot[16..20].copy_from_slice(&crc.to_le_bytes());
    Ok(slot)
}

fn slot_crc(slot: &[u8], len: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&slot[0..16]);
    h.update(&slot[HEADER_BYTES..HEADER_BYTES + len]);
    h.finalize()
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Decodes one slot: `Ok(None)` for an unwritten (all-zero) slot, `Ok(Some((seq, id)))` for a
/// valid one, `Err(reason)` for anything else (a torn or flipped slot).
pub fn decode_slot(slot: &[u8]) -> Result<Option<(u64, Option<LogId>)>, String> {
    if slot.len() != SLOT_BYTES {
        return Err(format!(
            "slot of {} bytes, expected {SLOT_BYTES}",
            slot.len()
        ));
    }
    if slot.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    let magic = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
    if magic != MAGIC {
        return Err(format!("bad magic {magic:#010x}, expected {MAGIC:#010x}"));
    }
    let version = le_u16(slot, 4);
    if version != VERSION {
        return Err(format!("unsupported version {version}"));
    }
    let len = usize::from(le_u16(slot, 6));
    if len > MAX_VALUE_BYTES {
        return Err(format!("value length {len} above {MAX_VALUE_BYTES}"));
    }
    let seq = u64::from_le_bytes(slot[8..16].try_into().expect("8 bytes by the range"));
    let stored = u32::from_le_bytes([slot[16], slot[17], slot[18], slot[19]]);
    let actual = slot_crc(slot, len);
    if stored != actual {
        return Err(format!(
            "crc mismatch: stored {stored:#010x}, computed {actual:#010x}"
        ));
    }
    if seq == 0 {
        return Err("sequence number 0".to_string());
    }
    let value = &slot[HEADER_BYTES..HEADER_BYTES + len];
    let id = serde_json::from_slice(value).map_err(|e| format!("value: {e}"))?;
    Ok(Some((seq, id)))
}

/// The newest valid slot of a whole file's bytes. A file that is too short, or whose slots
/// are both unwritten or invalid, is corruption: creation writes write 1's slot before the
/// file gets its name, and each later write touches the other slot only.
pub fn decode_file(bytes: &[u8], path: &Path) -> LogResult<(u64, Option<LogId>)> {
    let corrupt = |offset: u64, reason: String| LogError::Corruption {
        file: path.to_path_buf(),
        offset,
        reason,
    };
    if (bytes.len() as u64) < FILE_BYTES {
        let reason = format!("{} bytes, expected {FILE_BYTES}", bytes.len());
        return Err(corrupt(0, reason));
    }
    let mut best: Option<(u64, Option<LogId>)> = None;
    let mut errors = Vec::new();
    for s in 0..2u64 {
        let at = (s * SLOT_STRIDE) as usize;
        match decode_slot(&bytes[at..at + SLOT_BYTES]) {
            Ok(Some(v)) if best.as_ref().is_none_or(|b| v.0 > b.0) => best = Some(v),
            Ok(_) => {}
            Err(reason) => errors.push(format!("slot {s}: {reason}")),
        }
    }
    best.ok_or_else(|| {
        let reason = match errors.is_empty() {
            true => "no slot was ever written".to_string(),
            false => errors.join("; "),
        };
        corrupt(0, reason)
    })
}

/// Handle to the open file: the last written slot's sequence number and value.
pub struct CommittedFile {
    file: File,
    path: PathBuf,
    /// (sequence number of the newest slot, its value); writes are serialized here.
    last: Mutex<(u64, Option<LogId>)>,
}

impl CommittedFile {
    /// Opens `dir/committed-id`, or creates it holding `initial()` (the id an older version
    /// kept in sled): written and synced under a temporary name, renamed, the directory
    /// synced, so the file exists only with a valid slot (write 1's, [`slot_offset`]), and
    /// the first save goes to the other one.
    pub fn open(dir: &Path, initial: impl FnOnce() -> LogResult<Option<LogId>>) -> LogResult<Self> {
        let path = dir.join(FILE_NAME);
        if !path.exists() {
            create(dir, &path, &initial()?)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| LogError::io("open", &path, e))?;
        let mut bytes = vec![0u8; FILE_BYTES as usize];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => LogError::Corruption {
                    file: path.clone(),
                    offset: 0,
                    reason: format!("shorter than {FILE_BYTES} bytes"),
                },
                _ => LogError::io("read", &path, e),
            })?;
        let last = decode_file(&bytes, &path)?;
        Ok(CommittedFile {
            file,
            path,
            last: Mutex::new(last),
        })
    }

    /// The committed id last saved.
    pub fn get(&self) -> Option<LogId> {
        self.last.lock().1
    }

    /// Saves `committed` durably (the slot the newest one is not in, then `fdatasync`).
    pub fn set(&self, committed: &Option<LogId>) -> LogResult<()> {
        let mut last = self.last.lock();
        let seq = last.0 + 1;
        let slot = encode_slot(seq, committed)?;
        self.file
            .write_all_at(&slot, slot_offset(seq))
            .map_err(|e| LogError::io("write", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| LogError::io("fdatasync", &self.path, e))?;
        *last = (seq, *committed);
        Ok(())
    }
}

fn create(dir: &Path, path: &Path, committed: &Option<LogId>) -> LogResult<()> {
    let tmp = tmp_path(path);
    let mut bytes = vec![0u8; FILE_BYTES as usize];
    let at = slot_offset(1) as usize;
    bytes[at..at + SLOT_BYTES].copy_from_slice(&encode_slot(1, committed)?);
    // Written, not fallocated: the blocks exist before the first save, so a save's fdatasync
    // converts no extent and changes no size.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| LogError::io("create", &tmp, e))?;
    file.write_all_at(&bytes, 0)
        .map_err(|e| LogError::io("write", &tmp, e))?;
    file.sync_all()
        .map_err(|e| LogError::io("fsync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| LogError::io("rename", path, e))?;
    FsEnv::default()
        .sync_dir(dir)
        .map_err(|e| LogError::io("fsync dir", dir, e))
}

#[cfg(test)]
#[path = "committed_file_tests.rs"]
mod tests;
