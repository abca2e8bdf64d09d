//! Building a snapshot file from the current state (see [`super::format`]).

use std::fs::File;
use std::io::BufWriter;
use std::io::Write;
use std::path::Path;

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::paths::snapshots_dir;
use crate::snapshot::current::current;
use crate::snapshot::dir::next_path;
use crate::snapshot::dir::remove_others;
use crate::snapshot::file::read_manifest;
use crate::snapshot::file::Snapshot;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::file::SnapshotMeta;
use crate::snapshot::format::encode_header;
use crate::snapshot::format::encode_manifest;
use crate::snapshot::format::Manifest;
use crate::snapshot::format::QueueManifest;
use crate::snapshot::format::SegmentManifest;
use crate::snapshot::format::PREFIX_CRC_LEN;
use crate::snapshot::format::SNAPSHOT_HEADER_LEN;
use crate::state::DispatchState;
use crate::state::Shared;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use raftmq_raft_log::PinnedRange;

/// Log bytes are read in pieces of at most this size.
const CHUNK_BYTES: u64 = 4 << 20;
/// Units are copied in pieces of at most this many.
const CHUNK_UNITS: usize = 1 << 16;

/// A writer that keeps the CRC of everything written.
struct CrcWriter {
    out: BufWriter<File>,
    crc: crc32fast::Hasher,
}

impl CrcWriter {
    fn write(&mut self, path: &Path, b: &[u8]) -> Result<()> {
        self.crc.update(b);
        self.out
            .write_all(b)
            .map_err(|e| StoreError::io("write", path, e))
    }
}

fn manifest(shared: &Shared, st: &DispatchState) -> Manifest {
    let log = &shared.log;
    let last = st.last_applied;
    let log_end_phys = last.and_then(|l| {
        log.entry_location(LogIndex::of(&l))
            .filter(|loc| loc.term == l.leader_id.term)
            .map(|loc| loc.phys_end())
    });
    let segment_bytes = log.config().segment_bytes;
    let min = log.watermarks().min_phys_offset;
    let mut segments = Vec::new();
    if let Some(end) = log_end_phys {
        let mut start = min;
        while start < end {
            segments.push(SegmentManifest {
                start,
                len: segment_bytes.min(start.bytes_to(end)),
                crc: 0,
            });
            start = start.advance(segment_bytes);
        }
    }
    let queues = st
        .cqs
        .iter()
        .map(|q| QueueManifest {
            topic: q.topic().to_owned(),
            queue_id: q.queue_id(),
            min_offset: q.min_offset(),
            max_offset: q.max_offset(),
        })
        .collect();
    Manifest {
        last_log_id: last,
        membership: st.membership.clone(),
        topics: st.topics.clone(),
        offsets: st.offsets.clone(),
        receive: st.receive.clone(),
        dedup: st.dedup.clone(),
        users: st.users.clone(),
        dispatched_phys_end: st.dispatched_phys_end,
        log_end_phys,
        segment_bytes,
        queues,
        segments,
    }
}

fn write_units(w: &mut CrcWriter, path: &Path, st: &DispatchState, m: &Manifest) -> Result<()> {
    for qm in &m.queues {
        let q = st
            .cqs
            .get(&qm.topic, qm.queue_id)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("consume queue {}/{}", qm.topic, qm.queue_id),
            })?;
        // Exactly the units the manifest names: the live queue may hold more by now.
        let mut o = qm.min_offset;
        while o < qm.max_offset {
            let want = o.count_to(qm.max_offset).min(CHUNK_UNITS as u64) as usize;
            let units: Vec<CqUnit> = q.read(o, want)?;
            if units.is_empty() {
                return Err(StoreError::invalid(format!(
                    "consume queue {}/{} has no unit at {o} for the snapshot",
                    qm.topic, qm.queue_id
                )));
            }
            for u in &units {
                w.write(path, &u.encode())?;
            }
            o = o.advance(units.len() as u64);
        }
    }
    Ok(())
}

/// CRC32 of the log bytes `[start, start + len)` (one segment), cached per `(start, len)`.
fn segment_crc(shared: &Shared, pinned: &PinnedRange, start: PhysOffset, len: u64) -> Result<u32> {
    if let Some(c) = shared.segment_crcs.lock().get(&(start, len)) {
        return Ok(*c);
    }
    let mut h = crc32fast::Hasher::new();
    let mut pos = start;
    let end = start.advance(len);
    while pos < end {
        let n = CHUNK_BYTES.min(pos.bytes_to(end));
        h.update(&pinned.read_at(pos, n as u32)?);
        pos = pos.advance(n);
    }
    let crc = h.finalize();
    let mut cache = shared.segment_crcs.lock();
    cache.retain(|(s, _), _| *s != start);
    cache.insert((start, len), crc);
    Ok(crc)
}

