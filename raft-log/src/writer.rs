//! The write side of [`LogStore`]: append, truncate, purge, vote, committed id, retention.

use crate::config::FlushPolicy;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flusher::FlushCallback;
use crate::flusher::FlushWaiter;
use crate::format::encode_header;
use crate::format::encode_padding;
use crate::format::encode_payload;
use crate::format::RecordKind;
use crate::format::ENTRY_HEADER_LEN;
use crate::raft_index::EntryLocation;
use crate::recovery::truncate_tail;
use crate::segments::Detached;
use crate::state::State;
use crate::store::Inner;
use crate::store::LogStore;
use crate::types::LogEntry;
use crate::types::LogId;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::Vote;
use std::borrow::Cow;

struct Encoded<'a> {
    kind: RecordKind,
    payload: Cow<'a, [u8]>,
    term: u64,
    index: u64,
}

impl<C> LogStore<C> {
    /// Appends entries (readable when this returns). `on_durable` is called once they are
    /// durable under the node's flush policy (`sync`: after the flush covering them; `async`:
    /// at once), or with the error if flushing fails. Returns the physical end of the append.
    ///
    /// On error the callback is completed with the error as well.
    ///
    /// Entries must continue the log: index = last index + 1 (or any index above the purged
    /// id when every present entry is purged), terms non-decreasing.
    pub fn append_entries(
        &self,
        entries: Vec<LogEntry>,
        on_durable: FlushCallback,
    ) -> LogResult<PhysOffset> {
        let res = self.inner.append_locked(&entries);
        let end = match res {
            Ok(end) => end,
            Err(e) => {
                let e = match e {
                    e @ (LogError::Io { .. } | LogError::DiskFull { .. }) => self.inner.fail(e),
                    e => e,
                };
                // The callback is completed too, so no caller waits forever on it.
                on_durable(Err(std::io::Error::other(e.to_string())));
                return Err(e);
            }
        };
        match self.inner.config.flush {
            FlushPolicy::Sync => self.inner.flush.enqueue(FlushWaiter {
                end,
                callback: on_durable,
            }),
            FlushPolicy::Async => on_durable(Ok(())),
        }
        Ok(end)
    }

    /// Removes every entry after `last` (all entries for `None`). Refuses to remove an entry
    /// at or below the persisted committed id. Pending appends are flushed first; the removed
    /// bytes are zeroed and synced before this returns.
    pub fn truncate_after(&self, last: Option<LogId>) -> LogResult<()> {
        let inner = &self.inner;
        let _cycle = inner.flush.cycle.lock();
        inner.flush_locked()?;
        let mut st = inner.state.lock();
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
        let r = truncate_state(&mut st, inner, keep, new_end);
        st.debug_validate();
        drop(st);
        r.map_err(|e| inner.fail(e))
    }

