//! [`DedupWindow`]: the identified sends applied recently, with their original results, in
//! apply order; bounded by age and count ([`DedupParams`], stamped into each entry).

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::hash::RandomState;

use raftmq_raft_log::types::LogId;
use serde::Deserialize;
use serde::Serialize;

use super::positions::Positions;
use super::Identity;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;
use form::WindowRepr;
use runs::Found;
use runs::Runs;
use runs::NO_PRODUCER;

mod check;
mod form;
mod runs;

/// The window's bounds as the leader stamps them into a `SendBatch` entry (so apply reads no
/// node-local setting and every replica evicts alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupParams {
    /// A send is remembered until the leader timestamp of a later identified message is this
    /// much past its own. >= 1.
    pub window_ms: u64,
    /// Most sends remembered; the oldest (in apply order) goes first. >= 1.
    pub max_entries: u32,
}

/// The original result of an identified send, answered to its retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StoredSend {
    /// Queue it was dispatched to.
    pub queue_id: QueueId,
    /// Its queue offset.
    pub queue_offset: QueueOffset,
    /// Physical offset of its record (= message id).
    pub phys_offset: PhysOffset,
    /// Leader timestamp of the message (also its age in the window).
    pub store_timestamp_ms: TimestampMs,
    /// The entry that stored it.
    pub log_id: LogId,
}

/// A remembered send: its result and where its key sits in [`DedupWindow::keys`].
#[derive(Clone, Debug)]
struct Slot {
    /// Absolute position of the key's first byte (see [`DedupWindow::keys_base`]).
    key_at: u64,
    key_len: u32,
    /// The producer of a sequence key in [`DedupWindow::runs`] ([`NO_PRODUCER`]: another
    /// key, in the table alone).
    producer: u32,
    send: StoredSend,
}

/// A key [`DedupWindow::lookup`] did not find: its hash under that window's hasher (if the
/// lookup needed one), its sequence (a producer's key), and where the lookup left it, at the
/// end of the window's keys.
#[derive(Debug)]
pub struct Unseen {
    /// `None`: a sequence key not hashed (its producer had nothing in the table).
    hash: Option<u64>,
    /// A sequence key's prefix length and sequence ([`runs::sequence_of`]).
    seq: Option<(usize, u64)>,
    key_at: u64,
    key_len: u32,
    /// Which lookup of its window made it ([`DedupWindow::lookups`]).
    lookup: u64,
}

/// Recently applied identified sends by dedup key ([`super::dedup_key`]).
///
/// Invariant: each send of `order` (in apply order; a send's *position* is its index plus
/// `first_seq`) is found by its key in exactly one of two indexes (keys are unique: a hit is
/// not remembered again). A sequence key (producer id and sequence) whose sequence is above
/// its producer's last one in `runs` is there ([`runs`]); every other key is in the table
/// `by_key`, which holds the low 32 bits of its position under the key's hash, plus the
/// positions of evicted sends (below `first_seq`, never a match); its live positions are
/// the sends not in runs ([`table_live`](Self::table_live)). Evicted positions are dropped
/// before they are 2^31 positions old, and `max-entries` is at most 10 million, so 32 bits
/// tell live from evicted. The keys are in `keys` in apply order, each send's at its `key_at`.
/// The table holds positions, not keys, so each key is stored once and hashed once on insert.
/// Eviction leaves its position in the table (a random probe per evicted send was most of
/// `expire`'s cost); once evicted positions outnumber the live ones, one sequential pass
/// drops them all.
///
/// The keys live end to end in one string rather than one allocation each, and a lookup
/// builds its key in place at the end of it (the *tentative* key, past `keys_end`), where
/// [`remember`](Self::remember) keeps it: apply remembers and forgets one key per identified
/// message on every node, and a fresh allocation per key cost a cache miss to fill; the
/// checkpoint's copy of the window is a few large copies, not one allocation per send.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "WindowRepr", into = "WindowRepr")]
pub struct DedupWindow {
    order: VecDeque<Slot>,
    runs: Runs,
    by_key: Positions,
    /// `first_seq` at the last pass over `by_key` that dropped the evicted positions.
    swept_at: u64,
    /// Sequence number of `order[0]`.
    first_seq: u64,
    /// The keys of `order`, oldest first, preceded by evicted keys not yet compacted away.
    keys: String,
    /// Absolute position of `keys`' first byte (grows as evicted keys are dropped).
    keys_base: u64,
    /// Absolute end of the newest remembered key; bytes past it are a lookup's tentative key.
    keys_end: u64,
    /// Lookups so far: only the last one's [`Unseen`] still has its key in place.
    lookups: u64,
    /// SipHash with this window's random keys: keys are client input.
    hasher: RandomState,
}

