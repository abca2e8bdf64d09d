//! Building a snapshot file from the current state (see [`super::format`]).

use std::fs::File;
use std::io::BufWriter;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::sm::machine::Snapshot;
use crate::sm::machine::SnapshotMeta;
use crate::sm::state::DispatchState;
use crate::snapshot::format::Manifest;
use crate::snapshot::format::QueueManifest;
use crate::snapshot::format::SegmentManifest;
use crate::snapshot::format::SNAPSHOT_MAGIC;
use crate::snapshot::remove_others;
use crate::snapshot::snapshot_name;
use crate::snapshot::snapshots_dir;
use crate::snapshot::SnapshotFile;
use crate::store::Shared;
use crate::types::PhysOffset;

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
        log.entry_location(l.index)
            .filter(|loc| loc.term == l.leader_id.term)
            .map(|loc| loc.end())
    });
    let segment_bytes = log.config().segment_bytes;
    let min = log.watermarks().min_phys_offset;
    let mut segments = Vec::new();
    if let Some(end) = log_end_phys {
        let mut start = min;
        while start < end {
            segments.push(SegmentManifest {
                start,
                len: segment_bytes.min(end - start),
                crc: 0,
            });
            start += segment_bytes;
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
        let mut o = qm.min_offset;
        while o < qm.max_offset {
            let units: Vec<CqUnit> = q.read(o, CHUNK_UNITS)?;
            for u in &units {
                w.write(path, &u.encode())?;
            }
            o += units.len() as u64;
        }
    }
    Ok(())
}

/// CRC32 of the log bytes `[start, start + len)` (one segment), cached per `(start, len)`.
fn segment_crc(shared: &Shared, start: PhysOffset, len: u64) -> Result<u32> {
    if let Some(c) = shared.segment_crcs.lock().get(&(start, len)) {
        return Ok(*c);
    }
    let mut h = crc32fast::Hasher::new();
    let mut pos = start;
    while pos < start + len {
        let n = CHUNK_BYTES.min(start + len - pos);
        h.update(&shared.log.read_at(pos, n as u32)?);
        pos += n;
    }
    let crc = h.finalize();
    let mut cache = shared.segment_crcs.lock();
    cache.retain(|(s, _), _| *s != start);
    cache.insert((start, len), crc);
    Ok(crc)
}

/// Writes the prefix of a snapshot described by `m` (units read from `st`) as the current
/// snapshot file; returns its path.
fn write_prefix(dir: &Path, m: &Manifest, st: &DispatchState) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    let path = dir.join(snapshot_name(m.last_log_id));
    let tmp = path.with_extension("tmp");
    let f = File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    let mut w = CrcWriter {
        out: BufWriter::with_capacity(1 << 20, f),
        crc: crc32fast::Hasher::new(),
    };
    let mbytes = serde_json::to_vec(m)
        .map_err(|e| StoreError::invalid(format!("snapshot manifest does not serialize: {e}")))?;
    w.write(&tmp, &SNAPSHOT_MAGIC)?;
    w.write(&tmp, &(mbytes.len() as u64).to_le_bytes())?;
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
    std::fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &path, e))?;
    sync_dir(dir)?;
    remove_others(dir, &path)?;
    Ok(path)
}

/// Builds a snapshot of the applied state and makes it the current one. Cost: the
/// ConsumeQueue units (the segments are served from the log when the snapshot is read).
pub(crate) fn build(shared: &Shared) -> Result<Snapshot> {
    let dir = snapshots_dir(&shared.data_dir);
    let mut m = manifest(shared, &shared.state.read());
    // Segment CRCs outside the lock (committed bytes never change); full segments are cached.
    for s in &mut m.segments {
        s.crc = segment_crc(shared, s.start, s.len)?;
    }
    let st = shared.state.read();
    let path = write_prefix(&dir, &m, &st)?;
    drop(st);
    let file = SnapshotFile::with_log(&path, shared.log.clone(), m.segments.clone())
        .map_err(|e| StoreError::io("open", &path, e))?;
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

/// Retention moved the log start to `new_min`: rewrites the current snapshot (same last log
/// id) without the deleted segments and the units pointing into them, so it stays sendable.
pub(crate) fn trim_current(shared: &Shared, st: &DispatchState, new_min: PhysOffset) -> Result<()> {
    let Some(cur) = crate::snapshot::current(shared)? else {
        return Ok(());
    };
    let old = crate::snapshot::read_manifest(&cur.snapshot)?;
    if old.segments.first().is_none_or(|s| s.start >= new_min) {
        return Ok(());
    }
    let mut m = old;
    m.segments.retain(|s| s.start >= new_min);
    m.queues
        .retain_mut(|qm| match st.cqs.get(&qm.topic, qm.queue_id) {
            Some(q) => {
                qm.min_offset = qm.min_offset.max(q.min_offset()).min(qm.max_offset);
                qm.max_offset <= q.max_offset()
            }
            None => false,
        });
    write_prefix(&snapshots_dir(&shared.data_dir), &m, st)?;
    tracing::info!(last_log_id = ?m.last_log_id, phys_offset = new_min, "snapshot trimmed after retention");
    Ok(())
}
