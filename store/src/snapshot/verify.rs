//! Checking a received snapshot before anything is installed from it: a snapshot that fails
//! here is refused (the transport answers the leader with an error, openraft sends again),
//! so a bad transfer never reaches the state machine, never stops Raft and never leaves a
//! half-installed node.
//!
//! Checked, in this order, none of it trusting the bytes: magic and manifest length, the
//! manifest's own consistency (queue ranges, segment size, segments aligned, contiguous, full
//! but the last, ending at the snapshot's log end), the prefix CRC, the total length, each
//! segment's CRC, and that every ConsumeQueue unit decodes and points inside the segments.
//! For a snapshot from a peer, [`check_extent`] also: a snapshot of an entry carries
//! segments and a log end, one of no entry neither.

use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::error::StoreError;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::format::check_prefix_crc;
use crate::snapshot::format::layout;
use crate::snapshot::format::read_head;
use crate::snapshot::format::Layout;
use crate::snapshot::format::Manifest;
use crate::snapshot::format::SegmentManifest;
use crate::snapshot::format::SnapshotBytes;
use crate::snapshot::format::SNAPSHOT_HEADER_LEN;
use raftmq_raft_log::types::LogId;

/// Log bytes and units are read in pieces of at most this size.
const CHUNK: u64 = 4 << 20;

fn corrupt(f: &SnapshotFile, offset: u64, reason: impl Into<String>) -> StoreError {
    StoreError::corruption(f.path().display().to_string(), offset, reason)
}

/// A snapshot that passed [`verify`].
#[derive(Debug)]
pub(crate) struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// Where its parts start.
    pub layout: Layout,
}

/// Checks the manifest alone: ranges, sizes and the segment layout.
fn check_manifest(f: &SnapshotFile, m: &Manifest, segment_bytes: u64) -> Result<()> {
    let bad = |reason: String| Err(corrupt(f, SNAPSHOT_HEADER_LEN, reason));
    if m.segment_bytes != segment_bytes {
        return bad(format!(
            "segment size {}, this node uses {segment_bytes}",
            m.segment_bytes
        ));
    }
    if let Some(q) = m.queues.iter().find(|q| q.min_offset > q.max_offset) {
        return bad(format!(
            "queue {}/{} range [{}, {}) is reversed",
            q.topic, q.queue_id, q.min_offset, q.max_offset
        ));
    }
    let units: Option<u64> = m.queues.iter().try_fold(0u64, |acc, q| {
        q.min_offset
            .count_to(q.max_offset)
            .checked_mul(CQ_UNIT_LEN as u64)
            .and_then(|b| acc.checked_add(b))
    });
    if units.is_none_or(|u| u > f.len()) {
        return bad("queue units larger than the snapshot".into());
    }
    for (i, s) in m.segments.iter().enumerate() {
        let last = i + 1 == m.segments.len();
        // Checked: the numbers are the sender's (a start near u64::MAX must not wrap).
        let follows =
            i == 0 || m.segments[i - 1].start.checked_advance(segment_bytes) == Some(s.start);
        let full_or_last = s.len == segment_bytes || (last && s.len <= segment_bytes);
        let fits = s.start.checked_advance(s.len).is_some();
        if !s.start.is_aligned(segment_bytes) || !follows || !full_or_last || s.len == 0 || !fits {
            return bad(format!(
                "segment {} (+{}) is not aligned, contiguous and full",
                s.start, s.len
            ));
        }
    }
    let seg_end = m.segments.last().map(|s| s.end());
    match (seg_end, m.log_end_phys) {
        (None, _) => Ok(()),
        (Some(e), Some(end)) if e == end => Ok(()),
        (e, end) => bad(format!("segments end at {e:?}, the log end is {end:?}")),
    }
}

/// Checks what a snapshot received from a peer says it covers (the transport's gate, on top
/// of [`verify`]): a snapshot of some entry must carry the log up to it (segments, log end)
/// and a snapshot of no entry nothing; units need segments to point into and the dispatched
/// end lies inside the log. A node's own snapshots pass (its log holds its last applied
/// entry); installing one directly (openraft's storage suite applies entries its log never
/// held) is not checked, as installing keeps the local log when it holds the last entry.
pub(crate) fn check_extent(f: &SnapshotFile, m: &Manifest) -> Result<()> {
    match extent_problem(m) {
        None => Ok(()),
        Some(reason) => Err(corrupt(f, SNAPSHOT_HEADER_LEN, reason)),
    }
}