/// Evicted key bytes are dropped from the front of [`DedupWindow::keys`] once they are at
/// least this many and at least as many as the live ones (amortised: each live byte moves
/// about once per window's worth of keys).
const COMPACT_MIN_BYTES: usize = 64 << 10;

impl PartialEq for DedupWindow {
    fn eq(&self, other: &Self) -> bool {
        self.order.len() == other.order.len()
            && (0..self.order.len())
                .all(|i| self.order[i].send == other.order[i].send && self.key(i) == other.key(i))
    }
}

impl Eq for DedupWindow {}

impl DedupWindow {
    /// Number of sends remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True if nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The original result of the send with `key`, if remembered.
    pub fn get(&self, key: &str) -> Option<&StoredSend> {
        let at = self.find(key, runs::sequence_of(key), None).0?;
        Some(&self.order[at].send)
    }

    /// The original result of the send with `key` if remembered, else where the key waits
    /// for [`remember`](Self::remember) once the send is dispatched (apply hashes and copies
    /// each identified message's key once).
    pub fn lookup(&mut self, key: &str) -> Result<&StoredSend, Unseen> {
        self.lookup_with(|keys| keys.push_str(key))
    }

    /// [`lookup`](Self::lookup) of the key `write` appends to the string it is given (apply:
    /// [`Identity::write_key`](super::Identity::write_key)).
    pub fn lookup_with(&mut self, write: impl FnOnce(&mut String)) -> Result<&StoredSend, Unseen> {
        self.lookup_hashed(None, write)
    }

    /// The hash of the key `write` appends to `scratch` (cleared first), for
    /// [`prefetch`](Self::prefetch) and [`lookup_hashed`](Self::lookup_hashed).
    pub fn hash_with(&self, scratch: &mut String, write: impl FnOnce(&mut String)) -> u64 {
        scratch.clear();
        write(scratch);
        self.hasher.hash_one(scratch.as_str())
    }

    /// Loads the table's home slot of each of `hashes` into the cache. Apply calls it for
    /// the identified messages of a batch before it looks any of them up: the lookups, and
    /// the inserts that remember the sends, then find their lines cached, and the misses,
    /// one per message on every node, overlap instead of coming one after another.
    pub fn prefetch(&self, hashes: impl Iterator<Item = u64>) {
        for hash in hashes {
            self.by_key.prefetch(hash);
        }
    }

    /// [`lookup_with`](Self::lookup_with) with the key's hash computed already by
    /// [`hash_with`](Self::hash_with) of this window (`None`: hashed here).
    pub fn lookup_hashed(
        &mut self,
        hash: Option<u64>,
        write: impl FnOnce(&mut String),
    ) -> Result<&StoredSend, Unseen> {
        self.lookup_in_place(hash, write, runs::sequence_of)
    }

    /// [`lookup_hashed`](Self::lookup_hashed) of `identity`'s key for a message of `topic`
    /// (apply's: the identity knows its sequence, so the key is not parsed for it).
    pub fn lookup_identity(
        &mut self,
        hash: Option<u64>,
        identity: &Identity<'_>,
        topic: &str,
    ) -> Result<&StoredSend, Unseen> {
        let seq = |key: &str| {
            let seq = identity.sequence(topic);
            debug_assert_eq!(seq, runs::sequence_of(key), "{key}");
            seq
        };
        self.lookup_in_place(hash, |keys| identity.write_key(keys, topic), seq)
    }

