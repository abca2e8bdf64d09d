//! Snapshot-install support: copy retained CommitLog segments from one node to another so
//! that the receiver holds the same bytes at the same physical offsets (message ids stay
//! valid cluster-wide) and continues appending exactly where the sender's log ends.

use crate::error::LogError;
use crate::error::LogResult;
use crate::meta::FlushCheckpoint;
use crate::store::open_state;
use crate::store::LogStore;
use crate::types::LogId;
use crate::types::PhysOffset;

/// One segment's bytes: its start offset and its content from the segment start (the last
/// segment may be shorter: it ends at the sender's append position).
pub type SegmentBytes = (PhysOffset, Vec<u8>);

impl<C> LogStore<C> {
    /// Sending side: the bytes of every segment from the one holding `from` up to the append
    /// position.
    pub fn export_segments(&self, from: PhysOffset) -> LogResult<Vec<SegmentBytes>> {
        let (parts, seg_bytes) = {
            let st = self.inner.state.lock();
            if from < st.min_phys || from > st.append_pos {
                let (min, end) = (st.min_phys, st.append_pos);
                return Err(LogError::InvalidArgument(format!(
                    "export from {from} outside the log [{min}, {end}]"
                )));
            }
            let seg_bytes = st.segments.segment_bytes();
            let mut parts = Vec::new();
            let mut start = st.segments.start_of(from);
            while start < st.append_pos {
                let seg = st
                    .segments
                    .get(start)
                    .ok_or_else(|| LogError::InvalidArgument(format!("segment {start} missing")))?;
                let len = (start + seg_bytes).min(st.append_pos) - start;
                parts.push((start, seg, len, st.segments.path(start)));
                start += seg_bytes;
            }
            (parts, seg_bytes)
        };
        debug_assert!(parts.iter().all(|p| p.0 % seg_bytes == 0));
        let mut out = Vec::with_capacity(parts.len());
        for (start, seg, len, path) in parts {
            let mut buf = vec![0u8; len as usize];
            seg.read_at(0, &mut buf)
                .map_err(|e| LogError::io("read", path, e))?;
            out.push((start, buf));
        }
        Ok(out)
    }

    /// Receiving side: replaces the whole log with `segments` (from [`LogStore::export_segments`]
    /// on a peer) and records `purged` (the installed snapshot's last log id) as the last
    /// purged id. The bytes are validated like on open; the next append goes at the end of the
    /// imported bytes. Refused if `purged` is below the persisted committed id.
    ///
    /// Not crash-atomic: after a crash mid-import the node may come up with a shorter log (or
    /// refuse to open) and must install the snapshot again.
    pub fn replace_from_bytes(&self, segments: Vec<SegmentBytes>, purged: LogId) -> LogResult<()> {
        let inner = &self.inner;
        let seg_bytes = inner.config.segment_bytes;
        let end = check_import(&segments, seg_bytes)?;
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
            for (start, bytes) in &segments {
                let path = st.segments.path(*start);
                let f = inner
                    .env
                    .create_segment(&path, seg_bytes)
                    .map_err(|e| LogError::io("create segment", &path, e))?;
                f.write_at(0, bytes)
                    .map_err(|e| LogError::io("write", &path, e))?;
                f.sync_range(0, bytes.len() as u64)
                    .map_err(|e| LogError::io("fsync", &path, e))?;
            }
            let first = segments.first().map_or(0, |s| s.0);
            inner.meta.set_log_start(first)?;
            inner.meta.set_purged(&purged)?;
            inner.meta.set_checkpoint(
                &FlushCheckpoint {
                    phys_end: end,
                    log_id: None,
                },
                true,
            )?;
            *st = open_state(&inner.dir, &inner.config, inner.env.clone(), &inner.meta)?;
            Ok(())
        })();
        if let Err(e) = result {
            drop(st);
            return Err(inner.fail(e));
        }
        tracing::info!(min_phys_offset = st.min_phys, phys_offset = st.append_pos, purged = %purged, "log replaced from peer segments");
        if let Some(p) = &inner.prealloc {
            p.request(st.segments.start_of(st.append_pos) + seg_bytes);
        }
        st.debug_validate();
        Ok(())
    }
}

/// Checks that the segments are aligned, contiguous and full except the last; returns the end.
fn check_import(segments: &[SegmentBytes], seg_bytes: u64) -> LogResult<PhysOffset> {
    let bad = |m: String| Err(LogError::InvalidArgument(m));
    let Some(first) = segments.first() else {
        return bad("no segments to import".into());
    };
    if first.0 % seg_bytes != 0 {
        return bad(format!(
            "segment start {} is not aligned to {seg_bytes}",
            first.0
        ));
    }
    for (i, (start, bytes)) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if *start != first.0 + i as u64 * seg_bytes {
            return bad(format!("segment {start} does not follow the previous one"));
        }
        if bytes.len() as u64 > seg_bytes || (!last && bytes.len() as u64 != seg_bytes) {
            return bad(format!("segment {start} has {} bytes", bytes.len()));
        }
    }
    let (start, bytes) = &segments[segments.len() - 1];
    Ok(start + bytes.len() as u64)
}