    /// Logically purges every entry up to `upto` (persisted before returning). The bytes stay
    /// readable through [`LogStore::read_at`] until [`LogStore::delete_segments_below`].
    pub fn purge(&self, upto: LogId) -> LogResult<()> {
        let mut st = self.inner.state.lock();
        if st.purged >= Some(upto) {
            return Ok(());
        }
        self.inner.meta.set_purged(&upto)?;
        st.purged = Some(upto);
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

    /// Saves the vote durably (sled flush) before returning.
    pub fn save_vote(&self, vote: &Vote) -> LogResult<()> {
        self.inner.meta.set_vote(vote)?;
        self.inner.state.lock().vote = Some(*vote);
        Ok(())
    }

    /// Saves the committed log id durably (sled flush) before returning.
    pub fn save_committed(&self, committed: Option<LogId>) -> LogResult<()> {
        self.record_committed(committed)?;
        self.inner.persist_committed(committed)
    }

    /// Records the committed log id and returns; the `raftlog-commit` thread makes it durable
    /// soon after. What the id covers must not be acknowledged to a client before
    /// [`LogStore::wait_durable`] says so.
    ///
    /// Only for `sync` logs (openraft's path uses it only then). A `sync` node counts itself
    /// toward a commit only after its own flush, and every peer it acked holds the entries
    /// durably, so a crash can cost it only its own unflushed tail, which a quorum holds. An
    /// `async` node may lose entries that others already know as committed; a leader
    /// broadcasts a commit index concurrently with this call, so only a committed id durable
    /// *before* openraft goes on keeps the lost-commit floor covering every commit the
    /// others may have learned (s5 caught the deferred version: two `async` nodes elected
    /// each other and overwrote entries the `sync` node held as committed).
    pub fn save_committed_deferred(&self, committed: Option<LogId>) -> LogResult<()> {
        if self.record_committed(committed)? {
            self.inner.committer.submit(committed);
        }
        Ok(())
    }

    /// Waits until entry `index` (committed) cannot be forgotten by a crash of this node:
    /// the entry is flushed in this log, or a committed id at or past it is durable (a crash
    /// that loses the entry then leaves the lost-commit floor). Fails once the log stopped.
    pub async fn wait_durable(&self, index: LogIndex) -> LogResult<()> {
        let mut rx = self.inner.committer.subscribe();
        let mut _demand = None;
        loop {
            {
                let d = rx.borrow_and_update();
                let covered = d.committed.is_some_and(|c| c.index >= index)
                    || d.log_flushed.is_some_and(|f| f >= index);
                if covered {
                    return Ok(());
                }
                if let Some(msg) = &d.stopped {
                    return Err(LogError::Stopped(msg.clone()));
                }
            }
            if _demand.is_none() {
                _demand = Some(self.inner.committer.demand());
            }
            if rx.changed().await.is_err() {
                return Err(LogError::Stopped("log closed".into()));
            }
        }
    }

    /// Sets the in-memory committed id; false if it did not change.
    fn record_committed(&self, committed: Option<LogId>) -> LogResult<bool> {
        let mut st = self.inner.state.lock();
        if let Some(msg) = &st.failed {
            return Err(LogError::Stopped(msg.clone()));
        }
        if st.committed == committed {
            return Ok(false);
        }
        st.committed = committed;
        Ok(true)
    }

    /// Retention: deletes the segment files that end at or below `phys`. Every deleted byte
    /// must be purged (`phys <= watermarks().purged_phys_end`), else nothing is deleted and an
    /// error is returned. The new log start is persisted before the files go; the directory
    /// is fsynced after. Returns the new minimum physical offset.
    pub fn delete_segments_below(&self, phys: PhysOffset) -> LogResult<PhysOffset> {
        let (new_start, detached) = self.detach_segments_below(phys)?;
        detached.delete()?;
        Ok(new_start)
    }

    /// The first half of [`LogStore::delete_segments_below`]: moves the log start (persisted)
    /// and takes the segments below it out of the log, under the log lock; the files go when
    /// the caller calls [`Detached::delete`], after releasing its own locks (unmapping and
    /// unlinking a 1 GiB segment takes long). Readers check the log start first; one still
    /// holding a segment keeps its mapping. A crash before the delete leaves files below the
    /// persisted log start, which the next open removes.
    pub fn detach_segments_below(&self, phys: PhysOffset) -> LogResult<(PhysOffset, Detached)> {
        let _cycle = self.inner.flush.cycle.lock();
        let mut st = self.inner.state.lock();
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
        self.inner.meta.set_log_start(new_start)?;
        let detached = st.segments.detach_below(new_start);
        st.index.drop_below(new_start);
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
}

fn truncate_state(
    st: &mut State,
    inner: &Inner,
    keep: Option<u64>,
    new_end: PhysOffset,
) -> LogResult<()> {
    // Lower the checkpoint first, so a crash mid-way never reads the zeroed range as flushed.
    st.flushed.phys_end = st.flushed.phys_end.min(new_end);
    st.flushed.log_id = keep
        .and_then(|k| st.index.get(k))
        .map(|l| LogId::new_term_index(l.term, l.index));
    inner.meta.set_checkpoint(&st.flushed, true)?;
    let idx_path = inner.dir.join("raft-index");
    st.index
        .truncate_after(keep)
        .map_err(|e| LogError::io("truncate raft index", idx_path, e))?;
    truncate_tail(&mut st.segments, new_end)?;
    st.append_pos = new_end;
    st.purged_phys_end = st.purged_phys_end.min(new_end);
    Ok(())
}

impl Inner {
    /// Validates, positions and writes `entries`; returns the physical end.
    pub fn append_locked(&self, entries: &[LogEntry]) -> LogResult<PhysOffset> {
        let mut st = self.state.lock();
        st.check_writable()?;
        let encoded = self.check_batch(&st, entries)?;
        let mut batch = Vec::with_capacity(encoded.len());
        // Records landing back to back in one segment go out in one write.
        let bytes: usize = encoded
            .iter()
            .map(|e| ENTRY_HEADER_LEN + e.payload.len())
            .sum();
        let mut run = (st.append_pos, Vec::with_capacity(bytes));
        for e in &encoded {
            let total = (ENTRY_HEADER_LEN + e.payload.len()) as u64;
            let pos = self.reserve(&mut st, total)?;
            let same_segment = st.segments.start_of(pos) == st.segments.start_of(run.0);
            if pos != run.0 + run.1.len() as u64 || !same_segment {
                st.segments.write(run.0, &run.1)?;
                run = (pos, Vec::with_capacity(bytes));
            }
            let header = encode_header(e.kind, e.term, e.index, pos, &e.payload);
            run.1.extend_from_slice(&header);
            run.1.extend_from_slice(&e.payload);
            st.append_pos = pos + total;
            batch.push(EntryLocation {
                index: e.index,
                phys: pos,
                size: total as u32,
                term: e.term,
            });
        }
        st.segments.write(run.0, &run.1)?;
        st.index.push_batch(&batch);
        if let Some(l) = batch.last() {
            tracing::trace!(
                log_index = l.index,
                term = l.term,
                phys_offset = l.phys,
                entries = batch.len(),
                "appended"
            );
        }
        st.debug_validate();
        Ok(st.append_pos)
    }

    fn check_batch<'a>(&self, st: &State, entries: &'a [LogEntry]) -> LogResult<Vec<Encoded<'a>>> {
        let mut prev = st.index.last().map(|l| (l.index, l.term));
        let purged = st.purged.map(|p| p.index);
        let max = self.config.segment_bytes;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let (index, term) = (e.log_id.index, *e.log_id.leader_id);
            let follows = match prev {
                // After a gap every missing index must be purged (recovery checks the same).
                Some((pi, _)) => {
                    index == pi + 1 || purged.is_some_and(|p| pi < p && index == p + 1)
                }
                None => purged.is_none_or(|p| index > p),
            };
            if !follows {
                return Err(LogError::InvalidArgument(format!(
                    "entry {index} does not continue the log (last {:?}, purged {purged:?})",
                    prev.map(|p| p.0)
                )));
            }
            if prev.is_some_and(|(_, pt)| term < pt) {
                return Err(LogError::InvalidArgument(format!(
                    "entry {index} has term {term} below the previous entry's"
                )));
            }
            let (kind, payload) = encode_payload(&e.payload)?;
            let size = (ENTRY_HEADER_LEN + payload.len()) as u64;
            if size > max {
                return Err(LogError::EntryTooLarge { size, max });
            }
            prev = Some((index, term));
            out.push(Encoded {
                kind,
                payload,
                term,
                index,
            });
        }
        Ok(out)
    }

    /// Position for a record of `total` bytes: the append position, or the next segment's
    /// start (padding the current one) if it does not fit. Creates the segment if needed.
    fn reserve(&self, st: &mut State, total: u64) -> LogResult<PhysOffset> {
        let seg_bytes = self.config.segment_bytes;
        let mut pos = st.append_pos;
        let start = st.segments.start_of(pos);
        let room = start + seg_bytes - pos;
        if room < total {
            if room >= ENTRY_HEADER_LEN as u64 && st.segments.get(start).is_some() {
                st.segments.write(pos, &encode_padding(pos, room as u32))?;
            }
            pos = start + seg_bytes;
            st.append_pos = pos;
            tracing::info!(phys_offset = pos, "rolling to a new segment");
            if matches!(self.config.flush, FlushPolicy::Async) {
                self.flush.wake();
            }
        }
        let seg_start = st.segments.start_of(pos);
        if st.segments.get(seg_start).is_none() {
            let f = self.new_segment(seg_start)?;
            st.segments.insert(seg_start, f);
            if let Some(p) = &self.prealloc {
                p.request(seg_start + seg_bytes);
            }
        }
        Ok(pos)
    }

    fn new_segment(
        &self,
        start: PhysOffset,
    ) -> LogResult<std::sync::Arc<dyn crate::env::SegmentFile>> {
        let path = self
            .dir
            .join("commitlog")
            .join(crate::segments::segment_name(start));
        match self.prealloc.as_ref().and_then(|p| p.take(start)) {
            Some(Ok(f)) => return Ok(f),
            Some(Err(e)) => {
                tracing::warn!(phys_offset = start, error = %e, "preallocation had failed; retrying inline")
            }
            None => tracing::debug!(
                phys_offset = start,
                "no preallocated segment; creating inline"
            ),
        }
        self.env
            .create_segment(&path, self.config.segment_bytes)
            .map_err(|e| LogError::io("create segment", path, e))
    }
}
