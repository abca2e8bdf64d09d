//! Stable hashes that end up on disk.
//!
//! std's `DefaultHasher` is randomly seeded per process and may change between Rust releases, so
//! nothing that is persisted or compared across nodes may use it. We use 64-bit FNV-1a over the
//! UTF-8 bytes: fixed, trivial, and good enough for tag filtering and index slots (collisions
//! are resolved by exact checks on the message record).

use crate::types::TagHash;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET_BASIS;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The tag hash stored in ConsumeQueue units. A message without tags (empty string) hashes to
/// `0`, which no tag expression other than `*` matches.
pub fn tag_hash(tag: &str) -> TagHash {
    if tag.is_empty() {
        0
    } else {
        fnv1a64(tag.as_bytes())
    }
}

/// The default key hash of the IndexFile.
pub fn key_hash(key: &str) -> u64 {
    fnv1a64(key.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_vectors() {
        // Reference values of FNV-1a 64.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn empty_tag_is_zero() {
        assert_eq!(tag_hash(""), 0);
        assert_ne!(tag_hash("TagA"), tag_hash("TagB"));
    }
}