    /// The lookup of the key `write` appends, `seq` its [`runs::sequence_of`].
    fn lookup_in_place(
        &mut self,
        hash: Option<u64>,
        write: impl FnOnce(&mut String),
        seq: impl FnOnce(&str) -> Option<(usize, u64)>,
    ) -> Result<&StoredSend, Unseen> {
        // A tentative key nobody remembered (a hit, or a send not dispatched) goes.
        // `lookup` is kept in a register for the `Unseen` below: read back from `self` next
        // to `keys_end`, it was one 16-byte load over this 8-byte store, which the CPU
        // cannot forward, so it waited for every older store to reach the cache (4% of a
        // follower's CPU at batch-32; see `push_decimal` in `identity`).
        let lookup = self.lookups + 1;
        self.lookups = lookup;
        let end = self.index_in_keys(self.keys_end);
        self.keys.truncate(end);
        write(&mut self.keys);
        let key = &self.keys[end..];
        if let Some(h) = hash {
            debug_assert_eq!(h, self.hasher.hash_one(key), "hashed by this window");
        }
        let seq = seq(key);
        match self.find(key, seq, hash) {
            (Some(at), _) => Ok(&self.order[at].send),
            (None, hash) => Err(Unseen {
                hash,
                seq,
                key_at: self.keys_end,
                key_len: u32::try_from(key.len()).expect("a key joins 16-bit-length strings"),
                lookup,
            }),
        }
    }

    /// Remembers a send [`lookup`](Self::lookup) did not find, just dispatched. The window
    /// did not change in between but for [`expire`](Self::expire) (same hasher, and the key
    /// still where the lookup left it); else (a caller's bug) nothing is remembered and the
    /// error says why.
    pub fn remember(&mut self, unseen: Unseen, send: StoredSend) {
        let tail = self.keys_base + self.keys.len() as u64;
        let in_place =
            unseen.key_at == self.keys_end && unseen.key_at + u64::from(unseen.key_len) == tail;
        if unseen.lookup != self.lookups || !in_place {
            tracing::error!(
                lookup = unseen.lookup,
                last_lookup = self.lookups,
                "dedup window: the send to remember is not from the last lookup; not remembered"
            );
            return;
        }
        let pos = self.first_seq + self.order.len() as u64;
        let key = &self.keys[self.index_in_keys(unseen.key_at)..];
        let (producer, in_run) = match split_sequence(key, unseen.seq) {
            Some((prefix, seq)) => self.runs.place(prefix, seq, pos),
            None => (NO_PRODUCER, false),
        };
        if !in_run {
            let hash = (unseen.hash).unwrap_or_else(|| self.hasher.hash_one(key));
            // The low 32 bits (see the type's invariant).
            self.by_key.insert(hash, pos as u32);
        }
        self.order.push_back(Slot {
            key_at: unseen.key_at,
            key_len: unseen.key_len,
            producer,
            send,
        });
        self.keys_end = tail;
    }

    /// Forgets the sends older than `params.window_ms` before `now_ms` (a leader timestamp);
    /// then, when full, the oldest ones until one more fits. Apply calls it before each
    /// identified message (deterministic: only entry bytes decide).
    pub fn expire(&mut self, now_ms: TimestampMs, params: DedupParams) {
        let max = params.max_entries.max(1) as usize;
        while let Some(front) = self.order.front() {
            let old = front
                .send
                .store_timestamp_ms
                .saturating_add(params.window_ms)
                <= now_ms;
            if !old && self.order.len() < max {
                break;
            }
            self.pop_front();
        }
    }

    /// Remembers a send with `key` unless one is remembered already (then that one stays).
    pub fn insert(&mut self, key: &str, send: StoredSend) {
        if let Err(unseen) = self.lookup(key) {
            self.remember(unseen, send);
        }
    }

    /// Forgets every send of `topic` (the topic was deleted: its offsets are gone).
    pub fn remove_topic(&mut self, topic: &str) {
        let before = self.order.len();
        let kept = (self.remembered())
            .filter(|m| key_topic(&m.key) != Some(topic))
            .collect();
        *self = DedupWindow::from(WindowRepr(kept));
        tracing::debug!(
            topic,
            forgotten = before - self.order.len(),
            "dedup window: topic deleted"
        );
    }

    /// The key of `order[i]`.
    fn key(&self, i: usize) -> &str {
        let s = &self.order[i];
        let at = self.index_in_keys(s.key_at);
        &self.keys[at..at + s.key_len as usize]
    }

    /// Index in `keys` of the absolute key position `at` (not below `keys_base`).
    fn index_in_keys(&self, at: u64) -> usize {
        usize::try_from(at - self.keys_base).expect("keys hold what a window remembers")
    }

