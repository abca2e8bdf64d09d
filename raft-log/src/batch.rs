//! Checking and encoding the entries of one append call against the log before any byte is
//! written: indexes continue the log (a gap only right after purged entries, as recovery
//! accepts), terms never decrease, and every record fits in one segment.

use std::borrow::Cow;

use crate::error::LogError;
use crate::error::LogResult;
use crate::format::encode_payload;
use crate::format::RecordKind;
use crate::format::ENTRY_HEADER_LEN;
use crate::state::State;
use crate::types::LogEntry;
use crate::types::RawIndex;
use crate::types::Term;

/// One entry's record, encoded but not yet placed.
pub struct Encoded<'a> {
    /// Record kind (normal, membership, blank).
    pub kind: RecordKind,
    /// Payload bytes.
    pub payload: Cow<'a, [u8]>,
    /// Term.
    pub term: Term,
    /// Log index.
    pub index: RawIndex,
}

/// Checks that `entries` continue the log in `st` (index = last + 1, or past the purged id
/// after a gap; terms non-decreasing) and that each record fits in a segment of `max` bytes;
/// returns them encoded, in order. Nothing is written.
pub fn encode_batch<'a>(
    st: &State,
    entries: &'a [LogEntry],
    max: u64,
) -> LogResult<Vec<Encoded<'a>>> {
    let mut prev = st.index.last().map(|l| (l.index, l.term));
    let purged = st.purged.map(|p| p.index);
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let (index, term) = (e.log_id.index, *e.log_id.leader_id);
        let follows = match prev {
            // After a gap every missing index must be purged (recovery checks the same).
            Some((pi, _)) => index == pi + 1 || purged.is_some_and(|p| pi < p && index == p + 1),
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