/// Writes the prefix of a snapshot described by `m` (units read from `st`) as a new file
/// and makes it the current snapshot; returns it, opened. Snapshot files are never rewritten.
fn write_prefix(shared: &Shared, m: &Manifest, st: &DispatchState) -> Result<SnapshotFile> {
    let dir = snapshots_dir(&shared.data_dir);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create dir", &dir, e))?;
    let _files = shared.snapshot_files.lock();
    let path = next_path(&dir, m.last_log_id)?;
    let tmp = path.with_extension("tmp");
    let f = File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    let mut w = CrcWriter {
        out: BufWriter::with_capacity(1 << 20, f),
        crc: crc32fast::Hasher::new(),
    };
    let mbytes = encode_manifest(m)?;
    w.write(&tmp, &encode_header(mbytes.len() as u64))?;
    w.write(&tmp, &mbytes)?;
    write_units(&mut w, &tmp, st, m)?;
    let crc = w.crc.clone().finalize();
    w.out
        .write_all(&crc.to_le_bytes())
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    let f = w
        .out
        .into_inner()
        .map_err(|e| StoreError::io("flush", &tmp, e.into_error()))?;
    f.sync_all().map_err(|e| StoreError::io("fsync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &path, e))?;
    sync_dir(&dir)?;
    remove_others(&dir, &path)?;
    let file = SnapshotFile::open(&path).map_err(|e| StoreError::io("open", &path, e))?;
    debug_assert_eq!(
        file.len(),
        SNAPSHOT_HEADER_LEN + mbytes.len() as u64 + m.units_bytes() + PREFIX_CRC_LEN,
        "the prefix holds exactly the units its manifest names"
    );
    Ok(file)
}

/// Drops from `m` what lies below `min_phys` (retention moved the log start there): the
/// segments below it and the units pointing below it.
fn fit_to_log_start(m: &mut Manifest, st: &DispatchState, min_phys: PhysOffset) {
    m.segments.retain(|s| s.start >= min_phys);
    m.queues
        .retain_mut(|qm| match st.cqs.get(&qm.topic, qm.queue_id) {
            Some(q) if qm.max_offset <= q.max_offset() => {
                let first = q.first_offset_at_or_after_phys(min_phys);
                qm.min_offset = qm.min_offset.max(first).min(qm.max_offset);
                true
            }
            _ => false,
        });
}

/// Builds a snapshot of the applied state and makes it the current one. Cost: the
/// ConsumeQueue units (the segments are served from the log when the snapshot is read).
pub(crate) fn build(shared: &Shared) -> Result<Snapshot> {
    // The manifest and the pin under one lock: retention cannot delete in between.
    let (mut m, pinned) = {
        let st = shared.state.read();
        let m = manifest(shared, &st);
        let pinned = match (m.segments.first(), m.segments.last()) {
            (Some(f), Some(l)) => Some(shared.log.pin_range(f.start, l.end())?),
            _ => None,
        };
        (m, pinned)
    };
    // Segment CRCs outside the lock, from the pinned bytes; full segments are cached.
    if let Some(p) = &pinned {
        for s in &mut m.segments {
            s.crc = segment_crc(shared, p, s.start, s.len)?;
        }
    }
    let st = shared.state.read();
    // Retention may have run meanwhile: the stored snapshot must not name deleted segments.
    fit_to_log_start(&mut m, &st, shared.log.watermarks().min_phys_offset);
    let file = write_prefix(shared, &m, &st)?;
    drop(st);
    let file = match pinned {
        Some(p) if !m.segments.is_empty() => file.with_tail(p, m.segments.clone()),
        _ => file,
    };
    tracing::info!(last_log_id = ?m.last_log_id, bytes = file.len(), segments = m.segments.len(),
        queues = m.queues.len(), "snapshot built");
    Ok(Snapshot {
        meta: SnapshotMeta {
            last_log_id: m.last_log_id,
            last_membership: m.membership,
        },
        snapshot: file,
    })
}

/// Retention is about to move the log start to `new_min`: writes a new current snapshot (same
/// last log id) without the segments below it and the units pointing into them, so the stored
/// snapshot stays sendable once they are gone. Called before the segments are deleted; a
/// snapshot already opened (being sent) keeps its own file and pinned segments.
pub(crate) fn trim_current(shared: &Shared, st: &DispatchState, new_min: PhysOffset) -> Result<()> {
    let Some(cur) = current(shared)? else {
        return Ok(());
    };
    let mut m = read_manifest(&cur.snapshot)?;
    drop(cur);
    if m.segments.first().is_none_or(|s| s.start >= new_min) {
        return Ok(());
    }
    fit_to_log_start(&mut m, st, new_min);
    write_prefix(shared, &m, st)?;
    tracing::info!(last_log_id = ?m.last_log_id, phys_offset = new_min.get(), "snapshot trimmed for retention");
    Ok(())
}
