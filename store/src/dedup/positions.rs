//! [`Positions`]: the [`DedupWindow`](super::DedupWindow)'s table from a key's hash to the
//! position of its send, 8 bytes a slot, whose slot lines apply can load ahead of use.
//!
//! Apply looks up and remembers one key per identified message on every node, each at a
//! random place in a table of megabytes. With hashbrown's table apply could load the control
//! bytes ahead (the window's `prefetch`), but not the 16-byte bucket an insert then wrote:
//! that write missed the cache once per message, and with the CPU's store buffer full
//! behind it, the rest of apply waited (the table alone was about 8% of a follower's CPU at
//! batch-32; a window small enough for the cache ran the whole machine 5-10% faster). Here a slot is the whole entry, so loading a key's home slot before the
//! batch's lookups loads the line its insert writes as well.
//!
//! Open addressing with linear probing, at most 3/4 full. A slot holds 32 bits of the key's
//! hash (the *tag*, which also picks the home slot, so the table can be rebuilt from its
//! slots alone) and the low 32 bits of the send's position; [`EMPTY`] marks a free slot. The
//! window turns a 32-bit position back into its send (see `DedupWindow::live_index`).

/// A free slot (no entry is all ones: [`tag`] is never `u32::MAX`).
const EMPTY: u64 = u64::MAX;

/// Fewest slots of a table that holds anything.
const MIN_SLOTS: usize = 16;

/// The tag of a key's 64-bit hash: its high half, `u32::MAX` excepted.
fn tag(hash: u64) -> u32 {
    ((hash >> 32) as u32).min(u32::MAX - 1)
}

fn slot(tag: u32, pos: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(pos)
}

fn slot_tag(s: u64) -> u32 {
    (s >> 32) as u32
}

/// Positions (low 32 bits) by key hash; equal tags may repeat (the caller's `eq` decides).
#[derive(Clone, Debug, Default)]
pub(super) struct Positions {
    /// A power of two in length, or empty.
    slots: Vec<u64>,
    len: usize,
}

impl Positions {
    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn home(&self, tag: u32) -> usize {
        tag as usize & (self.slots.len() - 1)
    }

    /// Loads the home slot of `hash` into the cache: the line a lookup of it reads first and
    /// an insert of it most likely writes.
    pub(super) fn prefetch(&self, hash: u64) {
        if !self.slots.is_empty() {
            std::hint::black_box(self.slots[self.home(tag(hash))]);
        }
    }

