//! Byte layout of a snapshot (`<data_dir>/snapshots/snapshot-<term>-<index>-<seq>.snap`).
//! All integers little-endian. Version 1:
//!
//! | offset        | size          | field        | meaning                                     |
//! |--------------:|--------------:|--------------|---------------------------------------------|
//! | 0             | 8             | `magic`      | [`SNAPSHOT_MAGIC`] (`RMQSNAP` + version 1)  |
//! | 8             | 8             | `manifest_len` u64 | bytes of the manifest                 |
//! | 16            | manifest_len  | manifest     | [`Manifest`] as JSON                        |
//! |               | 20 * units    | queues       | per manifest queue, in order: its ConsumeQueue units `[min, max)` (20-byte CQ format) |
//! |               | 4             | `crc` u32    | CRC32 of every byte before it (the prefix)  |
//! |               | sum of lens   | segments     | per manifest segment, in order: its bytes `[start, start + len)` of the CommitLog |
//!
//! The segments are the retained CommitLog up to the physical end of the snapshot's last
//! entry, byte-identical (same physical offsets); the last one is partial, the installer pads
//! it to the segment size. Each segment's CRC is in the manifest (checked while staging,
//! before the receiver's log takes the bytes over). On disk a node keeps only the prefix (up to
//! the CRC): the segment part is served from its own CommitLog (committed bytes never change,
//! and they are pinned while a snapshot is sent) so a snapshot never doubles the disk usage of
//! the retained log.
//!
//! The codec: [`encode_header`] / [`decode_header`] (magic, version, manifest length),
//! [`encode_manifest`] / [`decode_manifest`], [`layout`] (where each part starts), and over
//! any [`SnapshotBytes`] source [`read_head`] (header + manifest) and [`check_prefix_crc`].
//! Decoding never panics: bad bytes give [`StoreError::Corruption`] naming the source and
//! offset.

use serde::Deserialize;
use serde::Serialize;

use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::dedup::DedupWindow;
use crate::error::Result;
use crate::error::StoreError;
use crate::offsets::ConsumerOffsetTable;
use crate::raft_types::StoredMembership;
use crate::receive::ReceiveTable;
use crate::topic::TopicTable;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::users::UserTable;
use raftmq_raft_log::types::LogId;

/// Magic and version.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"RMQSNAP\x01";
/// Fixed header bytes before the manifest.
pub const SNAPSHOT_HEADER_LEN: u64 = 16;
/// Bytes of the prefix CRC.
pub const PREFIX_CRC_LEN: u64 = 4;
/// Bytes read at a time when a part is streamed (CRC of the prefix).
const CHUNK_BYTES: u64 = 4 << 20;

const _: () = assert!(SNAPSHOT_HEADER_LEN == (SNAPSHOT_MAGIC.len() + 8) as u64);
const _: () = assert!(PREFIX_CRC_LEN == 4);

/// One queue's units in the snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueManifest {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// First unit's offset.
    pub min_offset: QueueOffset,
    /// One past the last unit.
    pub max_offset: QueueOffset,
}

/// One CommitLog segment's bytes in the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SegmentManifest {
    /// Physical start (segment-aligned).
    pub start: PhysOffset,
    /// Bytes included (the segment size, or less for the last one).
    pub len: u64,
    /// CRC32 of those bytes (checked before the receiver's log takes them over).
    pub crc: u32,
}

impl SegmentManifest {
    /// One past the last byte included.
    pub fn end(&self) -> PhysOffset {
        self.start.advance(self.len)
    }
}

/// What a node needs to continue from `last_log_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Manifest {
    /// Last entry covered.
    pub last_log_id: Option<LogId>,
    /// Membership as of `last_log_id`.
    pub membership: StoredMembership,
    /// Topics.
    pub topics: TopicTable,
    /// Consumer offsets.
    pub offsets: ConsumerOffsetTable,
    /// Pop state. A manifest written before it existed has no such key: read as empty, so
    /// the format version stays 1.
    #[serde(default)]
    pub receive: ReceiveTable,
    /// Dedup window of idempotent sends; absent in older manifests: read as empty (version 1
    /// stays).
    #[serde(default)]
    pub dedup: DedupWindow,
    /// Users, secrets sealed; absent in older manifests: read as none (version 1 stays).
    #[serde(default)]
    pub users: UserTable,
    /// Physical end of the last dispatched normal entry.
    pub dispatched_phys_end: PhysOffset,
    /// Physical end of entry `last_log_id` (next append position), if the log holds it.
    pub log_end_phys: Option<PhysOffset>,
    /// CommitLog segment size of the cluster.
    pub segment_bytes: u64,
    /// Per-queue offsets (units follow in this order).
    pub queues: Vec<QueueManifest>,
    /// Segments (bytes follow in this order).
    pub segments: Vec<SegmentManifest>,
}

