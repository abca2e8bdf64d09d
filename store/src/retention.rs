//! Retention: which CommitLog segments go, and deleting them with the ConsumeQueue and index
//! units below the new minimum physical offset; the disk-full guard. Functions over `Shared`
//! behind the [`Store`](crate::Store) methods of the same names.
//!
//! A segment's age is the store timestamp of the newest dispatched message in it (a segment
//! without any dispatched message counts as expired). Whole segments only, oldest first:
//! a segment goes when it is older than `file-reserved-hours`, or — the oldest one, one per
//! plan — when disk usage is above `disk-clean-ratio`. Never the segment holding the entry of
//! the durable dispatch checkpoint or anything after it (so re-dispatch after a crash always
//! finds its entries), and never the active segment.
//!
//! Sequence (driven by the node): `plan = retention_plan(now)`, build a snapshot and
//! `raft.trigger().purge_log(plan.purge_upto.index)`, then
//! [`Store::apply_retention`](crate::Store::apply_retention).

use crate::error::Result;
use crate::error::StoreError;
use crate::state::DispatchState;
use crate::state::Shared;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::TimestampMs;
use raftmq_raft_log::types::LogId;

/// How long the send path reuses a disk usage reading (see
/// [`Store::check_disk`](crate::Store::check_disk)).
pub const DISK_CHECK_TTL: std::time::Duration = std::time::Duration::from_millis(100);

/// What retention will delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPlan {
    /// Purge the Raft log up to this entry: the first entry of the segment starting at
    /// `delete_below_phys` (so every byte below it is purged; that entry stays readable).
    pub purge_upto: LogId,
    /// Segments ending at or below this physical offset go (segment-aligned).
    pub delete_below_phys: PhysOffset,
}

/// Store timestamp of the newest dispatched message in `[start, end)`, if any.
fn newest_ts(
    shared: &Shared,
    st: &DispatchState,
    start: PhysOffset,
    end: PhysOffset,
) -> Result<Option<TimestampMs>> {
    let mut newest = None;
    for q in st.cqs.iter() {
        let o = q.first_offset_at_or_after_phys(end);
        if o <= q.min_offset() {
            continue;
        }
        let u = q.get(o.prev())?;
        if u.phys_offset < start {
            continue;
        }
        let rec = shared.log.read_at(u.phys_offset, u.size)?;
        let view = crate::message::MessageView::parse(&rec)?;
        newest = newest.max(Some(view.store_timestamp_ms));
    }
    Ok(newest)
}

/// Used share of a file system as `df` computes it: used / (used + available to users).
/// Blocks reserved for root and blocks the file system never offers (quotas, thin devices) count
/// neither as used nor as free, so the ratio matches what an operator reads in `df`.
pub fn usage_ratio(blocks: u64, free: u64, available: u64) -> f64 {
    let used = blocks.saturating_sub(free);
    let denominator = used.saturating_add(available);
    if denominator == 0 {
        return 0.0;
    }
    used as f64 / denominator as f64
}

/// Disk usage of the data dir's file system, 0..1 (statvfs), computed as `df` shows it.
pub(crate) fn disk_usage(shared: &Shared) -> Result<f64> {
    if let Some(u) = *shared.disk_usage_override.lock() {
        return Ok(u);
    }
    let s = crate::fs_space::statvfs(&shared.data_dir)?;
    Ok(usage_ratio(s.blocks, s.free, s.available))
}

/// [`Store::disk_usage`](crate::Store::disk_usage), reusing an answer younger than
/// [`DISK_CHECK_TTL`].
fn cached_disk_usage(shared: &Shared) -> Result<f64> {
    if shared.disk_usage_override.lock().is_some() {
        return disk_usage(shared);
    }
    let now = std::time::Instant::now();
    if let Some((at, u)) = *shared.disk_usage_cache.lock() {
        if now.duration_since(at) < DISK_CHECK_TTL {
            return Ok(u);
        }
    }
    let u = disk_usage(shared)?;
    *shared.disk_usage_cache.lock() = Some((now, u));
    Ok(u)
}

/// Test hook: pretend the disk usage is `usage` (None: use statvfs again).
#[doc(hidden)]
pub(crate) fn set_disk_usage_override(shared: &Shared, usage: Option<f64>) {
    *shared.disk_usage_override.lock() = usage;
}

/// `DiskFull` once disk usage passes `disk-reject-ratio`: the leader refuses sends before
/// the log hits an I/O error (which would stop the Raft core).
///
/// Called on every send, so the statvfs answer is reused for [`DISK_CHECK_TTL`]: at the
/// reject ratio's margin (10% of the disk by default) a send burst that long cannot fill it.
pub(crate) fn check_disk(shared: &Shared) -> Result<()> {
    let u = cached_disk_usage(shared)?;
    let max = shared.config.disk_reject_ratio;
    if u > max {
        return Err(StoreError::DiskFull {
            reason: format!(
                "disk usage {:.1}% is above disk-reject-ratio {:.1}%",
                u * 100.0,
                max * 100.0
            ),
        });
    }
    Ok(())
}

