//! Snapshot install from segment files (the streaming counterpart of
//! [`LogStore::replace_from_bytes`]): the receiver stages the snapshot's segments as files, so
//! memory stays bounded however large the retained log is.

use std::path::Path;

use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::segments::parse_segment_name;
use crate::store::open_state;
use crate::store::LogStore;
use crate::types::LogId;
use crate::types::PhysOffset;

/// Starts of the segment files in `staged`, checked aligned and contiguous.
fn staged_starts(staged: &Path, seg_bytes: u64) -> LogResult<Vec<PhysOffset>> {
    let mut starts = Vec::new();
    let rd = std::fs::read_dir(staged).map_err(|e| LogError::io("read dir", staged, e))?;
    for e in rd {
        let e = e.map_err(|e| LogError::io("read dir", staged, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let start = parse_segment_name(&name)
            .ok_or_else(|| LogError::InvalidArgument(format!("unexpected staged file {name}")))?;
        starts.push(start);
    }
    starts.sort_unstable();
    for (i, s) in starts.iter().enumerate() {
        if s % seg_bytes != 0 || *s != starts[0] + i as u64 * seg_bytes {
            return Err(LogError::InvalidArgument(format!(
                "staged segment {s} is not aligned or not contiguous"
            )));
        }
    }
    if starts.is_empty() {
        return Err(LogError::InvalidArgument("no segments to import".into()));
    }
    Ok(starts)
}

impl<C> LogStore<C> {
    /// Replaces the whole log with the segment files in `staged` (full-size, named by start
    /// offset, fsynced; moved, not copied), whose valid records end at `end`, and records
    /// `purged` (the snapshot's last log id) as the last purged id. Same guarantees and limits
    /// as [`LogStore::replace_from_bytes`]; real file system only (renames bypass the `Env`).
    pub fn replace_from_files(
        &self,
        staged: &Path,
        purged: LogId,
        end: PhysOffset,
    ) -> LogResult<()> {
        let inner = &self.inner;
        let seg_bytes = inner.config.segment_bytes;
        let starts = staged_starts(staged, seg_bytes)?;
        let _cycle = inner.flush.cycle.lock();
        inner.flush_locked()?;
        let mut st = inner.state.lock();
        st.check_writable()?;
        if st.committed.is_some_and(|c| c > purged) {
            let c = st.committed;
            return Err(LogError::InvalidArgument(format!(
                "snapshot {purged} is below the committed id {c:?}"
            )));
        }
        let result = (|| {
            st.segments.remove_from(0)?;
            for s in &starts {
                let to = st.segments.path(*s);
                let from = staged.join(crate::segments::segment_name(*s));
                std::fs::rename(&from, &to).map_err(|e| LogError::io("rename segment", &to, e))?;
            }
            let dir = st.segments.dir().to_path_buf();
            inner
                .env
                .sync_dir(&dir)
                .map_err(|e| LogError::io("fsync dir", &dir, e))?;
            inner.meta.set_log_start(starts[0])?;
            inner.meta.set_purged(&purged)?;
            let cp = FlushCheckpoint {
                phys_end: end,
                log_id: None,
            };
            inner.meta.set_checkpoint(&cp, true)?;
            *st = open_state(&inner.dir, &inner.config, inner.env.clone(), &inner.meta)?;
            // A tail too short for a record header is skipped by recovery: the next append
            // goes to the next segment either way.
            let short_tail = st.append_pos > end
                && st.append_pos % seg_bytes == 0
                && st.append_pos - end < crate::format::ENTRY_HEADER_LEN as u64;
            if st.append_pos != end && !short_tail {
                return Err(LogError::InvalidArgument(format!(
                    "imported segments end at {}, expected {end}",
                    st.append_pos
                )));
            }
            Ok(())
        })();
        if let Err(e) = result {
            drop(st);
            return Err(inner.fail(e));
        }
        tracing::info!(min_phys_offset = st.min_phys, phys_offset = st.append_pos, purged = %purged,
            "log replaced from staged segment files");
        if let Some(p) = &inner.prealloc {
            p.request(st.segments.start_of(st.append_pos) + seg_bytes);
        }
        st.debug_validate();
        Ok(())
    }
}
