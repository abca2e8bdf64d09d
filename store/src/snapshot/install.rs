//! Installing a snapshot file (see [`super::format`] and the module docs), and finishing at
//! open an install a crash interrupted ([`resume`]).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::consume_queue::CqUnit;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::message::MessageView;
use crate::paths::incoming_dir;
use crate::paths::pending_path;
use crate::paths::snapshots_dir;
use crate::paths::staged_dir;
use crate::snapshot::dir::next_path;
use crate::snapshot::dir::remove_others;
use crate::snapshot::file::SnapshotFile;
use crate::snapshot::format::Layout;
use crate::snapshot::format::Manifest;
use crate::snapshot::format::SnapshotBytes;
use crate::snapshot::intent::InstallIntent;
use crate::snapshot::verify::read_segment_checked;
use crate::snapshot::verify::verify;
use crate::snapshot::verify::Verified;
use crate::state::Checkpoint;
use crate::state::DispatchState;
use crate::state::InstallStop;
use crate::state::Shared;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use raftmq_raft_log::types::LogId;

/// Bytes copied at a time.
const CHUNK: u64 = 4 << 20;

fn corrupt(f: &SnapshotFile, offset: u64, reason: impl Into<String>) -> StoreError {
    StoreError::corruption(f.path().display().to_string(), offset, reason)
}

/// Writes the snapshot's segments (their bytes start at `pos`) as full-size, allocated
/// (`posix_fallocate`, so a full disk fails here rather than on a later write into a hole),
/// fsynced files under `staged`. Memory stays bounded by one chunk.
fn stage_segments(f: &SnapshotFile, m: &Manifest, mut pos: u64, staged: &Path) -> Result<()> {
    if staged.exists() {
        std::fs::remove_dir_all(staged).map_err(|e| StoreError::io("remove dir", staged, e))?;
    }
    std::fs::create_dir_all(staged).map_err(|e| StoreError::io("create dir", staged, e))?;
    for s in &m.segments {
        let path = staged.join(format!("{:020}", s.start));
        let out = File::create(&path).map_err(|e| StoreError::io("create", &path, e))?;
        let len = i64::try_from(m.segment_bytes)
            .map_err(|_| corrupt(f, 0, "segment size does not fit an off_t"))?;
        // SAFETY: a valid open fd; the call only allocates blocks.
        let rc = unsafe { libc::posix_fallocate(out.as_raw_fd(), 0, len) };
        if rc == libc::ENOSPC {
            return Err(StoreError::DiskFull {
                reason: format!("no room for snapshot segment {}", path.display()),
            });
        }
        if rc != 0 {
            let e = std::io::Error::from_raw_os_error(rc);
            return Err(StoreError::io("fallocate", &path, e));
        }
        read_segment_checked(f, s, pos, |off, bytes| {
            out.write_all_at(bytes, off)
                .map_err(|e| StoreError::io("write", &path, e))
        })?;
        pos += s.len;
        out.sync_all()
            .map_err(|e| StoreError::io("fsync", &path, e))?;
    }
    sync_dir(staged)
}

/// Rewrites every ConsumeQueue from the snapshot's units and rebuilds the index from the
/// records they point at.
fn reset_dispatch(
    shared: &Shared,
    st: &mut DispatchState,
    f: &SnapshotFile,
    m: &Manifest,
    l: &Layout,
) -> Result<()> {
    let topics: Vec<String> = st.cqs.iter().map(|q| q.topic().to_owned()).collect();
    for t in topics {
        st.cqs.remove_topic(&t)?;
    }
    st.index.truncate_phys_beyond(PhysOffset::ZERO)?;
    let mut pos = l.units_at;
    let mut all: Vec<(PhysOffset, u32)> = Vec::new();
    for qm in &m.queues {
        let cq = st.cqs.get_or_create(&qm.topic, qm.queue_id)?;
        cq.reset_to(qm.min_offset)?;
        let n = qm.min_offset.count_to(qm.max_offset);
        let bytes = f.read_range(pos, n * CQ_UNIT_LEN as u64)?;
        for (i, chunk) in bytes.chunks_exact(CQ_UNIT_LEN).enumerate() {
            let u = CqUnit::decode(chunk)
                .ok_or_else(|| corrupt(f, pos + (i * CQ_UNIT_LEN) as u64, "bad unit"))?;
            cq.put(qm.min_offset.advance(i as u64), u)?;
            all.push((u.phys_offset, u.size));
        }
        pos += n * CQ_UNIT_LEN as u64;
    }
    all.sort_unstable();
    for (phys, size) in all {
        let rec = match shared.log.read_at(phys, size) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(phys_offset = phys.get(), error = %e, "record not in the local log; not indexed");
                continue;
            }
        };
        let view = MessageView::parse(&rec).map_err(|e| e.locate("commitlog", phys.get()))?;
        for key in &view.keys {
            st.index.put(key, phys, view.store_timestamp_ms)?;
        }
    }
    Ok(())
}

