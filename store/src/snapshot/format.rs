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

use serde::Deserialize;
use serde::Serialize;

use crate::offsets::ConsumerOffsetTable;
use crate::sm::state::StoredMembership;
use crate::topic::TopicTable;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use raftmq_raft_log::types::LogId;

/// Magic and version.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"RMQSNAP\x01";
/// Fixed header bytes before the manifest.
pub const SNAPSHOT_HEADER_LEN: u64 = 16;

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
            .map(|q| {
                (q.max_offset - q.min_offset) * crate::consume_queue::format::CQ_UNIT_LEN as u64
            })
            .sum()
    }
}