impl Manifest {
    /// Bytes of all segments.
    pub fn segments_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }

    /// Bytes of all queue units.
    pub fn units_bytes(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.min_offset.count_to(q.max_offset) * CQ_UNIT_LEN as u64)
            .sum()
    }
}

/// The fixed header: magic and version, then the manifest length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// Bytes of the manifest that follows the header.
    pub manifest_len: u64,
}

/// The header bytes of a snapshot whose manifest is `manifest_len` bytes long.
pub fn encode_header(manifest_len: u64) -> [u8; SNAPSHOT_HEADER_LEN as usize] {
    let mut b = [0u8; SNAPSHOT_HEADER_LEN as usize];
    b[..8].copy_from_slice(&SNAPSHOT_MAGIC);
    b[8..].copy_from_slice(&manifest_len.to_le_bytes());
    b
}

/// Decodes the header at the start of `b`: corruption (in `"snapshot"`, for the caller to
/// [`locate`](StoreError::locate)) if `b` is too short or the magic or version differ.
pub fn decode_header(b: &[u8]) -> Result<SnapshotHeader> {
    if b.len() < SNAPSHOT_HEADER_LEN as usize {
        return Err(StoreError::corruption(
            "snapshot",
            0,
            "file too short for a snapshot",
        ));
    }
    if b[..8] != SNAPSHOT_MAGIC {
        return Err(StoreError::corruption(
            "snapshot",
            0,
            "bad magic or version",
        ));
    }
    let manifest_len = crate::codec::le_u64_at(b, 8).expect("16 bytes checked above");
    Ok(SnapshotHeader { manifest_len })
}

/// The manifest as stored (JSON).
pub fn encode_manifest(m: &Manifest) -> Result<Vec<u8>> {
    serde_json::to_vec(m)
        .map_err(|e| StoreError::invalid(format!("snapshot manifest does not serialize: {e}")))
}

/// Decodes the manifest bytes (which start at [`SNAPSHOT_HEADER_LEN`] of the snapshot).
pub fn decode_manifest(b: &[u8]) -> Result<Manifest> {
    serde_json::from_slice(b)
        .map_err(|e| StoreError::corruption("snapshot", SNAPSHOT_HEADER_LEN, e.to_string()))
}

/// Where the parts of a snapshot start (byte offsets in the snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The queue units (just past the manifest).
    pub units_at: u64,
    /// The prefix CRC (= bytes it covers).
    pub crc_at: u64,
    /// The first segment byte (= length of the prefix a node stores).
    pub segments_at: u64,
    /// One past the last segment byte (= length of the whole snapshot).
    pub end: u64,
}

/// Random access to the bytes of a snapshot: a [`SnapshotFile`](super::SnapshotFile), or a
/// byte slice (tests).
pub trait SnapshotBytes {
    /// What errors name as the file.
    fn source_name(&self) -> String;
    /// Total bytes.
    fn total_len(&self) -> u64;
    /// Exactly `len` bytes at `offset`; corruption if the snapshot ends before.
    fn read_range(&self, offset: u64, len: u64) -> Result<Vec<u8>>;
}

impl SnapshotBytes for [u8] {
    fn source_name(&self) -> String {
        "snapshot bytes".to_owned()
    }

    fn total_len(&self) -> u64 {
        self.len() as u64
    }

    fn read_range(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = offset.checked_add(len).filter(|e| *e <= self.len() as u64);
        let Some(end) = end else {
            let reason = format!("{len} bytes expected, file too short");
            return Err(StoreError::corruption(self.source_name(), offset, reason));
        };
        Ok(self[offset as usize..end as usize].to_vec())
    }
}

