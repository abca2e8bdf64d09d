//! Snapshot install: the receiver replaces its whole log with the snapshot's segments, staged
//! as files (so memory stays bounded however large the retained log is) and moved into
//! `commitlog/`; the receiver then holds the sender's bytes at the same physical offsets and
//! continues appending exactly where the sender's log ended. The only install path.

use std::path::Path;

use crate::error::LogError;
use crate::error::LogResult;
use crate::flusher::Flusher;
use crate::format::ENTRY_HEADER_LEN;
use crate::meta::FlushCheckpoint;
use crate::open::load_state;
use crate::segments::parse_segment_name;
use crate::segments::segment_name;
use crate::types::LogId;
use crate::types::RawPhys;
use crate::writer::Writer;

/// Starts of the segment files in `staged`, checked aligned and contiguous.
fn staged_starts(staged: &Path, seg_bytes: u64) -> LogResult<Vec<RawPhys>> {
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

/// Replaces the whole log under `dir` with the segment files in `staged` (see
/// `LogStore::replace_from_files`): between flush cycles, under the log lock, refused below
/// the committed id; any error after the old segments are gone stops the log.
pub fn replace_from_files(
    writer: &Writer,
    flusher: &Flusher,
    dir: &Path,
    staged: &Path,
    purged: LogId,
    end: RawPhys,
) -> LogResult<()> {
    let shared = writer.shared();
    let config = writer.config();
    let seg_bytes = config.segment_bytes;
    let starts = staged_starts(staged, seg_bytes)?;
    let _cycle = flusher.lock_cycle();
    flusher.flush_locked()?;
    let mut st = shared.state.lock();
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
            let from = staged.join(segment_name(*s));
            std::fs::rename(&from, &to).map_err(|e| LogError::io("rename segment", &to, e))?;
        }
        let seg_dir = st.segments.dir().to_path_buf();
        writer
            .env()
            .sync_dir(&seg_dir)
            .map_err(|e| LogError::io("fsync dir", &seg_dir, e))?;
        shared.meta.set_log_start(starts[0])?;
        shared.meta.set_purged(&purged)?;
        let cp = FlushCheckpoint {
            phys_end: end,
            log_id: None,
        };
        shared.meta.set_checkpoint(&cp, true)?;
        *st = load_state(dir, config, writer.env().clone(), &shared.meta)?;
        // A tail too short for a record header is skipped by recovery: the next append
        // goes to the next segment either way.
        let short_tail = st.append_pos > end
            && st.append_pos % seg_bytes == 0
            && st.append_pos - end < ENTRY_HEADER_LEN as u64;
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
        return Err(shared.fail(e));
    }
    tracing::info!(min_phys_offset = st.min_phys, phys_offset = st.append_pos, purged = %purged,
        "log replaced from staged segment files");
    writer.request_next_segment(&st);
    st.debug_validate();
    Ok(())
}
