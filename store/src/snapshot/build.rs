//! Building a snapshot file from the current state (see [`super::format`]).

use std::fs::File;
use std::io::BufWriter;
use std::io::Write;
use std::path::Path;

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

/// Units and log bytes are copied in pieces of at most this size.
const CHUNK_BYTES: u64 = 4 << 20;
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

/// Builds a snapshot of the applied state and makes it the current one.
pub(crate) fn build(shared: &Shared) -> Result<Snapshot> {
    let dir = snapshots_dir(&shared.data_dir);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create dir", &dir, e))?;
    let st = shared.state.read();
    let m = manifest(shared, &st);
    let path = dir.join(snapshot_name(m.last_log_id));
    let tmp = path.with_extension("tmp");
    let f = File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    let mut w = CrcWriter {
        out: BufWriter::with_capacity(1 << 20, f),
        crc: crc32fast::Hasher::new(),
    };
    let mbytes = serde_json::to_vec(&m)
        .map_err(|e| StoreError::invalid(format!("snapshot manifest does not serialize: {e}")))?;
    w.write(&tmp, &SNAPSHOT_MAGIC)?;
    w.write(&tmp, &(mbytes.len() as u64).to_le_bytes())?;
    w.write(&tmp, &mbytes)?;
    write_units(&mut w, &tmp, &st, &m)?;
    drop(st);
    // Entries up to the last applied one are committed: their bytes never change.
    for s in &m.segments {
        let mut pos = s.start;
        while pos < s.start + s.len {
            let n = CHUNK_BYTES.min(s.start + s.len - pos);
            let bytes = shared.log.read_at(pos, n as u32)?;
            w.write(&tmp, &bytes)?;
            pos += n;
        }
    }
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
    sync_dir(&dir)?;
    remove_others(&dir, &path)?;
    let file = SnapshotFile::open(&path).map_err(|e| StoreError::io("open", &path, e))?;
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
