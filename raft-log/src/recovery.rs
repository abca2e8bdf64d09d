//! Recovery on open: scan the CommitLog (taking the raft index's records below the flush
//! checkpoint instead of their bytes), find the last valid record, tell a torn tail from
//! corruption of flushed data, truncate, and rebuild the raft index.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::LogConfig;
use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::format::check_payload;
use crate::format::decode_header;
use crate::format::HeaderSlot;
use crate::format::RecordHeader;
use crate::format::RecordKind;
use crate::format::ENTRY_HEADER_LEN;
use crate::graveyard::DELETED_SUFFIX;
use crate::meta::FlushCheckpoint;
use crate::raft_index::EntryLocation;
use crate::recycle::Recycler;
use crate::recycle::FREE_SUFFIX;
use crate::segments::parse_segment_name;
use crate::segments::Segments;
use crate::tail::truncate_tail;
use crate::types::LogId;
use crate::types::RawPhys;

/// What recovery found.
pub struct Recovered {
    /// The open segments (the last one holds `end`, or starts at it).
    pub segments: Segments,
    /// Every valid entry, in order.
    pub locations: Vec<EntryLocation>,
    /// Physical end of the valid log: the next append position.
    pub end: RawPhys,
    /// Physical start of the log (segment-aligned).
    pub start: RawPhys,
}

/// Why the scan stopped.
struct Stop {
    phys: RawPhys,
    reason: Option<String>,
}

/// What `meta/` says about the log, as recovery reads it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Persisted {
    /// The log's start (`None` for a fresh log).
    pub log_start: Option<RawPhys>,
    /// The durable flush checkpoint: data below it that does not scan is corruption.
    pub checkpoint: FlushCheckpoint,
    /// The last purged id: an index gap after purged entries is allowed.
    pub purged: Option<LogId>,
    /// Where the last clean close left the log's end (`Meta::clean_end`): when the scan stops
    /// exactly there, nothing of this life lies past it, so what follows (a reused segment's
    /// old bytes) is left as it is rather than zeroed or closed off.
    pub clean_end: Option<RawPhys>,
}

/// Opens the segments under `segments.dir()` and validates them against `persisted`.
/// `trusted`: raft index records below the durable flush checkpoint
/// ([`crate::raft_index::RaftIndex::trusted_prefix`]); when the scan reaches the first of them
/// and the headers of their last record and of their first record in each segment match the
/// CommitLog, they are taken instead of scanning their bytes (the full scan remains the
/// fallback), so open reads one header per segment and what lies past the checkpoint.
/// Free segments found in `dir` go to `recycler` (over `dir`).
pub fn recover(
    env: Arc<dyn Env>,
    dir: PathBuf,
    config: &LogConfig,
    persisted: Persisted,
    trusted: &[EntryLocation],
    recycler: Arc<Recycler>,
) -> LogResult<Recovered> {
    let Persisted {
        log_start,
        checkpoint,
        purged,
        clean_end,
    } = persisted;
    let mut segs = Segments::new(dir.clone(), env.clone(), config.segment_bytes, recycler);
    let (start, orphans) = open_segments(&mut segs, env.as_ref(), config, log_start)?;
    let mut locations = Vec::new();
    let stop = scan(&segs, start, purged, trusted, &mut locations)?;
    let seg_start = segs.start_of(stop.phys);
    let file = segs.path(seg_start);
    if stop.phys < checkpoint.phys_end {
        let reason = stop.reason.clone().unwrap_or_else(|| {
            format!(
                "log ends here but was flushed up to phys offset {}",
                checkpoint.phys_end
            )
        });
        if !config.repair_truncate_corruption {
            return Err(LogError::Corruption {
                file,
                offset: stop.phys - seg_start,
                reason,
            });
        }
        tracing::error!(phys_offset = stop.phys, file = %file.display(), reason = %reason, "flushed data is corrupt: truncating (repair-truncate-corruption)");
    } else if clean_end == Some(stop.phys) {
        tracing::debug!(phys_offset = stop.phys, reason = ?stop.reason, "log ends where the last clean close left it");
    } else if let Some(reason) = &stop.reason {
        tracing::warn!(phys_offset = stop.phys, file = %file.display(), reason = %reason, last_log_index = ?locations.last().map(|l: &EntryLocation| l.index), "torn tail after the flush checkpoint: truncating");
    }
    for o in orphans {
        tracing::warn!(
            phys_offset = o,
            "removing segment beyond a gap after the log end"
        );
        let p = segs.path(o);
        env.remove(&p)
            .map_err(|e| LogError::io("remove segment", p, e))?;
    }
    let written = (clean_end == Some(stop.phys)).then_some(stop.phys);
    let end = truncate_tail(&mut segs, stop.phys, written, None)?;
    tracing::info!(start_phys = start, end_phys = end, entries = locations.len(), last_log_index = ?locations.last().map(|l| l.index), "commitlog recovered");
    Ok(Recovered {
        segments: segs,
        locations,
        end,
        start,
    })
}

