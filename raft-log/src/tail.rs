//! [`truncate_tail`]: cutting the CommitLog at its end, at open (a torn tail) and on a Raft
//! truncation, so that no record of the end segment's current life lies past the cut, whether
//! the bytes there are zeros (a new segment) or a reused segment's old records (`recycle.rs`).

use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::format::encode_padding;
use crate::format::ENTRY_HEADER_LEN;
use crate::segments::Segments;
use crate::types::RawPhys;

/// Bytes past a cut that [`truncate_tail`] reads before it gives up looking for the run of
/// zeros that ends a torn tail, and closes the segment instead.
pub const TAIL_SCAN_BYTES: u64 = 16 << 20;
/// Zero bytes in a row that end a torn tail.
const ZERO_RUN_BYTES: u64 = 1 << 20;
/// Bytes read (and zeroed) at a time.
const CHUNK: u64 = 64 << 10;

/// Cuts the log at `end`: removes the segments after the one holding it and makes sure no
/// record of this life of that segment lies past `end`; returns the new append position.
///
/// `written`: where this life's bytes end, if known (a truncation, after a flush:
/// the append position). Inside `end`'s segment, `[end, written)` is zeroed. At or past the
/// segment's end (the cut undoes a roll, or the segment was closed), `rolled_end` says where
/// this life's bytes in `end`'s segment end when this process rolled out of it: `[end,
/// rolled_end)` is zeroed and the log goes on at `end`, where a replica that never held the
/// cut entries writes the next one too (the same index at the same offset everywhere).
/// Without it the segment is closed with a padding record at `end` and the log goes on at
/// the next segment's start: zeros would have to cover whatever a padding record past the
/// new one hides, old bytes of a whole reused segment for one that recovery closed (below).
/// That moves this replica's later offsets; it is left for a segment whose bytes past the
/// cut this process cannot vouch for.
///
/// `None` (recovery): bytes of a torn tail may lie anywhere past `end` (page writeback skips
/// pages), ended by a run of [`ZERO_RUN_BYTES`] zeros; they are zeroed. A segment reused
/// from an earlier one (`recycle.rs`) holds its old bytes instead of zeros, and so may one
/// whose torn tail runs long: when no such run shows within [`TAIL_SCAN_BYTES`], the segment is
/// closed with a padding record at `end` (or, if `end` is its start, removed) and the log goes
/// on at the next segment's start. Whatever zeros or padding are written is synced before this
/// returns.
pub fn truncate_tail(
    segs: &mut Segments,
    end: RawPhys,
    written: Option<RawPhys>,
    rolled_end: Option<RawPhys>,
) -> LogResult<RawPhys> {
    let seg_start = segs.start_of(end);
    let next = seg_start + segs.segment_bytes();
    let removed = segs.remove_from(next)?;
    if !removed.is_empty() {
        tracing::info!(
            from_phys = next,
            segments = removed.len(),
            "removed segments after the log end"
        );
    }
    let Some(seg) = segs.get(seg_start) else {
        return Ok(end);
    };
    let path = segs.path(seg_start);
    let cap = seg.capacity();
    let off = end - seg_start;
    let zero_to = match written {
        Some(w) if w < next => Some(w.max(end) - seg_start),
        Some(_) => rolled_end.map(|r| r.clamp(end, next) - seg_start),
        None => zero_run_start(seg.as_ref(), off, cap, &path)?,
    };
    let Some(zero_to) = zero_to else {
        if off == 0 {
            segs.remove_from(seg_start)?;
            tracing::info!(
                phys_offset = end,
                "removed the segment starting at the log end: it holds no record of its own"
            );
            return Ok(end);
        }
        // A padding record needs its header's room; a shorter rest is skipped anyway.
        if cap - off >= ENTRY_HEADER_LEN as u64 {
            let padding = encode_padding(end, (cap - off) as u32);
            seg.write_at(off, &padding)
                .map_err(|e| LogError::io("write", &path, e))?;
            seg.sync_range(off, ENTRY_HEADER_LEN as u64)
                .map_err(|e| LogError::io("msync", &path, e))?;
        }
        tracing::info!(phys_offset = end, next_phys = next, "closed the segment at the log end with a padding record: the bytes past it are not this segment's records");
        return Ok(next);
    };
    let mut dirty = (u64::MAX, 0u64);
    let mut at = off;
    let mut buf = vec![0u8; CHUNK as usize];
    while at < zero_to {
        let n = CHUNK.min(zero_to - at) as usize;
        seg.read_at(at, &mut buf[..n])
            .map_err(|e| LogError::io("read", &path, e))?;
        if buf[..n].iter().any(|b| *b != 0) {
            seg.write_at(at, &crate::env::ZEROS[..n])
                .map_err(|e| LogError::io("write", &path, e))?;
            dirty = (dirty.0.min(at), at + n as u64);
        }
        at += n as u64;
    }
    if dirty.0 < dirty.1 {
        seg.sync_range(dirty.0, dirty.1 - dirty.0)
            .map_err(|e| LogError::io("msync", &path, e))?;
    }
    Ok(end)
}

/// Where the run of [`ZERO_RUN_BYTES`] zeros (or the segment's end) that ends a torn tail
/// starting at `off` begins, in whole chunks, if it lies within [`TAIL_SCAN_BYTES`].
fn zero_run_start(
    seg: &dyn SegmentFile,
    off: u64,
    cap: u64,
    path: &std::path::Path,
) -> LogResult<Option<u64>> {
    let mut buf = vec![0u8; CHUNK as usize];
    let mut at = off;
    let mut run_start = off;
    while at < cap && at - run_start < ZERO_RUN_BYTES {
        if at - off >= TAIL_SCAN_BYTES {
            return Ok(None);
        }
        let n = CHUNK.min(cap - at) as usize;
        seg.read_at(at, &mut buf[..n])
            .map_err(|e| LogError::io("read", path, e))?;
        at += n as u64;
        if buf[..n].iter().any(|b| *b != 0) {
            run_start = at;
        }
    }
    Ok(Some(run_start))
}
