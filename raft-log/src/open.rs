//! Opening an existing (or empty) log: from the files under the log directory and the `meta/`
//! db to the in-memory [`State`]. Runs at open and again after a snapshot install swapped the
//! segments.

use std::path::Path;
use std::sync::Arc;

use crate::config::LogConfig;
use crate::env::Env;
use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::meta::Meta;
use crate::raft_index::RaftIndex;
use crate::recovery::recover;
use crate::recovery::Persisted;
use crate::recycle::Recycler;
use crate::state::State;
use crate::types::LogId;

/// Opens the log's state from disk: recovers the CommitLog (see [`recover`]; the raft index's
/// records below the flush checkpoint stand in for the bytes they cover), loads or rebuilds
/// the raft index, lowers a committed id past the recovered end (keeping the lost-commit
/// floor), and makes what survived past the flush checkpoint durable.
pub fn load_state(
    dir: &Path,
    config: &LogConfig,
    env: Arc<dyn Env>,
    meta: &Meta,
    recycler: Arc<Recycler>,
) -> LogResult<State> {
    let purged = meta.purged()?;
    let (checkpoint, index_synced) = meta.checkpoint()?;
    let index_dir = dir.join("raft-index");
    env.create_dir_all(&index_dir)
        .map_err(|e| LogError::io("create dir", &index_dir, e))?;
    let index_path = index_dir.join("index");
    let file = env
        .open_plain(&index_path)
        .map_err(|e| LogError::io("open raft index", &index_path, e))?;
    let index_bytes = file
        .read_all()
        .map_err(|e| LogError::io("read raft index", &index_path, e))?;
    // An older version's checkpoint does not vouch for the index: scan everything. Nor does
    // repair: the operator asked to find and cut corruption, which only a full scan sees.
    let trusted = if index_synced && !config.repair_truncate_corruption {
        RaftIndex::trusted_prefix(&index_bytes, checkpoint.phys_end, config.segment_bytes)
    } else {
        Vec::new()
    };
    let clean_end = meta.clean_end()?;
    let persisted = Persisted {
        log_start: meta.log_start()?,
        checkpoint,
        purged,
        clean_end,
    };
    let rec = recover(
        env.clone(),
        dir.join("commitlog"),
        config,
        persisted,
        &trusted,
        recycler,
    )?;
    if clean_end.is_some() {
        // Before anything is appended: a later open must look for a torn tail again.
        meta.set_clean_end(None)?;
    }
    drop(trusted);
    meta.set_log_start(rec.start)?;
    let (index, rebuilt) = RaftIndex::load(file, rec.locations, index_bytes)
        .map_err(|e| LogError::io("rebuild raft index", &index_path, e))?;
    if rebuilt {
        tracing::info!(path = %index_path.display(), "raft index rebuilt from the commitlog");
    }
    let last = index.last().copied();
    let purged_phys_end = match (purged, last) {
        (_, None) => rec.end,
        (Some(p), Some(l)) if p.index >= l.index => rec.end,
        (Some(p), Some(_)) => index.get(p.index).map_or(rec.start, |l| l.end()),
        (None, Some(_)) => rec.start,
    };
    let mut committed = meta.committed()?;
    let mut floor = meta.lost_commit_floor()?;
    let last_id = std::cmp::max(last.map(|l| LogId::new_term_index(l.term, l.index)), purged);
    if committed.is_some() && committed.map(|c| c.index) > last_id.map(|l| l.index) {
        tracing::error!(committed = ?committed, last_log_id = ?last_id, "committed entries were lost: the committed index lies past the recovered log end (they were not flushed); lowering it, and voting only for candidates that hold them until this node has them again");
        floor = std::cmp::max(floor, committed);
        // The floor first: it keeps what the lowered committed id forgets.
        meta.set_lost_commit_floor(&floor)?;
        committed = last_id;
        meta.set_committed(&committed)?;
    }
    if floor.is_some() && config.accept_lost_commits {
        tracing::warn!(lost_commit_floor = ?floor, "accept-lost-commits: forgetting the committed entries this node lost; it votes as plain Raft again");
        floor = None;
        meta.set_lost_commit_floor(&floor)?;
    }
    let unsynced_from = checkpoint.phys_end.clamp(rec.start, rec.end);
    let flushed = FlushCheckpoint {
        phys_end: unsynced_from,
        log_id: None,
    };
    let mut st = State {
        segments: rec.segments,
        index,
        append_pos: rec.end,
        min_phys: rec.start,
        purged,
        purged_phys_end,
        committed,
        vote: meta.vote()?,
        lost_commit_floor: floor,
        flushed,
        syncs: 0,
        checkpoint_epoch: 0,
        failed: None,
        closed: false,
        recent: Default::default(),
        cold_end: 0,
        rolled_ends: Default::default(),
    };
    // What survived past the checkpoint may sit only in the page cache: make it durable.
    for (seg, path, off, len) in st.dirty_ranges() {
        seg.sync_range(off, len)
            .map_err(|e| LogError::io("msync", path, e))?;
    }
    st.flushed = FlushCheckpoint {
        phys_end: rec.end,
        log_id: last_id,
    };
    st.index
        .sync()
        .map_err(|e| LogError::io("fsync raft index", &index_path, e))?;
    meta.set_checkpoint(&st.flushed, true)?;
    st.debug_validate();
    Ok(st)
}
