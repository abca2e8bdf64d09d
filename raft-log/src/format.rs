//! The CommitLog entry record format: one fixed header followed by the payload.
//!
//! Every record starts at the end of the previous one (or at the start of the next segment
//! when it does not fit; the tail of the full segment is then covered by one padding record).
//! All integers are little-endian.
//!
//! | offset | size | field         | meaning                                                     |
//! |-------:|-----:|---------------|-------------------------------------------------------------|
//! |      0 |    4 | `total_len`   | header + payload bytes (padding: the rest of the segment)   |
//! |      4 |    4 | `magic`       | [`ENTRY_MAGIC`]                                             |
//! |      8 |    1 | `version`     | [`FORMAT_VERSION`]                                          |
//! |      9 |    1 | `kind`        | 0 padding, 1 blank, 2 membership (serde_json), 3 normal    |
//! |     10 |    2 | `reserved`    | zero                                                        |
//! |     12 |    4 | `payload_len` | payload bytes (0 for blank and padding)                     |
//! |     16 |    8 | `term`        | Raft term of the entry (0 for padding)                      |
//! |     24 |    8 | `index`       | Raft log index of the entry (0 for padding)                 |
//! |     32 |    8 | `phys`        | physical offset of this record (catches misplaced bytes)    |
//! |     40 |    4 | `payload_crc` | CRC32 (crc32fast) of the payload bytes                      |
//! |     44 |    4 | `header_crc`  | CRC32 of header bytes 0..44                                 |
//! |     48 |    n | payload       | `Normal`: the `AppPayload` bytes verbatim                   |
//!
//! A header whose first [`ENTRY_HEADER_LEN`] bytes are all zero marks the end of the log (segments
//! are preallocated with zeros). The encoding is deterministic: the same entry at the same physical
//! offset gives identical bytes on every node.

use std::borrow::Cow;

use crate::error::LogError;
use crate::types::AppPayload;
use crate::types::LogEntry;
use crate::types::LogId;
use crate::types::Membership;
use crate::types::Payload;
use crate::types::PhysOffset;
use crate::types::RawIndex;
use crate::types::RawPhys;
use crate::types::Term;

/// Bytes of the fixed record header; a `Normal` entry's payload starts this many bytes after
/// the record's physical offset.
pub const ENTRY_HEADER_LEN: usize = 48;

/// Record magic ("RMQE").
pub const ENTRY_MAGIC: u32 = 0x524d_5145;

/// Version of this record layout.
pub const FORMAT_VERSION: u8 = 1;

const HEADER_CRC_LEN: usize = 44;
const _: () = assert!(ENTRY_HEADER_LEN == HEADER_CRC_LEN + 4);
const _: () = assert!(ENTRY_HEADER_LEN % 8 == 0);

/// Physical offset of the payload of the record that starts at `entry_phys`.
pub const fn payload_offset(entry_phys: PhysOffset) -> PhysOffset {
    entry_phys.advance(ENTRY_HEADER_LEN as u64)
}

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Fills the tail of a segment; the next record is at the next segment's start.
    Padding = 0,
    /// `EntryPayload::Blank`.
    Blank = 1,
    /// `EntryPayload::Membership`, serde_json encoded.
    Membership = 2,
    /// `EntryPayload::Normal`, the application bytes verbatim.
    Normal = 3,
}

impl RecordKind {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Padding),
            1 => Some(Self::Blank),
            2 => Some(Self::Membership),
            3 => Some(Self::Normal),
            _ => None,
        }
    }
}

/// A decoded, CRC-checked record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header + payload bytes (for padding: up to the segment end).
    pub total_len: u32,
    /// Payload kind.
    pub kind: RecordKind,
    /// Payload bytes.
    pub payload_len: u32,
    /// Raft term.
    pub term: Term,
    /// Raft log index.
    pub index: RawIndex,
    /// Physical offset of the record.
    pub phys: RawPhys,
    /// CRC32 of the payload.
    pub payload_crc: u32,
}

/// Result of decoding a header slot.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderSlot {
    /// All-zero bytes: the end of the log.
    End,
    /// A valid header.
    Record(RecordHeader),
}

/// The payload bytes of an entry, encoded deterministically (borrowed for `Normal`).
pub fn encode_payload(payload: &Payload) -> Result<(RecordKind, Cow<'_, [u8]>), LogError> {
    match payload {
        Payload::Blank => Ok((RecordKind::Blank, Cow::Borrowed(&[]))),
        Payload::Normal(app) => Ok((RecordKind::Normal, Cow::Borrowed(&app.0))),
        Payload::Membership(m) => {
            let bytes = serde_json::to_vec(m)
                .map_err(|e| LogError::InvalidArgument(format!("membership encoding: {e}")))?;
            Ok((RecordKind::Membership, Cow::Owned(bytes)))
        }
    }
}

