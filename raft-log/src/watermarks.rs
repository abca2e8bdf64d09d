//! [`Watermarks`]: the positions of an open log at one instant, for metrics, retention and the
//! state machine (`LogStore::watermarks`).

use crate::state::State;
use crate::types::LogId;
use crate::types::LogIndex;
use crate::types::PhysOffset;

/// The positions of the log, for metrics and for the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    /// Last entry appended (readable).
    pub appended: Option<LogId>,
    /// Physical end of the appended bytes.
    pub appended_phys_end: PhysOffset,
    /// Last entry known durable.
    pub flushed: Option<LogId>,
    /// Physical end of the durable bytes.
    pub flushed_phys_end: PhysOffset,
    /// First entry still physically present (purged or not).
    pub first_index: Option<LogIndex>,
    /// Start of the oldest segment kept.
    pub min_phys_offset: PhysOffset,
    /// Last purged log id.
    pub last_purged: Option<LogId>,
    /// Physical end of the last purged entry: `delete_segments_below` accepts up to here.
    pub purged_phys_end: PhysOffset,
    /// Persisted committed log id.
    pub committed: Option<LogId>,
}

impl Watermarks {
    /// The positions of `st`.
    pub fn of(st: &State) -> Self {
        Watermarks {
            appended: st.last_entry_id(),
            appended_phys_end: PhysOffset::new(st.append_pos),
            flushed: st.flushed.log_id,
            flushed_phys_end: PhysOffset::new(st.flushed.phys_end),
            first_index: st.index.first().map(|l| LogIndex::new(l.index)),
            min_phys_offset: PhysOffset::new(st.min_phys),
            last_purged: st.purged,
            purged_phys_end: PhysOffset::new(st.purged_phys_end),
            committed: st.committed,
        }
    }
}