fn extent_problem(m: &Manifest) -> Option<String> {
    let has_units = m.units_bytes() > 0;
    match (m.last_log_id, m.log_end_phys, m.segments.is_empty()) {
        (Some(last), end, true) => Some(format!(
            "it ends at entry {last} but holds no segments (log end {end:?}): no log to \
             install"
        )),
        (Some(last), None, false) => Some(format!(
            "it ends at entry {last} and holds segments but names no log end"
        )),
        (None, end, no_segments) if end.is_some() || !no_segments || has_units => {
            Some("it covers no entry but holds segments, units or a log end".to_owned())
        }
        _ if m.log_end_phys.is_some_and(|e| m.dispatched_phys_end > e) => Some(format!(
            "its dispatched end {} lies past its log end {:?}",
            m.dispatched_phys_end, m.log_end_phys
        )),
        _ => None,
    }
}

/// Reads segment `s` of the snapshot (its bytes start at `pos`) in chunks, handing each to
/// `each` with its offset inside the segment, and checks the CRC the manifest gives it.
pub(crate) fn read_segment_checked(
    f: &SnapshotFile,
    s: &SegmentManifest,
    pos: u64,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut h = crc32fast::Hasher::new();
    let mut off = 0;
    while off < s.len {
        let n = CHUNK.min(s.len - off);
        let bytes = f.read_range(pos + off, n)?;
        h.update(&bytes);
        each(off, &bytes)?;
        off += n;
    }
    let crc = h.finalize();
    if crc != s.crc {
        let reason = format!(
            "segment {} crc {crc:#010x}, manifest says {:#010x}",
            s.start, s.crc
        );
        return Err(corrupt(f, pos, reason));
    }
    Ok(())
}

/// Checks each segment's CRC (their bytes start at `pos`).
fn check_segments(f: &SnapshotFile, m: &Manifest, mut pos: u64) -> Result<()> {
    for s in &m.segments {
        read_segment_checked(f, s, pos, |_, _| Ok(()))?;
        pos += s.len;
    }
    Ok(())
}

/// Checks that every unit decodes and its record lies inside the snapshot's segments.
fn check_units(f: &SnapshotFile, m: &Manifest, mut pos: u64) -> Result<()> {
    let (Some(first), Some(end)) = (m.segments.first(), m.log_end_phys) else {
        return Ok(());
    };
    for q in &m.queues {
        let mut left = q.min_offset.count_to(q.max_offset);
        while left > 0 {
            let n = left.min(CHUNK / CQ_UNIT_LEN as u64);
            let bytes = f.read_range(pos, n * CQ_UNIT_LEN as u64)?;
            for (i, b) in bytes.chunks_exact(CQ_UNIT_LEN).enumerate() {
                let at = pos + (i * CQ_UNIT_LEN) as u64;
                let u = CqUnit::decode(b).ok_or_else(|| corrupt(f, at, "bad unit"))?;
                let past_end = u
                    .phys_offset
                    .checked_advance(u64::from(u.size))
                    .is_none_or(|e| e > end);
                if u.size == 0 || u.phys_offset < first.start || past_end {
                    let reason = format!(
                        "unit of {}/{} points at {}+{}, outside the segments [{}, {end})",
                        q.topic, q.queue_id, u.phys_offset, u.size, first.start
                    );
                    return Err(corrupt(f, at, reason));
                }
            }
            pos += n * CQ_UNIT_LEN as u64;
            left -= n;
        }
    }
    Ok(())
}

/// Checks a whole snapshot (see the module docs) that should end at `last_log_id`, for a node
/// whose CommitLog segments are `segment_bytes` long.
pub(crate) fn verify(
    f: &SnapshotFile,
    last_log_id: Option<LogId>,
    segment_bytes: u64,
) -> Result<Verified> {
    let (h, m) = read_head(f)?;
    if m.last_log_id != last_log_id {
        let reason = format!(
            "snapshot holds {:?}, its meta says {last_log_id:?}",
            m.last_log_id
        );
        return Err(corrupt(f, SNAPSHOT_HEADER_LEN, reason));
    }
    check_manifest(f, &m, segment_bytes)?;
    let l = layout(f, &h, &m)?;
    check_prefix_crc(f, &l)?;
    if f.len() != l.end {
        let reason = format!("{} bytes, the manifest describes {}", f.len(), l.end);
        return Err(corrupt(f, l.segments_at, reason));
    }
    check_segments(f, &m, l.segments_at)?;
    check_units(f, &m, l.units_at)?;
    Ok(Verified {
        manifest: m,
        layout: l,
    })
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
