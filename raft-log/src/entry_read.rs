//! Reading one entry back from the CommitLog (replication and apply read an entry this way
//! when [`crate::recent`] no longer holds it, e.g. for a follower catching up from far
//! behind, or after a restart): header first, then the payload copied once from the segment
//! straight into the entry, both checked (header CRC, length, payload CRC, index).

use crate::error::LogError;
use crate::error::LogResult;
use crate::format::decode_entry_owned;
use crate::format::decode_header;
use crate::format::HeaderSlot;
use crate::format::RecordKind;
use crate::format::ENTRY_HEADER_LEN;
use crate::raft_index::EntryLocation;
use crate::shared::Shared;
use crate::types::LogEntry;

/// The entry at `l` (a location from the raft index), or a corruption error naming its
/// segment file when the bytes there are not that entry.
pub(crate) fn read_entry(shared: &Shared, l: &EntryLocation) -> LogResult<LogEntry> {
    let state = &shared.state;
    let ((seg, off, path), cold) = {
        let st = state.lock();
        (
            st.locate_range(l.phys, l.size)?,
            st.cold_read(l.phys, l.size),
        )
    };
    let corruption = |reason| state.lock().corruption(l.phys, reason);
    // Past the page cache when the entry is that far behind (`cold_read.rs`), else from the
    // mapping.
    let read = |at: u64, len: usize| {
        if let Some(bytes) = cold.and_then(|c| shared.cold.read(&seg, c, l.phys + at, len)) {
            return Ok(bytes);
        }
        seg.read_vec(off + at, len)
            .map_err(|e| LogError::io("read", path.clone(), e))
    };
    let head = read(0, ENTRY_HEADER_LEN.min(l.size as usize))?;
    let h = match decode_header(&head, l.phys, u64::from(l.size)) {
        Ok(HeaderSlot::Record(h)) if h.kind != RecordKind::Padding => h,
        Ok(_) => return Err(corruption(format!("expected entry {} here", l.index))),
        Err(reason) => return Err(corruption(reason)),
    };
    let end = ENTRY_HEADER_LEN as u64 + u64::from(h.payload_len);
    if end > u64::from(l.size) {
        let reason = format!("truncated: record needs {end} bytes, {} available", l.size);
        return Err(corruption(reason));
    }
    let payload = read(ENTRY_HEADER_LEN as u64, h.payload_len as usize)?;
    match decode_entry_owned(&h, payload) {
        Ok(e) if e.log_id.index == l.index => Ok(e),
        Ok(_) => Err(corruption(format!("expected entry {} here", l.index))),
        Err(reason) => Err(corruption(reason)),
    }
}