/// Reads and decodes the header and the manifest. Checks no CRC (see [`check_prefix_crc`]).
pub fn read_head(src: &(impl SnapshotBytes + ?Sized)) -> Result<(SnapshotHeader, Manifest)> {
    if src.total_len() < SNAPSHOT_HEADER_LEN + PREFIX_CRC_LEN {
        let reason = "file too short for a snapshot";
        return Err(StoreError::corruption(src.source_name(), 0, reason));
    }
    let h = decode_header(&src.read_range(0, SNAPSHOT_HEADER_LEN)?)
        .map_err(|e| e.locate(src.source_name(), 0))?;
    let mbytes = src.read_range(SNAPSHOT_HEADER_LEN, h.manifest_len)?;
    let m = decode_manifest(&mbytes).map_err(|e| e.locate(src.source_name(), 0))?;
    Ok((h, m))
}

/// Where the parts of the snapshot with header `h` and manifest `m` start; corruption if the
/// lengths they give do not fit a `u64` (or a queue range is reversed).
pub fn layout(
    src: &(impl SnapshotBytes + ?Sized),
    h: &SnapshotHeader,
    m: &Manifest,
) -> Result<Layout> {
    let units = m.queues.iter().try_fold(0u64, |acc, q| {
        q.min_offset
            .checked_count_to(q.max_offset)
            .and_then(|n| n.checked_mul(CQ_UNIT_LEN as u64))
            .and_then(|b| acc.checked_add(b))
    });
    let segments = m
        .segments
        .iter()
        .try_fold(0u64, |acc, s| acc.checked_add(s.len));
    let units_at = SNAPSHOT_HEADER_LEN.checked_add(h.manifest_len);
    let crc_at = units_at.zip(units).and_then(|(a, u)| a.checked_add(u));
    let segments_at = crc_at.and_then(|c| c.checked_add(PREFIX_CRC_LEN));
    let end = segments_at
        .zip(segments)
        .and_then(|(a, s)| a.checked_add(s));
    match (units_at, crc_at, segments_at, end) {
        (Some(units_at), Some(crc_at), Some(segments_at), Some(end)) => Ok(Layout {
            units_at,
            crc_at,
            segments_at,
            end,
        }),
        _ => Err(StoreError::corruption(
            src.source_name(),
            SNAPSHOT_HEADER_LEN,
            "the manifest's lengths do not fit a snapshot",
        )),
    }
}

