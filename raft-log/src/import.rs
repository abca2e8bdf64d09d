//! Snapshot install support: replacing the whole CommitLog with segments received from the
//! leader (byte-identical, same physical offsets), then rebuilding the raft index from them.
//!
//! Used by the state machine's `install_snapshot`, while openraft holds the log: the state
//! lock and the flush-cycle lock are held for the whole swap. Not crash-atomic: a crash in the
//! middle leaves a log that recovery may refuse (the node then needs a fresh data dir); the
//! state machine's checkpoint still names the old state, so nothing is silently wrong.

use std::path::Path;

use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::segments::parse_segment_name;
use crate::store::open_state;
use crate::store::LogStore;
use crate::types::LogId;
use crate::types::PhysOffset;

impl<C> LogStore<C> {
    /// Replaces every segment with the segment files in `staged` (full-size, named by start
    /// offset, already fsynced), whose valid entries end exactly at `end_phys` with entry
    /// `last`. Afterwards entries up to `last` are purged (readable until retention deletes
    /// them), the committed id is at least `last`, and the next append goes to `end_phys`.
    pub fn import_segments(
        &self,
        staged: &Path,
        last: LogId,
        end_phys: PhysOffset,
    ) -> LogResult<()> {
        let inner = &self.inner;
        let _cycle = inner.flush.cycle.lock();
        let mut st = inner.state.lock();
        st.check_writable()?;
        let mut starts = Vec::new();
        let rd = std::fs::read_dir(staged).map_err(|e| LogError::io("read dir", staged, e))?;
        for e in rd {
            let e = e.map_err(|e| LogError::io("read dir", staged, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let start = parse_segment_name(&name).ok_or_else(|| {
                LogError::InvalidArgument(format!("unexpected staged file {name}"))
            })?;
            starts.push(start);
        }
        starts.sort_unstable();
        let seg_bytes = inner.config.segment_bytes;
        let log_start = starts
            .first()
            .copied()
            .unwrap_or(end_phys - end_phys % seg_bytes);
        // Drop every current segment, then move the staged ones in.
        st.segments.remove_from(0)?;
        let dir = inner.dir.join("commitlog");
        for s in &starts {
            let name = crate::segments::segment_name(*s);
            std::fs::rename(staged.join(&name), dir.join(&name))
                .map_err(|e| LogError::io("rename staged segment", dir.join(&name), e))?;
        }
        inner
            .env
            .sync_dir(&dir)
            .map_err(|e| LogError::io("fsync dir", &dir, e))?;
        let idx = inner.dir.join("raft-index").join("index");
        match std::fs::remove_file(&idx) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LogError::io("remove raft index", idx, e)),
        }
        inner.meta.set_log_start(log_start)?;
        inner.meta.set_purged(&last)?;
        if inner.meta.committed()? < Some(last) {
            inner.meta.set_committed(&Some(last))?;
        }
        let cp = FlushCheckpoint {
            phys_end: end_phys,
            log_id: Some(last),
        };
        inner.meta.set_checkpoint(&cp, true)?;
        let new = open_state(&inner.dir, &inner.config, inner.env.clone(), &inner.meta)?;
        if new.append_pos != end_phys {
            return Err(LogError::InvalidArgument(format!(
                "imported segments end at {}, expected {end_phys}",
                new.append_pos
            )));
        }
        *st = new;
        if let Some(p) = &inner.prealloc {
            p.request(st.segments.start_of(st.append_pos) + seg_bytes);
        }
        tracing::info!(
            log_index = last.index,
            term = last.leader_id.term,
            phys_offset = end_phys,
            segments = starts.len(),
            "commitlog replaced by snapshot segments"
        );
        Ok(())
    }
}