/// Lists, checks and opens the contiguous run of segment files from the log start; returns the
/// log start and the segments beyond a gap (not opened; removed once the scan shows they hold
/// nothing that was flushed).
fn open_segments(
    segs: &mut Segments,
    env: &dyn Env,
    config: &LogConfig,
    log_start: Option<RawPhys>,
) -> LogResult<(RawPhys, Vec<RawPhys>)> {
    let dir = segs.dir().to_path_buf();
    env.create_dir_all(&dir)
        .map_err(|e| LogError::io("create dir", &dir, e))?;
    let mut starts = Vec::new();
    for name in env.list(&dir).map_err(|e| LogError::io("list", &dir, e))? {
        // A `.deleted` segment was out of the log but pinned at a crash (or is still mapped
        // by a pin of this process, across an install's reload): unlinking is safe for a
        // mapping, shrinking is not.
        if name.ends_with(".tmp") || name.ends_with(DELETED_SUFFIX) {
            let p = dir.join(&name);
            env.remove(&p)
                .map_err(|e| LogError::io("remove tmp", p, e))?;
        } else if name.ends_with(FREE_SUFFIX) {
            segs.recycler().adopt(&name)?;
        } else if let Some(s) = parse_segment_name(&name) {
            starts.push(s);
        }
    }
    starts.sort_unstable();
    let seg_bytes = config.segment_bytes;
    let start = log_start.or(starts.first().copied()).unwrap_or(0);
    let mut orphans = Vec::new();
    for s in starts.iter().copied() {
        let path = segs.path(s);
        if s >= start && s != start + segs.starts().len() as u64 * seg_bytes {
            orphans.push(s);
            continue;
        }
        if s % seg_bytes != 0 {
            return Err(LogError::InvalidArgument(format!(
                "segment {} is not aligned to segment-bytes {seg_bytes}",
                path.display()
            )));
        }
        if s < start {
            tracing::info!(phys_offset = s, "removing segment below the log start");
            env.remove(&path)
                .map_err(|e| LogError::io("remove segment", path, e))?;
            continue;
        }
        let f = env
            .open_segment(&path)
            .map_err(|e| LogError::io("open segment", &path, e))?;
        if f.capacity() != seg_bytes {
            return Err(LogError::InvalidArgument(format!(
                "segment {} has {} bytes but segment-bytes is {seg_bytes}",
                path.display(),
                f.capacity()
            )));
        }
        segs.insert(s, f);
    }
    if segs.starts().is_empty() {
        let path = segs.path(start);
        let f = env
            .create_segment(&path, seg_bytes)
            .map_err(|e| LogError::io("create segment", &path, e))?;
        segs.insert(start, f);
    }
    Ok((start, orphans))
}

fn read(seg: &dyn SegmentFile, off: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len];
    seg.read_at(off, &mut buf)
        .map_err(|e| format!("read failed: {e}"))?;
    Ok(buf)
}

/// Reads the header at `l.phys` and checks it is the entry record `l` names.
fn check_header(segs: &Segments, l: &EntryLocation) -> Result<RecordHeader, String> {
    let seg_start = segs.start_of(l.phys);
    let seg = segs
        .get(seg_start)
        .ok_or_else(|| format!("no segment holds phys offset {}", l.phys))?;
    let off = l.phys - seg_start;
    let hb = read(seg.as_ref(), off, ENTRY_HEADER_LEN)?;
    let h = match decode_header(&hb, l.phys, segs.segment_bytes() - off)? {
        HeaderSlot::Record(h) if h.kind != RecordKind::Padding => h,
        _ => return Err(format!("no entry record at phys offset {}", l.phys)),
    };
    if (h.index, h.term, h.total_len) != (l.index, l.term, l.size) {
        return Err(format!(
            "entry {} differs at phys offset {}",
            l.index, l.phys
        ));
    }
    Ok(h)
}