/// What retention would delete at `now_ms` (see the module docs), or None.
pub(crate) fn retention_plan(
    shared: &Shared,
    now_ms: TimestampMs,
) -> Result<Option<RetentionPlan>> {
    retention_plan_upto(shared, now_ms, None)
}

/// [`retention_plan`] whose purge point is at most `covered` (a stored snapshot's last
/// index), when given: such a plan needs no new snapshot.
pub(crate) fn retention_plan_upto(
    shared: &Shared,
    now_ms: TimestampMs,
    covered: Option<LogIndex>,
) -> Result<Option<RetentionPlan>> {
    let log = &shared.log;
    let seg = log.config().segment_bytes;
    let w = log.watermarks();
    shared.settle_ended_checkpoint();
    let st = shared.state.read();
    let Some(cp) = st.checkpoint_applied else {
        return Ok(None);
    };
    let Some(cp_loc) = log.entry_location(LogIndex::of(&cp)) else {
        return Ok(None);
    };
    let mut limit = PhysOffset::new(cp_loc.phys - cp_loc.phys % seg);
    if let Some(c) = covered {
        // The purge point is the first entry of the segment at `below`: it is at most
        // `covered` when that segment starts at or before the one holding `covered`.
        let Some(c_loc) = log.entry_location(c.min(LogIndex::of(&cp))) else {
            return Ok(None);
        };
        limit = limit.min(PhysOffset::new(c_loc.phys - c_loc.phys % seg));
    }
    let over_clean = disk_usage(shared)? > shared.config.disk_clean_ratio;
    let reserved_ms = shared.config.file_reserved_hours * 3_600_000;
    let mut below = w.min_phys_offset;
    while below.advance(seg) <= limit {
        let expired = newest_ts(shared, &st, below, below.advance(seg))?
            .is_none_or(|ts| ts.saturating_add(reserved_ms) <= now_ms);
        if !(expired || (over_clean && below == w.min_phys_offset)) {
            break;
        }
        below = below.advance(seg);
    }
    drop(st);
    if below == w.min_phys_offset {
        return Ok(None);
    }
    // The first entry of the segment at `below`: purging up to it covers every byte below
    // `below` (padding included); the entry itself stays readable, its segment stays.
    let (mut lo, mut hi) = (w.first_index.map_or(0, LogIndex::get), cp.index);
    let mut found = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        match log.entry_location(LogIndex::new(mid)) {
            Some(l) if l.phys_offset() >= below => {
                found = Some(l);
                match mid.checked_sub(1) {
                    Some(h) => hi = h,
                    None => break,
                }
            }
            _ => lo = mid + 1,
        }
    }
    Ok(found.map(|l| RetentionPlan {
        purge_upto: LogId::new_term_index(l.term, l.index),
        delete_below_phys: below,
    }))
}

/// Deletes what `plan` names: CommitLog segments (the log must be purged up to
/// `plan.purge_upto` first), then ConsumeQueue and index units below the new minimum.
pub(crate) fn apply_retention(shared: &Shared, plan: &RetentionPlan) -> Result<()> {
    // Under the write lock, so a reader that finds a record gone sees the new minimum.
    let mut st = shared.state.write();
    // The stored snapshot first: it must never name a deleted segment (a crash between
    // the two steps leaves a trimmed snapshot over a log that still has them: harmless).
    let log_min = shared.log.watermarks().min_phys_offset;
    crate::snapshot::trim_current(shared, &st, plan.delete_below_phys.max(log_min))?;
    let (new_min, segments) = shared.log.detach_segments_below(plan.delete_below_phys)?;
    let cq_files = st.cqs.delete_below_phys(new_min)?;
    let index_files = st.index.delete_files_below(new_min)?;
    drop(st);
    // The segment files go after the lock: applying (and so every ack) waited for the
    // unlink of a 1 GiB file otherwise.
    segments.delete()?;
    let st = shared.state.read();
    tracing::info!(
        phys_offset = new_min.get(),
        log_index = plan.purge_upto.index,
        cq_files,
        index_files,
        "retention applied"
    );
    debug_assert!(st.validate().is_ok(), "{:?}", st.validate());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::usage_ratio;

    #[test]
    fn usage_is_computed_like_df() {
        // 252 G device, 38 G used, 54 G available to users (the rest reserved or never offered):
        // df says 41%, not 1 - 54/252 = 79%.
        let ratio = usage_ratio(252, 252 - 38, 54);
        assert!((ratio - 38.0 / 92.0).abs() < 1e-9, "{ratio}");
        assert_eq!(usage_ratio(0, 0, 0), 0.0);
        assert_eq!(usage_ratio(100, 0, 0), 1.0, "full with nothing available");
    }
}
