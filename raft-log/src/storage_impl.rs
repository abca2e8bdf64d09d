//! openraft's `RaftLogStorage` / `RaftLogReader` over [`LogStore`].
//!
//! Guarantees: `append` returns once the entries are readable and calls `IOFlushed` once
//! they are durable under the flush policy (or with the I/O error); `save_vote` is durable
//! (sled flush + fdatasync) before returning, and so is `save_committed` on an `async`
//! candidate or leader unless its flushed log already covers the id
//! (`meta/committed-id`: pwrite + fdatasync; on a `sync` log it is written
//! behind, acks waiting with `LogStore::wait_durable`; on an `async` follower too, apply
//! waiting with `LogStore::wait_applicable`); `truncate_after` and `purge` take effect in call
//! order with appends (openraft calls them sequentially).

use std::fmt::Debug;
use std::io;
use std::ops::Bound;
use std::ops::RangeBounds;

use openraft::storage::IOFlushed;
use openraft::storage::LogState;
use openraft::storage::RaftLogStorage;
use openraft::OptionalSend;
use openraft::RaftLogReader;

use crate::config::FlushPolicy;
use crate::store::LogStore;
use crate::types::LogId;
use crate::types::LogIndex;
use crate::types::LogTypes;
use crate::types::Vote;

fn range_to_half_open<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl<C: LogTypes> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        let (start, end) = range_to_half_open(&range);
        let first_unpurged = self.watermarks().last_purged.map_or(0, |p| p.index + 1);
        Ok(self.read_entries(LogIndex::new(start.max(first_unpurged)), LogIndex::new(end))?)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.vote())
    }
}

impl<C: LogTypes> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogStore<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        let w = self.watermarks();
        let last = std::cmp::max(w.appended, w.last_purged);
        Ok(LogState {
            last_purged_log_id: w.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        Ok(LogStore::save_vote(self, vote)?)
    }

    /// `sync`: deferred to the committer thread (acks wait via `wait_durable`); `async`:
    /// deferred too, apply waiting for it (see [`crate::store::LogStore::save_committed_async`]).
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        match self.config().flush {
            FlushPolicy::Sync => Ok(LogStore::save_committed_deferred(self, committed)?),
            FlushPolicy::Async => Ok(LogStore::save_committed_async(self, committed)?),
        }
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.committed())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        self.append_entries(entries, Box::new(move |r| callback.io_completed(r)))?;
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        Ok(LogStore::truncate_after(self, last_log_id)?)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        Ok(LogStore::purge(self, log_id)?)
    }
}