/// Checks the trusted records against the CommitLog: the header of the first record in
/// each segment and of the last record match (one header read per segment, so a segment
/// lost or replaced whole is seen at open), and the first follows `prev`. `Ok(false)`: they
/// follow a purge gap.
fn check_trusted(
    segs: &Segments,
    trusted: &[EntryLocation],
    prev: Option<&EntryLocation>,
    purged: Option<LogId>,
) -> Result<bool, String> {
    let (Some(first), Some(last)) = (trusted.first(), trusted.last()) else {
        return Err("no records".into());
    };
    let first_header = check_header(segs, first)?;
    let mut seg = segs.start_of(first.phys);
    for l in &trusted[1..] {
        if segs.start_of(l.phys) != seg {
            seg = segs.start_of(l.phys);
            check_header(segs, l)?;
        }
    }
    check_header(segs, last)?;
    follows(prev, &first_header, purged)
}

/// Walks records from `start`; collects entries into `out`; returns where and why it stopped.
/// Where it reaches the first of `trusted` (see [`recover`]), takes them and jumps past them.
fn scan(
    segs: &Segments,
    start: RawPhys,
    purged: Option<LogId>,
    trusted: &[EntryLocation],
    out: &mut Vec<EntryLocation>,
) -> LogResult<Stop> {
    let seg_bytes = segs.segment_bytes();
    let mut pos = start;
    let mut trusted = Some(trusted).filter(|t| !t.is_empty());
    loop {
        if let Some(t) = trusted.take_if(|t| t[0].phys == pos) {
            match check_trusted(segs, t, out.last(), purged) {
                Ok(contiguous) => {
                    if !contiguous {
                        out.clear();
                    }
                    out.extend_from_slice(t);
                    pos = t[t.len() - 1].end();
                    continue;
                }
                Err(r) => {
                    tracing::warn!(phys_offset = pos, reason = %r, "raft index does not match the commitlog: scanning");
                }
            }
        }
        let seg_start = segs.start_of(pos);
        let Some(seg) = segs.get(seg_start) else {
            return Ok(Stop {
                phys: pos,
                reason: None,
            });
        };
        let off = pos - seg_start;
        let room = seg_bytes - off;
        if room < ENTRY_HEADER_LEN as u64 {
            pos = seg_start + seg_bytes;
            continue;
        }
        let stop = |reason: String| {
            Ok(Stop {
                phys: pos,
                reason: Some(reason),
            })
        };
        let hb = match read(seg.as_ref(), off, ENTRY_HEADER_LEN) {
            Ok(b) => b,
            Err(r) => return stop(r),
        };
        let h = match decode_header(&hb, pos, room) {
            Ok(HeaderSlot::End) => {
                return Ok(Stop {
                    phys: pos,
                    reason: None,
                })
            }
            Ok(HeaderSlot::Record(h)) => h,
            Err(r) => return stop(r),
        };
        if h.kind == RecordKind::Padding {
            pos = seg_start + seg_bytes;
            continue;
        }
        let payload = match read(
            seg.as_ref(),
            off + ENTRY_HEADER_LEN as u64,
            h.payload_len as usize,
        ) {
            Ok(b) => b,
            Err(r) => return stop(r),
        };
        if let Err(r) = check_payload(&h, &payload) {
            return stop(r);
        }
        match follows(out.last(), &h, purged) {
            Ok(true) => {}
            Ok(false) => out.clear(),
            Err(r) => return stop(r),
        }
        out.push(EntryLocation {
            index: h.index,
            phys: pos,
            size: h.total_len,
            term: h.term,
        });
        pos += h.total_len as u64;
    }
}

/// Whether the record `h` may follow `prev`: `Ok(true)` contiguous, `Ok(false)` an index gap
/// allowed because every earlier entry is purged (the earlier ones are then dropped from the
/// index), `Err` a broken log.
fn follows(
    prev: Option<&EntryLocation>,
    h: &RecordHeader,
    purged: Option<LogId>,
) -> Result<bool, String> {
    let Some(prev) = prev else { return Ok(true) };
    if h.term < prev.term {
        return Err(format!(
            "term {} is below the previous term {}",
            h.term, prev.term
        ));
    }
    // Checked: an index of u64::MAX on disk has no successor.
    if prev.index.checked_add(1) == Some(h.index) {
        return Ok(true);
    }
    // Every missing index (prev.index + 1 ..= h.index - 1) must be purged. `h` itself may be
    // purged too: a purge can pass the first entry after the gap.
    let gap_ok = purged.is_some_and(|p| h.index > prev.index && h.index - 1 <= p.index);
    if gap_ok {
        Ok(false)
    } else {
        Err(format!("index {} does not follow {}", h.index, prev.index))
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
