//! The [`DedupWindow`]'s invariant checks: cheap ones apply runs in debug builds, whole ones
//! for tests and tools.

use super::runs::NO_PRODUCER;
use super::DedupWindow;
use crate::error::Result;
use crate::error::StoreError;

impl DedupWindow {
    /// Checks the invariant cheaply (see the type docs): no more sends in runs than in the
    /// window, room in the table for the rest, and the oldest and newest sends found at
    /// their positions. Apply runs it in debug builds.
    pub fn validate(&self) -> Result<()> {
        let (table, runs) = (self.table_live(), self.runs.len());
        if self.by_key.len() < table || runs > self.order.len() {
            return Err(StoreError::invalid(format!(
                "dedup window: {} sends, {runs} in runs, {table} of {} positions in the table",
                self.order.len(),
                self.by_key.len()
            )));
        }
        let ends = [0, self.order.len().saturating_sub(1)];
        self.check_positions(ends.into_iter().filter(|&i| i < self.order.len()))
    }

    /// [`validate`](Self::validate) for every send, the table's live positions and every
    /// run (O(n): tests and tools).
    pub fn validate_all(&self) -> Result<()> {
        self.validate()?;
        let live = (self.by_key.iter())
            .filter(|&pos| self.live_index(pos).is_some())
            .count();
        if live != self.table_live() {
            return Err(StoreError::invalid(format!(
                "dedup window: {live} live positions in the table for {} sends not in runs",
                self.table_live()
            )));
        }
        let positions = self.first_seq..self.first_seq + self.order.len() as u64;
        (self.runs.check(self.table_live(), positions))
            .map_err(|e| StoreError::invalid(format!("dedup window: {e}")))?;
        for (i, slot) in self.order.iter().enumerate() {
            let prefix = match slot.producer {
                NO_PRODUCER => Some(""),
                id => self.runs.prefix(id),
            };
            if !prefix.is_some_and(|p| self.key(i).starts_with(p)) {
                return Err(StoreError::invalid(format!(
                    "dedup window: key {} is not of its producer {}",
                    self.key(i),
                    slot.producer
                )));
            }
        }
        self.check_positions(0..self.order.len())
    }

    fn check_positions(&self, at: impl Iterator<Item = usize>) -> Result<()> {
        for i in at {
            let key = self.key(i);
            if self.find(key, super::runs::sequence_of(key), None).0 != Some(i) {
                return Err(StoreError::invalid(format!(
                    "dedup window: key {key} is not at position {i}"
                )));
            }
        }
        Ok(())
    }
}