    /// Index in `order` of the send with `key` (`seq`: its [`runs::sequence_of`]), and the
    /// key's hash if the table was probed (`hash`: computed already).
    fn find(
        &self,
        key: &str,
        seq: Option<(usize, u64)>,
        hash: Option<u64>,
    ) -> (Option<usize>, Option<u64>) {
        if let Some((prefix, seq)) = split_sequence(key, seq) {
            match self.runs.find(prefix, seq) {
                Found::At(pos) => {
                    let i = pos.wrapping_sub(self.first_seq);
                    let i = usize::try_from(i).ok().filter(|&i| i < self.order.len());
                    debug_assert!(i.is_some(), "a run's send at {pos} is live");
                    return (i, hash);
                }
                Found::Missing { in_table: false } => return (None, hash),
                Found::Missing { in_table: true } => {}
            }
        }
        let hash = hash.unwrap_or_else(|| self.hasher.hash_one(key));
        let pos = self.by_key.find(hash, |pos| {
            self.live_index(pos).is_some_and(|i| self.key(i) == key)
        });
        (pos.and_then(|pos| self.live_index(pos)), Some(hash))
    }

    /// Index in `order` of the send at 32-bit position `pos`, or `None` for an evicted one.
    fn live_index(&self, pos: u32) -> Option<usize> {
        live_index(self.first_seq, self.order.len(), pos)
    }

    fn pop_front(&mut self) {
        let Some(slot) = self.order.pop_front() else {
            return;
        };
        let pos = self.first_seq;
        self.first_seq += 1;
        if slot.producer != NO_PRODUCER {
            // A send not in its producer's runs is in the table: nothing to do there.
            self.runs.evict(slot.producer, pos);
        }
        // Amortised: a pass over the table per as many evictions as it has live sends, and
        // before an evicted position is 2^31 positions old (see the type's invariant).
        let evicted = self.evicted_positions();
        if evicted > self.table_live().max(64) || (evicted > 0 && pos - self.swept_at >= 1 << 31) {
            let (first, len) = (self.first_seq, self.order.len());
            self.by_key
                .retain(|pos| live_index(first, len, pos).is_some());
            self.swept_at = self.first_seq;
        }
        self.compact_keys();
    }

    /// Drops the evicted keys from the front of `keys` once they are many (see
    /// [`COMPACT_MIN_BYTES`]).
    fn compact_keys(&mut self) {
        let live_at = self.order.front().map_or(self.keys_end, |s| s.key_at);
        let dead = self.index_in_keys(live_at);
        if dead >= COMPACT_MIN_BYTES && dead >= self.keys.len() - dead {
            self.keys.drain(..dead);
            self.keys_base = live_at;
        }
    }

    /// Bytes in the key buffer, evicted and tentative keys included (tests).
    #[cfg(test)]
    pub(crate) fn keys_len(&self) -> usize {
        self.keys.len()
    }

    /// Positions in the table, live and evicted (tests).
    #[cfg(test)]
    pub(crate) fn table_len(&self) -> usize {
        self.by_key.len()
    }

    /// Positions in `by_key` of sends already evicted.
    fn evicted_positions(&self) -> usize {
        self.by_key.len().saturating_sub(self.table_live())
    }

    /// Live sends in the table: every send not in a run is there.
    fn table_live(&self) -> usize {
        self.order.len().saturating_sub(self.runs.len())
    }
}

/// Index in an `order` of `len` sends, the first at position `first`, of the send at 32-bit
/// position `pos` (`None`: evicted, see the [`DedupWindow`] invariant).
fn live_index(first: u64, len: usize, pos: u32) -> Option<usize> {
    let i = pos.wrapping_sub(first as u32) as usize;
    (i < len).then_some(i)
}

/// The topic part of a dedup key (`<kind><len>:<topic>...`).
fn key_topic(key: &str) -> Option<&str> {
    key.get(runs::counted(key.as_bytes(), 1)?)
}

/// A sequence key's producer prefix and sequence, from its [`runs::sequence_of`] (a prefix
/// length inside a character, which only a caller's bug can give: `None`, the table's key).
fn split_sequence(key: &str, seq: Option<(usize, u64)>) -> Option<(&str, u64)> {
    let (len, seq) = seq?;
    Some((key.get(..len)?, seq))
}