/// Checks the CRC of the prefix `[0, layout.crc_at)` against the 4 bytes at `layout.crc_at`,
/// reading the prefix in chunks.
pub fn check_prefix_crc(src: &(impl SnapshotBytes + ?Sized), layout: &Layout) -> Result<()> {
    let body = layout.crc_at;
    let mut h = crc32fast::Hasher::new();
    let mut pos = 0;
    while pos < body {
        let n = CHUNK_BYTES.min(body - pos);
        h.update(&src.read_range(pos, n)?);
        pos += n;
    }
    let b = src.read_range(body, PREFIX_CRC_LEN)?;
    let stored = crate::codec::le_u32_at(&b, 0).expect("4 bytes read");
    let actual = h.finalize();
    if stored != actual {
        let reason = format!("prefix crc {stored:#010x}, computed {actual:#010x}");
        return Err(StoreError::corruption(src.source_name(), body, reason));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::CqUnit;
    use crate::topic::TopicConfig;

    fn manifest() -> Manifest {
        let mut topics = TopicTable::default();
        topics.create(TopicConfig::new("t", 2)).expect("create");
        Manifest {
            last_log_id: Some(LogId::new_term_index(3, 41)),
            membership: StoredMembership::default(),
            topics,
            offsets: ConsumerOffsetTable::default(),
            receive: ReceiveTable::default(),
            dedup: DedupWindow::default(),
            users: UserTable::default(),
            dispatched_phys_end: PhysOffset::new(4096 + 300),
            log_end_phys: Some(PhysOffset::new(4096 + 300)),
            segment_bytes: 4096,
            queues: vec![QueueManifest {
                topic: "t".into(),
                queue_id: QueueId::new(1),
                min_offset: QueueOffset::new(5),
                max_offset: QueueOffset::new(7),
            }],
            segments: vec![SegmentManifest {
                start: PhysOffset::new(4096),
                len: 300,
                crc: 0xdead_beef,
            }],
        }
    }

    /// The prefix a node stores: header, manifest, units, CRC (as `build.rs` writes it).
    fn prefix(m: &Manifest) -> Vec<u8> {
        let mbytes = encode_manifest(m).expect("encode");
        let mut b = encode_header(mbytes.len() as u64).to_vec();
        b.extend_from_slice(&mbytes);
        for i in 0..2u64 {
            let u = CqUnit {
                phys_offset: PhysOffset::new(4096 + 100 * i),
                size: 100,
                tag_hash: i,
            };
            b.extend_from_slice(&u.encode());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode_prefix(b: &[u8]) -> Result<Manifest> {
        let (h, m) = read_head(b)?;
        let l = layout(b, &h, &m)?;
        check_prefix_crc(b, &l)?;
        Ok(m)
    }

    #[test]
    fn header_round_trip() {
        let b = encode_header(1234);
        assert_eq!(&b[..8], b"RMQSNAP\x01");
        assert_eq!(
            decode_header(&b).expect("decode"),
            SnapshotHeader { manifest_len: 1234 }
        );
    }

    #[test]
    fn prefix_round_trip_and_layout() {
        let m = manifest();
        let b = prefix(&m);
        assert_eq!(decode_prefix(&b).expect("decode"), m);
        let (h, _) = read_head(b.as_slice()).expect("head");
        let l = layout(b.as_slice(), &h, &m).expect("layout");
        assert_eq!(l.units_at, SNAPSHOT_HEADER_LEN + h.manifest_len);
        assert_eq!(l.crc_at, l.units_at + 2 * CQ_UNIT_LEN as u64);
        assert_eq!(l.segments_at, b.len() as u64);
        assert_eq!(l.end, l.segments_at + 300);
    }

    #[test]
    fn truncated_is_corruption() {
        let b = prefix(&manifest());
        for n in 0..SNAPSHOT_HEADER_LEN as usize {
            assert!(decode_header(&b[..n]).expect_err("short").is_corruption());
        }
        for n in 0..b.len() {
            let e = decode_prefix(&b[..n]).expect_err("truncated");
            assert!(e.is_corruption(), "{n}: {e}");
        }
    }

    #[test]
    fn every_flipped_bit_is_corruption() {
        let b = prefix(&manifest());
        for bit in 0..b.len() * 8 {
            let mut f = b.clone();
            f[bit / 8] ^= 1 << (bit % 8);
            let e = decode_prefix(&f).expect_err("flipped");
            assert!(e.is_corruption(), "bit {bit}: {e}");
        }
    }

    #[test]
    fn manifest_without_pop_state_reads_as_empty() {
        let mut m = manifest();
        let mut json: serde_json::Value =
            serde_json::from_slice(&encode_manifest(&m).expect("encode")).expect("json");
        assert!(json
            .as_object_mut()
            .expect("object")
            .remove("receive")
            .is_some());
        // Nor a dedup window (manifests written before it existed).
        assert!(json
            .as_object_mut()
            .expect("object")
            .remove("dedup")
            .is_some());
        let old = serde_json::to_vec(&json).expect("json");
        assert_eq!(decode_manifest(&old).expect("decode"), m);
        let r = &mut m.receive;
        r.get_or_start("g", "t", QueueId::new(1), || QueueOffset::new(5));
        let back = decode_manifest(&encode_manifest(&m).expect("encode")).expect("decode");
        assert_eq!(back, m);
    }

    #[test]
    fn overflowing_lengths_are_corruption() {
        let mut m = manifest();
        m.queues[0].max_offset = QueueOffset::new(u64::MAX);
        let h = SnapshotHeader { manifest_len: 10 };
        assert!(layout(&[][..], &h, &m)
            .expect_err("overflow")
            .is_corruption());
        let h = SnapshotHeader {
            manifest_len: u64::MAX,
        };
        assert!(layout(&[][..], &h, &manifest())
            .expect_err("overflow")
            .is_corruption());
    }
}
