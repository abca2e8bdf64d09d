//! IndexFile layout (RocketMQ-style hash index of message keys). One file, all integers
//! little-endian; `S` = slots per file, `U` = max units per file, both fixed at creation and
//! recorded in the header. File name: 20-digit sequence number (creation order).
//!
//! | offset            | size   | field                | meaning                                 |
//! |------------------:|-------:|----------------------|-----------------------------------------|
//! | 0                 | 4      | `magic` u32          | [`INDEX_MAGIC`]                         |
//! | 4                 | 2      | `version` u16        | [`INDEX_VERSION`]                       |
//! | 6                 | 2      | reserved u16         | 0                                       |
//! | 8                 | 4      | `slot_count` u32     | `S`                                     |
//! | 12                | 4      | `max_units` u32      | `U`                                     |
//! | 16                | 8      | `begin_ts_ms` u64    | store timestamp of unit 1 (0 if empty)  |
//! | 24                | 8      | `end_ts_ms` u64      | largest store timestamp indexed         |
//! | 32                | 8      | `begin_phys` u64     | physical offset of unit 1               |
//! | 40                | 8      | `end_phys` u64       | physical offset of the last unit        |
//! | 48                | 4      | `used_slots` u32     | slots holding a chain                   |
//! | 52                | 4      | `unit_count` u32     | units written; unit numbers `1..=count` |
//! | 56                | 4      | `header_crc` u32     | CRC32 of bytes `[0, 56)`                |
//! | 60                | 4      | reserved u32         | 0                                       |
//! | 64                | 4 * S  | slots                | u32 newest unit number of the chain of  |
//! |                   |        |                      | keys with `hash % S == slot`; 0 = none  |
//! | 64 + 4S           | 24 * U | units                | unit `n` at `64 + 4S + 24 (n - 1)`      |
//!
//! Unit (24 bytes): `key_hash` u64, `phys_offset` u64, `time_delta_ms` u32 (store timestamp
//! minus `begin_ts_ms`, clamped at 0), `prev` u32 (older unit of the same slot, 0 = end; always
//! `< n`). Units are written in non-decreasing physical offset order.
//!
//! Write order per put: unit, then slot, then header (with CRC). Units carry no CRC of their
//! own; on open the active file is replayed from unit 1 and every unit must continue its slot's
//! chain (`prev` = the slot head before it) with a non-decreasing physical offset and must not
//! be all zeros, which rejects torn or stale units; the slots are rebuilt from the valid prefix.
//! Sealed files are flushed when the next file is created, so only the last file is replayed.

use crate::codec::le_u32_at;
use crate::codec::le_u64_at;
use crate::codec::Reader;
use crate::error::Result;
use crate::error::StoreError;
use crate::types::PhysOffset;
use crate::types::TimestampMs;

/// Magic of an IndexFile.
pub const INDEX_MAGIC: u32 = 0x5844_4952;
/// Current version.
pub const INDEX_VERSION: u16 = 1;
/// Header bytes.
pub const HEADER_LEN: usize = 64;
/// Bytes per slot.
pub const SLOT_LEN: usize = 4;
/// Bytes per unit.
pub const UNIT_LEN: usize = 24;
const HEADER_CRC_AT: usize = 56;

const _: () = assert!(HEADER_CRC_AT == 4 + 2 + 2 + 4 + 4 + 8 * 4 + 4 + 4);
const _: () = assert!(HEADER_LEN == HEADER_CRC_AT + 4 + 4);
const _: () = assert!(UNIT_LEN == 8 + 8 + 4 + 4);

const SRC: &str = "index file header";

/// The header fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexHeader {
    /// Slots per file.
    pub slot_count: u32,
    /// Units per file.
    pub max_units: u32,
    /// Store timestamp of unit 1.
    pub begin_ts_ms: TimestampMs,
    /// Largest store timestamp.
    pub end_ts_ms: TimestampMs,
    /// Physical offset of unit 1.
    pub begin_phys: PhysOffset,
    /// Physical offset of the last unit.
    pub end_phys: PhysOffset,
    /// Slots in use.
    pub used_slots: u32,
    /// Units written.
    pub unit_count: u32,
}

impl IndexHeader {
    /// An empty header of a file with the given geometry.
    pub fn empty(slot_count: u32, max_units: u32) -> Self {
        IndexHeader {
            slot_count,
            max_units,
            ..IndexHeader::default()
        }
    }

