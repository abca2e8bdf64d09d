//! Reading one entry back from the CommitLog (replication and apply read an entry this way
//! when [`crate::recent`] no longer holds it, e.g. for a follower catching up from far
//! behind, or after a restart): header first, then the payload copied once from the segment
//! straight into the entry, both checked (header CRC, length, payload CRC, index).
//! [`LocatedRange`] is the one way the log's bytes are read back (entries here, records by
//! `LogStore::read_at`): from the mapping, or around the page cache for old bytes.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cold_read::ColdAt;
use crate::env::SegmentFile;
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
use crate::types::RawPhys;

/// A range of the log found under the state lock ([`crate::state::State::locate_range`]),
/// read outside it: around the page cache when it lies below the dropped pages' end
/// ([`crate::cold_read`]), else from the segment's mapping.
pub(crate) struct LocatedRange<'a> {
    shared: &'a Shared,
    phys: RawPhys,
    seg: Arc<dyn SegmentFile>,
    /// Offset of `phys` in the segment.
    off: u64,
    path: PathBuf,
    cold: Option<ColdAt>,
}

impl<'a> LocatedRange<'a> {
    /// `[phys, phys + len)`, which must lie inside the appended part of one segment.
    pub(crate) fn new(shared: &'a Shared, phys: RawPhys, len: u32) -> LogResult<Self> {
        let st = shared.state.lock();
        let (seg, off, path) = st.locate_range(phys, len)?;
        let cold = st.cold_read(phys, len);
        Ok(Self {
            shared,
            phys,
            seg,
            off,
            path,
            cold,
        })
    }

    /// `len` bytes at `at` in the range.
    pub(crate) fn read(&self, at: u64, len: usize) -> LogResult<Vec<u8>> {
        let cold = self
            .cold
            .and_then(|c| self.shared.cold.read(&self.seg, c, self.phys + at, len));
        match cold {
            Some(bytes) => Ok(bytes),
            None => self
                .seg
                .read_vec(self.off + at, len)
                .map_err(|e| LogError::io("read", self.path.clone(), e)),
        }
    }
}

/// The entry at `l` (a location from the raft index), or a corruption error naming its
/// segment file when the bytes there are not that entry.
pub(crate) fn read_entry(shared: &Shared, l: &EntryLocation) -> LogResult<LogEntry> {
    let range = LocatedRange::new(shared, l.phys, l.size)?;
    let corruption = |reason| shared.state.lock().corruption(l.phys, reason);
    let head = range.read(0, ENTRY_HEADER_LEN.min(l.size as usize))?;
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
    let payload = range.read(ENTRY_HEADER_LEN as u64, h.payload_len as usize)?;
    match decode_entry_owned(&h, payload) {
        Ok(e) if e.log_id.index == l.index => Ok(e),
        Ok(_) => Err(corruption(format!("expected entry {} here", l.index))),
        Err(reason) => Err(corruption(reason)),
    }
}
