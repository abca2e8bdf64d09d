//! [`RecentEntries`]: the entries appended last, kept in memory with their payloads shared
//! (`AppPayload` is `Bytes`: a clone is a reference count), so that replication to each
//! follower and apply take them from here instead of reading each back from the CommitLog
//! (a copy out of the mapping and a CRC check per reader; three readers per entry on a
//! leader of three).
//!
//! Only an optimization: a reader that misses (an entry appended before the log was opened,
//! or evicted) reads the CommitLog as before. A hit must be the entry the raft index holds at
//! that index: the caller passes the index's term, and by Raft's log matching an entry is
//! fixed by its index and term. Truncation and install drop what they replace anyway, so no
//! memory is held for entries that are gone.

use std::collections::VecDeque;

use crate::types::LogEntry;
use crate::types::Payload;

/// Most payload bytes remembered (the oldest entries go first). At 60 MB/s of appends this
/// is about 130 ms of the log: followers that keep up read from here; one catching up further
/// behind reads the CommitLog.
pub const RECENT_MAX_BYTES: usize = 8 << 20;
/// Most entries remembered (bounds the overhead of tiny entries).
pub const RECENT_MAX_ENTRIES: usize = 16_384;
/// What an entry without application bytes counts as.
const OTHER_ENTRY_BYTES: usize = 64;

/// The last appended entries, contiguous by index (see the module docs).
#[derive(Default)]
pub struct RecentEntries {
    entries: VecDeque<LogEntry>,
    bytes: usize,
}

fn size(e: &LogEntry) -> usize {
    match &e.payload {
        Payload::Normal(p) => p.0.len().max(OTHER_ENTRY_BYTES),
        _ => OTHER_ENTRY_BYTES,
    }
}

impl RecentEntries {
    /// Remembers `entries`, just written after the ones remembered (an entry that does not
    /// continue them, e.g. after a gap, starts over).
    pub fn push(&mut self, entries: &[LogEntry]) {
        for e in entries {
            let follows = self
                .entries
                .back()
                .is_none_or(|b| b.log_id.index + 1 == e.log_id.index);
            if !follows {
                self.clear();
            }
            self.bytes += size(e);
            self.entries.push_back(e.clone());
        }
        while self.bytes > RECENT_MAX_BYTES || self.entries.len() > RECENT_MAX_ENTRIES {
            match self.entries.pop_front() {
                Some(e) => self.bytes -= size(&e),
                None => break,
            }
        }
    }

    /// The entry at `index` if remembered and of `term` (the raft index's term there).
    pub fn get(&self, index: u64, term: u64) -> Option<LogEntry> {
        let first = self.entries.front()?.log_id.index;
        let e = self
            .entries
            .get(usize::try_from(index.checked_sub(first)?).ok()?)?;
        (e.log_id.index == index && *e.log_id.leader_id == term).then(|| e.clone())
    }

    /// Forgets the entries after `last` (all for `None`): the log tail was truncated.
    pub fn truncate_after(&mut self, last: Option<u64>) {
        while let Some(b) = self.entries.back() {
            if last.is_some_and(|l| b.log_id.index <= l) {
                break;
            }
            self.bytes -= size(b);
            self.entries.pop_back();
        }
    }

    /// Forgets the entries up to `upto` (purged).
    pub fn forget_upto(&mut self, upto: u64) {
        while let Some(f) = self.entries.front() {
            if f.log_id.index > upto {
                break;
            }
            self.bytes -= size(f);
            self.entries.pop_front();
        }
    }

    /// Forgets everything (the log was replaced).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Entries remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is remembered.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::AppPayload;
    use crate::types::LogId;

    fn entry(term: u64, index: u64, bytes: usize) -> LogEntry {
        LogEntry {
            log_id: LogId::new_term_index(term, index),
            payload: Payload::Normal(AppPayload::from(vec![index as u8; bytes])),
        }
    }

    #[test]
    fn hits_only_the_same_index_and_term() {
        let mut r = RecentEntries::default();
        r.push(&[entry(1, 5, 10), entry(1, 6, 10), entry(2, 7, 10)]);
        assert_eq!(r.get(6, 1), Some(entry(1, 6, 10)));
        assert_eq!(r.get(7, 1), None, "another term at that index");
        assert_eq!(r.get(4, 1), None);
        assert_eq!(r.get(8, 2), None);
        // A gap starts over.
        r.push(&[entry(2, 9, 10)]);
        assert_eq!((r.len(), r.get(9, 2).is_some()), (1, true));
    }

    #[test]
    fn truncate_purge_and_the_byte_cap() {
        let mut r = RecentEntries::default();
        r.push(&(1..=4).map(|i| entry(1, i, 100)).collect::<Vec<_>>());
        r.truncate_after(Some(2));
        assert_eq!((r.len(), r.get(3, 1)), (2, None));
        r.push(&[entry(2, 3, 100)]);
        assert_eq!(r.get(3, 2), Some(entry(2, 3, 100)));
        r.forget_upto(1);
        assert_eq!((r.len(), r.get(1, 1)), (2, None));
        r.truncate_after(None);
        assert!(r.is_empty());
        let big = RECENT_MAX_BYTES / 4 + 1;
        r.push(&(1..=4).map(|i| entry(1, i, big)).collect::<Vec<_>>());
        assert_eq!(r.len(), 3, "the oldest went over the cap");
        assert_eq!(r.get(1, 1), None);
        assert!(r.get(4, 1).is_some());
    }
}
