//! [`Trimmer`]: cutting the log at either end. At the tail: `truncate_after` removes an
//! uncommitted suffix (checkpoint lowered first, bytes zeroed and synced, also back across a
//! roll this process made; a segment it cannot vouch for is closed with a padding record
//! instead; later segments removed). At the head: `purge` (logical, persisted) and
//! `detach_below` (retention: new log start persisted, segments taken out under the lock,
//! deleted later by the caller).

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::LogError;
use crate::error::LogResult;
use crate::flusher::Flusher;
use crate::segments::Detached;
use crate::shared::Shared;
use crate::state::State;
use crate::tail::truncate_tail;
use crate::types::LogId;
use crate::types::RawIndex;
use crate::types::RawPhys;

/// Truncation, purge and segment detaching over the shared state.
pub struct Trimmer {
    shared: Arc<Shared>,
    /// Truncation and detaching run between flush cycles.
    flusher: Arc<Flusher>,
    /// The `raft-index` directory (named in errors).
    index_dir: PathBuf,
}

impl Trimmer {
    /// A trimmer over `shared`, serialized with `flusher`'s cycles.
    pub fn new(shared: Arc<Shared>, flusher: Arc<Flusher>, index_dir: PathBuf) -> Self {
        Trimmer {
            shared,
            flusher,
            index_dir,
        }
    }

    /// Removes every entry after `last` (all entries for `None`). Refuses to remove an entry
    /// at or below the persisted committed id. Pending appends are flushed first; the removed
    /// bytes are zeroed (or, past a roll into a segment this process did not roll out of,
    /// covered by a padding record: `tail.rs`) and synced before this returns.
    pub fn truncate_after(&self, last: Option<LogId>) -> LogResult<()> {
        let _cycle = self.flusher.lock_cycle();
        self.flusher.flush_locked()?;
        let mut st = self.shared.state.lock();
        st.check_writable()?;
        let keep = last.map(|l| l.index);
        if let Some(c) = st.committed {
            if keep.is_none_or(|k| k < c.index) {
                return Err(LogError::TruncateCommitted {
                    requested: keep,
                    committed: c.index,
                });
            }
        }
        let new_end = match (st.index.last(), keep) {
            (None, _) => return Ok(()),
            (Some(l), Some(k)) if l.index <= k => return Ok(()),
            (Some(_), Some(k)) => st.index.get(k).map_or_else(
                || st.index.first().map_or(st.append_pos, |f| f.phys),
                |l| l.end(),
            ),
            (Some(_), None) => st.index.first().map_or(st.append_pos, |f| f.phys),
        };
        tracing::info!(last_log_index = ?keep, from_phys = new_end, to_phys = st.append_pos, "truncating log tail");
        let r = self.truncate_state(&mut st, keep, new_end);
        st.debug_validate();
        drop(st);
        r.map_err(|e| self.shared.fail(e))
    }

    /// Logically purges every entry up to `upto` (persisted before returning). The bytes stay
    /// readable through `LogStore::read_at` until their segment is detached.
    pub fn purge(&self, upto: LogId) -> LogResult<()> {
        let mut st = self.shared.state.lock();
        if st.purged >= Some(upto) {
            return Ok(());
        }
        self.shared.meta.set_purged(&upto)?;
        st.purged = Some(upto);
        st.recent.forget_upto(upto.index);
        let end = match st.index.last() {
            Some(l) if l.index > upto.index => st.index.get(upto.index).map(|l| l.end()),
            _ => Some(st.append_pos),
        };
        st.purged_phys_end = end.unwrap_or(st.purged_phys_end).max(st.purged_phys_end);
        tracing::debug!(
            log_index = upto.index,
            phys_offset = st.purged_phys_end,
            "purged"
        );
        st.debug_validate();
        Ok(())
    }

    /// The first half of `LogStore::delete_segments_below`: moves the log start (persisted)
    /// and takes the segments below it out of the log, under the log lock; the files go when
    /// the caller calls [`Detached::delete`], after releasing its own locks (unmapping and
    /// unlinking a 1 GiB segment takes long). Readers check the log start first; one still
    /// holding a segment keeps its mapping. A crash before the delete leaves files below the
    /// persisted log start, which the next open removes.
    pub fn detach_below(&self, phys: RawPhys) -> LogResult<(RawPhys, Detached)> {
        let _cycle = self.flusher.lock_cycle();
        let mut st = self.shared.state.lock();
        if phys > st.purged_phys_end {
            return Err(LogError::DeleteUnpurged {
                requested: phys,
                allowed: st.purged_phys_end,
            });
        }
        let new_start = st.segments.start_of(phys);
        if new_start <= st.min_phys {
            return Ok((st.min_phys, st.segments.detach_below(0)));
        }
        self.shared.meta.set_log_start(new_start)?;
        let detached = st.segments.detach_below(new_start);
        st.index.drop_below(new_start);
        st.rolled_ends.retain(|&s, _| s >= new_start);
        st.min_phys = new_start;
        st.flushed.phys_end = st.flushed.phys_end.max(new_start);
        st.debug_validate();
        tracing::info!(
            min_phys_offset = new_start,
            segments = detached.len(),
            "segments below the purge point detached"
        );
        Ok((new_start, detached))
    }

    fn truncate_state(
        &self,
        st: &mut State,
        keep: Option<RawIndex>,
        new_end: RawPhys,
    ) -> LogResult<()> {
        st.recent.truncate_after(keep);
        // Lower the checkpoint first, so a crash mid-way never reads the zeroed range as flushed.
        st.flushed.phys_end = st.flushed.phys_end.min(new_end);
        self.shared.durable.note_log_cut(keep);
        st.checkpoint_epoch += 1;
        // Cold reads (`cold_read.rs`) only below what stays flushed; the next drop lowers
        // the dropped end itself.
        st.cold_end = st.cold_end.min(new_end);
        st.flushed.log_id = keep
            .and_then(|k| st.index.get(k))
            .map(|l| LogId::new_term_index(l.term, l.index));
        // The checkpoint vouches for the index records below it.
        st.index
            .sync()
            .map_err(|e| LogError::io("fsync raft index", &self.index_dir, e))?;
        self.shared.meta.set_checkpoint(&st.flushed, true)?;
        st.index
            .truncate_after(keep)
            .map_err(|e| LogError::io("truncate raft index", &self.index_dir, e))?;
        // Everything up to the append position is flushed (above), so it is where this
        // life's bytes end.
        let seg_start = st.segments.start_of(new_end);
        let rolled_end = st.rolled_ends.get(&seg_start).copied();
        st.append_pos = truncate_tail(&mut st.segments, new_end, Some(st.append_pos), rolled_end)?;
        // Segments at and after the cut's are this process's to write again (or gone).
        st.rolled_ends.retain(|&s, _| s < seg_start);
        st.purged_phys_end = st.purged_phys_end.min(new_end);
        Ok(())
    }
}
