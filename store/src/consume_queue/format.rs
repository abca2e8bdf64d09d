//! ConsumeQueue files: `consumequeue/<topic>/<queue_id>/<start>` where `<start>` is the queue
//! offset of the file's first unit as 20 decimal digits. Every file of a queue holds exactly
//! `units_per_file` units (preallocated, zero-filled); file `k` of a queue starts at
//! `first_start + k * units_per_file` (no gaps). A unit is 20 bytes, little-endian:
//!
//! | offset | size | field              | meaning                                             |
//! |-------:|-----:|--------------------|-----------------------------------------------------|
//! | 0      | 8    | `phys_offset` u64  | CommitLog position of the message record (its id)   |
//! | 8      | 4    | `size` u32         | record length in bytes; 0 = unit never written      |
//! | 12     | 8    | `tag_hash` u64     | [`crate::hash::tag_hash`] of the message's tags      |
//!
//! There is no magic, version or CRC per unit (a fixed-width array indexed by queue offset, as
//! in RocketMQ): the format is versioned by [`CQ_FORMAT_VERSION`] in the crate's store layout,
//! and a unit is *valid* iff `size != 0` and its physical offset is strictly greater than the
//! previous unit's. Every unit is checked again when used: the record it points at carries a
//! CRC.

use crate::codec::le_u32_at;
use crate::codec::le_u64_at;
use crate::types::PhysOffset;
use crate::types::TagHash;

/// Bytes per unit.
pub const CQ_UNIT_LEN: usize = 20;
/// Layout version of ConsumeQueue files (bumped on any change to this table).
pub const CQ_FORMAT_VERSION: u32 = 1;
/// Digits of a file name.
pub const FILE_NAME_DIGITS: usize = 20;

const _: () = assert!(CQ_UNIT_LEN == 8 + 4 + 8);
const _: () = assert!(u64::MAX.ilog10() as usize + 1 == FILE_NAME_DIGITS);

/// One ConsumeQueue entry: where a message is and a hash of its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqUnit {
    /// Physical offset of the message record.
    pub phys_offset: PhysOffset,
    /// Record length; never 0 in a written unit.
    pub size: u32,
    /// Tag hash for the first filter stage.
    pub tag_hash: TagHash,
}

impl CqUnit {
    /// The 20 bytes of this unit.
    pub fn encode(&self) -> [u8; CQ_UNIT_LEN] {
        let mut b = [0u8; CQ_UNIT_LEN];
        b[0..8].copy_from_slice(&self.phys_offset.get().to_le_bytes());
        b[8..12].copy_from_slice(&self.size.to_le_bytes());
        b[12..20].copy_from_slice(&self.tag_hash.to_le_bytes());
        b
    }

    /// Decodes the unit at the start of `b`; `None` if `b` is shorter than a unit.
    pub fn decode(b: &[u8]) -> Option<CqUnit> {
        Some(CqUnit {
            phys_offset: PhysOffset::new(le_u64_at(b, 0)?),
            size: le_u32_at(b, 8)?,
            tag_hash: le_u64_at(b, 12)?,
        })
    }

    /// True if never written (size 0).
    pub fn is_blank(&self) -> bool {
        self.size == 0
    }

    /// Physical offset one past the record.
    pub fn end_phys(&self) -> PhysOffset {
        self.phys_offset.advance(u64::from(self.size))
    }
}

/// The 20-digit file name of number `n` (a ConsumeQueue file's start offset, an IndexFile's
/// sequence number).
pub fn file_name(n: u64) -> String {
    format!("{n:0width$}", width = FILE_NAME_DIGITS)
}

/// Parses a file name into its number; `None` unless it is exactly 20 ASCII digits.
pub fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() != FILE_NAME_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trip_and_byte_order() {
        let u = CqUnit {
            phys_offset: PhysOffset::new(0x0102_0304_0506_0708),
            size: 0x0a0b_0c0d,
            tag_hash: 0x1112_1314_1516_1718,
        };
        let b = u.encode();
        assert_eq!(b[0], 0x08, "little-endian");
        assert_eq!(b[8], 0x0d);
        assert_eq!(CqUnit::decode(&b), Some(u));
        assert_eq!(u.end_phys().get(), 0x0102_0304_0506_0708 + 0x0a0b_0c0d);
    }

    #[test]
    fn truncated_unit() {
        let b = CqUnit {
            phys_offset: PhysOffset::new(1),
            size: 2,
            tag_hash: 3,
        }
        .encode();
        for cut in 0..CQ_UNIT_LEN {
            assert_eq!(CqUnit::decode(&b[..cut]), None);
        }
    }

    #[test]
    fn flipped_bits_change_the_unit_or_blank_it() {
        // Units carry no CRC: a flipped bit yields a different unit, which queue recovery
        // rejects if it breaks the size/monotonic rules and the record CRC rejects otherwise.
        let u = CqUnit {
            phys_offset: PhysOffset::new(100),
            size: 1,
            tag_hash: 3,
        };
        let b = u.encode();
        for i in 0..CQ_UNIT_LEN * 8 {
            let mut c = b;
            c[i / 8] ^= 1 << (i % 8);
            assert_ne!(CqUnit::decode(&c), Some(u));
        }
        let mut c = b;
        c[8] ^= 1;
        assert!(CqUnit::decode(&c).expect("unit").is_blank());
    }

    #[test]
    fn names() {
        assert_eq!(file_name(0), "00000000000000000000");
        assert_eq!(file_name(u64::MAX), "18446744073709551615");
        assert_eq!(parse_file_name("00000000000000001000"), Some(1000));
        assert_eq!(parse_file_name("1000"), None);
        assert_eq!(parse_file_name("0000000000000000100x"), None);
        assert_eq!(parse_file_name("99999999999999999999"), None, "overflow");
    }
}