/// Writes the first `len` bytes of `file` to `path` through a temp file (fsync, rename); the
/// caller fsyncs the directory.
fn copy_prefix(file: &SnapshotFile, len: u64, path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let out = File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    let mut pos = 0;
    while pos < len {
        let n = CHUNK.min(len - pos);
        out.write_all_at(&file.read_range(pos, n)?, pos)
            .map_err(|e| StoreError::io("write", &tmp, e))?;
        pos += n;
    }
    out.sync_all()
        .map_err(|e| StoreError::io("fsync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io("rename", path, e))
}

/// Publishes the first `prefix` bytes of `file` as the current snapshot (its segments are
/// served from the log from now on): a received file is cut to its prefix, fsynced, then
/// renamed into place; a local one is copied through a temp file. The file is complete
/// before it has its name, and never changes after.
fn keep_prefix(shared: &Shared, file: &SnapshotFile, m: &Manifest, prefix: u64) -> Result<()> {
    let dir = snapshots_dir(&shared.data_dir);
    std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create dir", &dir, e))?;
    let _files = shared.snapshot_files.lock();
    let path = next_path(&dir, m.last_log_id)?;
    let incoming = incoming_dir(&dir);
    if file.path().parent() == Some(incoming.as_path()) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(file.path())
            .map_err(|e| StoreError::io("open", file.path(), e))?;
        f.set_len(prefix)
            .and_then(|()| f.sync_all())
            .map_err(|e| StoreError::io("truncate", file.path(), e))?;
        std::fs::rename(file.path(), &path).map_err(|e| StoreError::io("rename", &path, e))?;
    } else {
        copy_prefix(file, prefix, &path)?;
    }
    sync_dir(&dir)?;
    remove_others(&dir, &path)
}

fn stop_here(shared: &Shared, at: InstallStop) -> Result<()> {
    if *shared.install_stop.lock() == Some(at) {
        return Err(StoreError::invalid(format!(
            "test hook: install stopped {at:?}"
        )));
    }
    Ok(())
}

/// Installs `file` as the state at `last_log_id`. The whole snapshot is verified first
/// (see [`super::verify`]), so a bad one changes nothing. When the log must be replaced, the
/// install intent (see [`super::intent`]) is durable before the swap and removed only after
/// the checkpoint and the published snapshot are: a crash in between is finished at open.
pub(crate) fn install(
    shared: &Shared,
    last_log_id: Option<LogId>,
    file: SnapshotFile,
) -> Result<()> {
    // The old state's background checkpoint ends before the log changes under it.
    shared.settle_checkpoint(&mut shared.state.write(), true);
    let segment_bytes = shared.log.config().segment_bytes;
    let Verified {
        manifest: m,
        layout,
    } = verify(&file, last_log_id, segment_bytes)?;
    let log_has_last = m.last_log_id.is_none_or(|l| {
        shared
            .log
            .entry_location(LogIndex::of(&l))
            .is_some_and(|loc| loc.term == l.leader_id.term)
    });
    // Resumed at open (see [`resume`]): the intent is already recorded.
    let mut intent = file.path() == pending_path(&shared.data_dir);
    let mut file = file;
    if let (false, Some(last), Some(end), false) = (
        log_has_last,
        m.last_log_id,
        m.log_end_phys,
        m.segments.is_empty(),
    ) {
        let record = InstallIntent {
            last_log_id: m.last_log_id,
        };
        file = record.record(&shared.data_dir, file, |f, to| copy_prefix(f, f.len(), to))?;
        intent = true;
        stop_here(shared, InstallStop::AfterIntent)?;
        let staged = staged_dir(&snapshots_dir(&shared.data_dir));
        stage_segments(&file, &m, layout.segments_at, &staged)?;
        shared.log.replace_from_files(&staged, last, end)?;
        stop_here(shared, InstallStop::AfterLogSwap)?;
    }
    let mut st = shared.state.write();
    reset_dispatch(shared, &mut st, &file, &m, &layout)?;
    st.load_checkpoint(Checkpoint {
        last_applied: m.last_log_id,
        membership: m.membership.clone(),
        topics: m.topics.clone(),
        offsets: m.offsets.clone(),
        receive: m.receive.clone(),
        dedup: m.dedup.clone(),
        users: m.users.clone(),
        dispatched_phys_end: m.dispatched_phys_end,
    });
    shared.checkpoint_locked(&mut st)?;
    debug_assert!(st.validate().is_ok(), "{:?}", st.validate());
    stop_here(shared, InstallStop::AfterCheckpoint)?;
    // Still under the state lock: retention cannot trim the old snapshot in between.
    keep_prefix(shared, &file, &m, layout.segments_at)?;
    drop(st);
    drop(file);
    if intent {
        InstallIntent::clear(&shared.data_dir)?;
    }
    tracing::info!(last_log_id = ?m.last_log_id, queues = m.queues.len(),
        segments = m.segments.len(), "snapshot installed");
    Ok(())
}

/// At open, before openraft sees the store: finishes an install a crash interrupted (see
/// [`super::intent`]), or removes a pending file whose install never swapped the log.
pub(crate) fn resume(shared: &Shared) -> Result<()> {
    let Some(intent) = InstallIntent::load(&shared.data_dir)? else {
        return InstallIntent::clear(&shared.data_dir);
    };
    tracing::warn!(last_log_id = ?intent.last_log_id,
        "snapshot install interrupted by a crash: installing it again");
    let pending = pending_path(&shared.data_dir);
    let file = SnapshotFile::open(&pending).map_err(|e| StoreError::io("open", &pending, e))?;
    install(shared, intent.last_log_id, file)
}