    /// Encodes with magic, version and CRC.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&INDEX_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&INDEX_VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&self.slot_count.to_le_bytes());
        b[12..16].copy_from_slice(&self.max_units.to_le_bytes());
        b[16..24].copy_from_slice(&self.begin_ts_ms.to_le_bytes());
        b[24..32].copy_from_slice(&self.end_ts_ms.to_le_bytes());
        b[32..40].copy_from_slice(&self.begin_phys.get().to_le_bytes());
        b[40..48].copy_from_slice(&self.end_phys.get().to_le_bytes());
        b[48..52].copy_from_slice(&self.used_slots.to_le_bytes());
        b[52..56].copy_from_slice(&self.unit_count.to_le_bytes());
        let crc = crc32fast::hash(&b[..HEADER_CRC_AT]);
        b[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks magic, CRC, version, reserved fields and `unit_count <= max_units`.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b, SRC);
        let magic = r.u32("magic")?;
        if magic != INDEX_MAGIC {
            return Err(r.corrupt(
                0,
                format!("bad magic {magic:#010x}, expected {INDEX_MAGIC:#010x}"),
            ));
        }
        let body = r.take(HEADER_LEN - 4, "header")?;
        let stored = le_u32_at(b, HEADER_CRC_AT).unwrap_or_default();
        let actual = crc32fast::hash(&b[..HEADER_CRC_AT]);
        if stored != actual {
            return Err(r.corrupt(
                HEADER_CRC_AT,
                format!("crc mismatch: stored {stored:#010x}, computed {actual:#010x}"),
            ));
        }
        let mut r = Reader::new(body, SRC);
        let version = r.u16("version")?;
        if version != INDEX_VERSION {
            return Err(StoreError::corruption(
                SRC,
                4,
                format!("unsupported version {version}"),
            ));
        }
        if r.u16("reserved")? != 0 || le_u32_at(b, 60) != Some(0) {
            return Err(StoreError::corruption(SRC, 6, "reserved field is not zero"));
        }
        let h = IndexHeader {
            slot_count: r.u32("slot count")?,
            max_units: r.u32("max units")?,
            begin_ts_ms: r.u64("begin timestamp")?,
            end_ts_ms: r.u64("end timestamp")?,
            begin_phys: PhysOffset::new(r.u64("begin phys")?),
            end_phys: PhysOffset::new(r.u64("end phys")?),
            used_slots: r.u32("used slots")?,
            unit_count: r.u32("unit count")?,
        };
        if h.unit_count > h.max_units || h.used_slots > h.slot_count || h.slot_count == 0 {
            return Err(StoreError::corruption(
                SRC,
                8,
                format!("inconsistent counts {h:?}"),
            ));
        }
        Ok(h)
    }

    /// Size of a file with this geometry.
    pub fn file_len(&self) -> u64 {
        file_len(self.slot_count, self.max_units)
    }
}

/// Size of a file with `slots` slots and `units` units.
pub fn file_len(slots: u32, units: u32) -> u64 {
    HEADER_LEN as u64 + SLOT_LEN as u64 * u64::from(slots) + UNIT_LEN as u64 * u64::from(units)
}

/// Byte position of slot `s`.
pub fn slot_pos(s: u32) -> usize {
    HEADER_LEN + SLOT_LEN * s as usize
}

/// Byte position of unit number `n` (1-based).
pub fn unit_pos(slots: u32, n: u32) -> usize {
    HEADER_LEN + SLOT_LEN * slots as usize + UNIT_LEN * (n as usize - 1)
}

/// One index unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexUnit {
    /// Hash of the key.
    pub key_hash: u64,
    /// Physical offset of the message.
    pub phys_offset: PhysOffset,
    /// Store timestamp minus the file's `begin_ts_ms`.
    pub time_delta_ms: u32,
    /// Previous unit number in the slot's chain (0 = end).
    pub prev: u32,
}

impl IndexUnit {
    /// The 24 bytes.
    pub fn encode(&self) -> [u8; UNIT_LEN] {
        let mut b = [0u8; UNIT_LEN];
        b[0..8].copy_from_slice(&self.key_hash.to_le_bytes());
        b[8..16].copy_from_slice(&self.phys_offset.get().to_le_bytes());
        b[16..20].copy_from_slice(&self.time_delta_ms.to_le_bytes());
        b[20..24].copy_from_slice(&self.prev.to_le_bytes());
        b
    }

    /// Decodes the unit at the start of `b`; `None` if too short.
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(IndexUnit {
            key_hash: le_u64_at(b, 0)?,
            phys_offset: PhysOffset::new(le_u64_at(b, 8)?),
            time_delta_ms: le_u32_at(b, 16)?,
            prev: le_u32_at(b, 20)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> IndexHeader {
        IndexHeader {
            slot_count: 7,
            max_units: 9,
            begin_ts_ms: 1000,
            end_ts_ms: 2000,
            begin_phys: PhysOffset::new(10),
            end_phys: PhysOffset::new(500),
            used_slots: 3,
            unit_count: 4,
        }
    }

    #[test]
    fn header_round_trip() {
        let h = header();
        assert_eq!(IndexHeader::decode(&h.encode()).expect("decode"), h);
        assert_eq!(h.file_len(), 64 + 28 + 216);
        assert_eq!(unit_pos(7, 1), 92);
        assert_eq!(slot_pos(2), 72);
    }

    #[test]
    fn header_truncated_tail() {
        let b = header().encode();
        for cut in 0..HEADER_LEN {
            assert!(
                IndexHeader::decode(&b[..cut])
                    .expect_err("cut")
                    .is_corruption(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn header_flipped_bit() {
        let b = header().encode();
        for i in 0..HEADER_LEN * 8 {
            let mut c = b;
            c[i / 8] ^= 1 << (i % 8);
            assert!(
                IndexHeader::decode(&c).expect_err("flip").is_corruption(),
                "bit {i}"
            );
        }
    }

    #[test]
    fn header_inconsistent_counts() {
        let h = IndexHeader {
            unit_count: 10,
            ..header()
        };
        assert!(IndexHeader::decode(&h.encode()).is_err());
        assert!(
            IndexHeader::decode(&[0u8; HEADER_LEN]).is_err(),
            "blank file"
        );
    }

    #[test]
    fn unit_round_trip() {
        let u = IndexUnit {
            key_hash: u64::MAX - 1,
            phys_offset: PhysOffset::new(12),
            time_delta_ms: 3,
            prev: 2,
        };
        assert_eq!(IndexUnit::decode(&u.encode()), Some(u));
        assert_eq!(IndexUnit::decode(&u.encode()[..23]), None);
    }
}