    /// The first position under `hash`'s tag for which `eq` holds.
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let (t, mask) = (tag(hash), self.slots.len() - 1);
        let mut i = self.home(t);
        // Ends: at most 3/4 of the slots are taken, so an empty one follows.
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if slot_tag(s) == t && eq(s as u32) {
                return Some(s as u32);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `pos` under `hash` (the caller knows no equal entry is there).
    pub(super) fn insert(&mut self, hash: u64, pos: u32) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow((self.slots.len() * 2).max(MIN_SLOTS));
        }
        self.place(slot(tag(hash), pos));
        self.len += 1;
    }

    fn place(&mut self, s: u64) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(slot_tag(s));
        while self.slots[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
    }

    /// Keeps the entries whose position `keep` accepts, in place, in one pass over the slots
    /// in order (the window calls it once per as many evictions as it holds sends, so a
    /// random write per kept entry, as into a new table, cost more than its lookups).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        // A free slot: no probe run crosses it, so walking the slots from there meets each
        // run from its start.
        let Some(start) = self.slots.iter().position(|&s| s == EMPTY) else {
            return; // no slots at all (a table with entries always has free ones)
        };
        // A dropped entry frees its slot; a kept one moves to the first free slot from its
        // home, if that comes before its own. The slots before it on the walk are final by
        // then, and it takes one of them or keeps its own, so no run of an entry placed
        // earlier loses a slot. Slots that do not change are not written.
        let mask = self.slots.len() - 1;
        for k in 1..=self.slots.len() {
            let i = (start + k) & mask;
            let s = self.slots[i];
            if s == EMPTY {
                continue;
            }
            if !keep(s as u32) {
                self.slots[i] = EMPTY;
                self.len -= 1;
                continue;
            }
            let mut j = self.home(slot_tag(s));
            while j != i && self.slots[j] != EMPTY {
                j = (j + 1) & mask;
            }
            if j != i {
                self.slots[j] = s;
                self.slots[i] = EMPTY;
            }
        }
    }

    /// Every position held, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .filter(|&&s| s != EMPTY)
            .map(|&s| s as u32)
    }

    /// The entries placed again into `slots` slots.
    fn grow(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; slots]);
        for s in old.into_iter().filter(|&s| s != EMPTY) {
            self.place(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(tag: u32, low: u32) -> u64 {
        (u64::from(tag) << 32) | u64::from(low)
    }

    #[test]
    fn finds_what_was_inserted_through_growth() {
        let mut p = Positions::default();
        assert_eq!(p.find(7, |_| true), None);
        p.prefetch(7); // an empty table: nothing to load, no panic
        for pos in 0..1000u32 {
            p.insert(hash(pos.wrapping_mul(2_654_435_761), pos), pos);
        }
        assert_eq!(p.len(), 1000);
        assert!(p.slots.len() >= 1000 * 4 / 3 && p.slots.len().is_power_of_two());
        for pos in 0..1000u32 {
            let h = hash(pos.wrapping_mul(2_654_435_761), 99);
            assert_eq!(p.find(h, |q| q == pos), Some(pos), "{pos}");
        }
        assert_eq!(p.find(hash(5, 0), |_| false), None);
    }

    #[test]
    fn equal_tags_probe_on_and_eq_decides() {
        let mut p = Positions::default();
        for pos in [10, 11, 12] {
            p.insert(hash(42, pos), pos);
        }
        assert_eq!(p.find(hash(42, 0), |q| q == 12), Some(12));
        assert_eq!(p.find(hash(42, 0), |q| q == 13), None);
        // Another tag with the same home slot is not offered to `eq`.
        let other = 42 + p.slots.len() as u32;
        assert_eq!(p.find(hash(other, 0), |_| true), None);
    }

    #[test]
    fn all_ones_tag_is_kept_apart_from_empty_slots() {
        let mut p = Positions::default();
        p.insert(u64::MAX, u32::MAX);
        assert_eq!(p.find(u64::MAX, |q| q == u32::MAX), Some(u32::MAX));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![u32::MAX]);
    }

    #[test]
    fn retain_closes_gaps_in_runs_that_wrap_around() {
        let mut p = Positions::default();
        p.insert(hash(0, 0), 0); // 16 slots
        let last = p.slots.len() as u32 - 1;
        // A run from the last slot around to the first ones, entries of two homes mixed.
        for pos in 1..=6u32 {
            p.insert(hash(if pos % 2 == 0 { last } else { 0 }, 0), pos);
        }
        for drop in [0, 1, 2, 3] {
            let mut q = p.clone();
            q.retain(|pos| pos % 4 != drop);
            for pos in 0..=6u32 {
                let tag = if pos % 2 == 0 && pos != 0 { last } else { 0 };
                let found = q.find(hash(tag, 0), |x| x == pos);
                assert_eq!(
                    found,
                    (pos % 4 != drop).then_some(pos),
                    "drop {drop}, pos {pos}"
                );
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Inserts (few tags, so runs are long and wrap around) and retains against a plain
        /// list of (tag, position).
        #[test]
        fn table_matches_a_plain_list(
            ops in proptest::collection::vec((0..40u32, 0..5u32), 1..600),
        ) {
            let mut p = Positions::default();
            let mut model: Vec<(u32, u32)> = Vec::new();
            for (next, (t, drop)) in (0u32..).zip(ops) {
                // Tags near the top wrap around the end of the slots.
                let t = if t % 2 == 0 { t } else { u32::MAX - 1 - t };
                if drop == 0 && !model.is_empty() {
                    let cut = next % 3;
                    p.retain(|pos| pos % 3 != cut);
                    model.retain(|&(_, pos)| pos % 3 != cut);
                } else {
                    p.insert(hash(t, next), next);
                    model.push((t, next));
                }
                proptest::prop_assert_eq!(p.len(), model.len());
                for &(t, pos) in &model {
                    proptest::prop_assert_eq!(p.find(hash(t, 0), |q| q == pos), Some(pos));
                }
            }
            let mut held: Vec<u32> = p.iter().collect();
            held.sort_unstable();
            let mut want: Vec<u32> = model.iter().map(|&(_, pos)| pos).collect();
            want.sort_unstable();
            proptest::prop_assert_eq!(held, want);
        }
    }

    #[test]
    fn retain_drops_and_keeps_the_rest_findable() {
        let mut p = Positions::default();
        for pos in 0..200u32 {
            p.insert(hash(pos % 37, pos), pos);
        }
        let slots = p.slots.len();
        p.retain(|pos| pos >= 150);
        assert_eq!((p.len(), p.slots.len()), (50, slots));
        assert_eq!(p.iter().count(), 50);
        for pos in 0..200u32 {
            let found = p.find(hash(pos % 37, 0), |q| q == pos);
            assert_eq!(found, (pos >= 150).then_some(pos), "{pos}");
        }
    }
}