/// Appends the full record of `entry` at physical offset `phys` to `out`; returns its length.
pub fn encode_entry(entry: &LogEntry, phys: RawPhys, out: &mut Vec<u8>) -> Result<usize, LogError> {
    let (kind, payload) = encode_payload(&entry.payload)?;
    let term = *entry.log_id.leader_id;
    encode_record(kind, term, entry.log_id.index, phys, &payload, out)
}

/// Appends one record to `out`; returns its length.
pub fn encode_record(
    kind: RecordKind,
    term: Term,
    index: RawIndex,
    phys: RawPhys,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<usize, LogError> {
    let total = ENTRY_HEADER_LEN + payload.len();
    let total_u32 = u32::try_from(total).map_err(|_| LogError::EntryTooLarge {
        size: total as u64,
        max: u32::MAX as u64,
    })?;
    let start = out.len();
    out.extend_from_slice(&total_u32.to_le_bytes());
    push_header_tail(
        kind,
        payload.len() as u32,
        term,
        index,
        phys,
        crc32fast::hash(payload),
        out,
    );
    out.extend_from_slice(payload);
    debug_assert_eq!(out.len() - start, total);
    Ok(total)
}

/// The header of a record whose payload is `payload` (written separately after it).
pub fn encode_header(
    kind: RecordKind,
    term: Term,
    index: RawIndex,
    phys: RawPhys,
    payload: &[u8],
) -> [u8; ENTRY_HEADER_LEN] {
    let mut v = Vec::with_capacity(ENTRY_HEADER_LEN);
    v.extend_from_slice(&((ENTRY_HEADER_LEN + payload.len()) as u32).to_le_bytes());
    push_header_tail(
        kind,
        payload.len() as u32,
        term,
        index,
        phys,
        crc32fast::hash(payload),
        &mut v,
    );
    let mut out = [0u8; ENTRY_HEADER_LEN];
    out.copy_from_slice(&v);
    out
}

/// The header of a padding record covering `len` bytes starting at `phys`.
pub fn encode_padding(phys: RawPhys, len: u32) -> [u8; ENTRY_HEADER_LEN] {
    let mut v = Vec::with_capacity(ENTRY_HEADER_LEN);
    v.extend_from_slice(&len.to_le_bytes());
    push_header_tail(
        RecordKind::Padding,
        0,
        0,
        0,
        phys,
        crc32fast::hash(&[]),
        &mut v,
    );
    let mut out = [0u8; ENTRY_HEADER_LEN];
    out.copy_from_slice(&v);
    out
}

fn push_header_tail(
    kind: RecordKind,
    payload_len: u32,
    term: Term,
    index: RawIndex,
    phys: RawPhys,
    payload_crc: u32,
    out: &mut Vec<u8>,
) {
    let start = out.len() - 4;
    out.extend_from_slice(&ENTRY_MAGIC.to_le_bytes());
    out.push(FORMAT_VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&term.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(&phys.to_le_bytes());
    out.extend_from_slice(&payload_crc.to_le_bytes());
    let crc = crc32fast::hash(&out[start..start + HEADER_CRC_LEN]);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decodes the header slot at `phys`; `room` is the number of bytes left in the segment.
/// `Err(reason)` means the bytes are not a valid header.
pub fn decode_header(buf: &[u8], phys: RawPhys, room: u64) -> Result<HeaderSlot, String> {
    if buf.len() < ENTRY_HEADER_LEN {
        return Err(format!(
            "header needs {ENTRY_HEADER_LEN} bytes, {} available",
            buf.len()
        ));
    }
    let buf = &buf[..ENTRY_HEADER_LEN];
    if buf.iter().all(|b| *b == 0) {
        return Ok(HeaderSlot::End);
    }
    let crc = u32_at(buf, HEADER_CRC_LEN);
    if crc32fast::hash(&buf[..HEADER_CRC_LEN]) != crc {
        return Err("header crc mismatch".to_string());
    }
    if u32_at(buf, 4) != ENTRY_MAGIC {
        return Err(format!("bad magic {:#x}", u32_at(buf, 4)));
    }
    if buf[8] != FORMAT_VERSION {
        return Err(format!("unsupported version {}", buf[8]));
    }
    let kind = RecordKind::from_u8(buf[9]).ok_or_else(|| format!("unknown kind {}", buf[9]))?;
    let h = RecordHeader {
        total_len: u32_at(buf, 0),
        kind,
        payload_len: u32_at(buf, 12),
        term: u64_at(buf, 16),
        index: u64_at(buf, 24),
        phys: u64_at(buf, 32),
        payload_crc: u32_at(buf, 40),
    };
    check_header(&h, phys, room)?;
    Ok(HeaderSlot::Record(h))
}

fn check_header(h: &RecordHeader, phys: RawPhys, room: u64) -> Result<(), String> {
    if h.phys != phys {
        return Err(format!("record says phys {} but sits at {phys}", h.phys));
    }
    if (h.total_len as u64) > room {
        return Err(format!(
            "length {} runs past the segment end ({room} bytes left)",
            h.total_len
        ));
    }
    let expected = if h.kind == RecordKind::Padding {
        h.total_len as u64
    } else {
        ENTRY_HEADER_LEN as u64 + h.payload_len as u64
    };
    let fits = h.kind == RecordKind::Padding
        && h.payload_len == 0
        && h.total_len as usize >= ENTRY_HEADER_LEN;
    if h.total_len as u64 != expected || (h.kind == RecordKind::Padding && !fits) {
        return Err(format!(
            "length {} does not match payload length {}",
            h.total_len, h.payload_len
        ));
    }
    if h.kind == RecordKind::Blank && h.payload_len != 0 {
        return Err("blank entry with a payload".to_string());
    }
    Ok(())
}

/// Checks the payload CRC.
pub fn check_payload(h: &RecordHeader, payload: &[u8]) -> Result<(), String> {
    if payload.len() != h.payload_len as usize {
        return Err(format!(
            "payload has {} bytes, header says {}",
            payload.len(),
            h.payload_len
        ));
    }
    if crc32fast::hash(payload) != h.payload_crc {
        return Err("payload crc mismatch".to_string());
    }
    Ok(())
}

/// Builds the entry from a checked header and its payload bytes.
pub fn decode_entry(h: &RecordHeader, payload: &[u8]) -> Result<LogEntry, String> {
    check_payload(h, payload)?;
    if h.kind == RecordKind::Normal {
        let log_id = LogId::new_term_index(h.term, h.index);
        let payload = Payload::Normal(AppPayload::from(payload.to_vec()));
        return Ok(LogEntry { log_id, payload });
    }
    decode_checked(h, payload)
}

/// [`decode_entry`] of a payload read into its own vector: a `Normal` payload becomes the
/// entry's bytes without another copy.
pub fn decode_entry_owned(h: &RecordHeader, payload: Vec<u8>) -> Result<LogEntry, String> {
    check_payload(h, &payload)?;
    if h.kind == RecordKind::Normal {
        let log_id = LogId::new_term_index(h.term, h.index);
        let payload = Payload::Normal(AppPayload::from(payload));
        return Ok(LogEntry { log_id, payload });
    }
    decode_checked(h, &payload)
}

/// The entry of a payload whose length and CRC were checked.
fn decode_checked(h: &RecordHeader, payload: &[u8]) -> Result<LogEntry, String> {
    let log_id = LogId::new_term_index(h.term, h.index);
    let payload = match h.kind {
        RecordKind::Blank => Payload::Blank,
        RecordKind::Normal => Payload::Normal(AppPayload::from(payload.to_vec())),
        RecordKind::Membership => {
            let m: Membership =
                serde_json::from_slice(payload).map_err(|e| format!("membership decoding: {e}"))?;
            Payload::Membership(m)
        }
        RecordKind::Padding => return Err("padding record is not an entry".to_string()),
    };
    Ok(LogEntry { log_id, payload })
}

/// Decodes one whole record at the start of `buf` (header and payload): the strict decoder the
/// tests and tools use. `room` is the number of bytes left in the segment.
pub fn decode_record(buf: &[u8], phys: RawPhys, room: u64) -> Result<Option<LogEntry>, String> {
    match decode_header(buf, phys, room)? {
        HeaderSlot::End => Ok(None),
        HeaderSlot::Record(h) if h.kind == RecordKind::Padding => Ok(None),
        HeaderSlot::Record(h) => {
            let end = ENTRY_HEADER_LEN + h.payload_len as usize;
            let payload = buf.get(ENTRY_HEADER_LEN..end).ok_or_else(|| {
                format!(
                    "truncated: record needs {end} bytes, {} available",
                    buf.len()
                )
            })?;
            decode_entry(&h, payload).map(Some)
        }
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
