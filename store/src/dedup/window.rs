//! [`DedupWindow`]: the identified sends applied recently, with their original results, in
//! apply order; bounded by age and count ([`DedupParams`], stamped into each entry).

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::hash::RandomState;

use hashbrown::HashTable;

use raftmq_raft_log::types::LogId;
use serde::Deserialize;
use serde::Serialize;

use crate::codec::Reader;
use crate::codec::Writer;
use crate::error::Result;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::types::TimestampMs;

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

/// One remembered send (serde form: the key inline).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Remembered {
    key: Box<str>,
    #[serde(flatten)]
    send: StoredSend,
}

/// A remembered send with the hash of its key under its window's hasher (node-local: not
/// saved, not compared).
#[derive(Clone, Debug)]
struct Slot {
    hash: u64,
    m: Remembered,
}

/// A key [`DedupWindow::lookup`] did not find, with its hash under that window's hasher.
#[derive(Debug)]
pub struct Unseen {
    key: String,
    hash: u64,
}

/// The serde form of the window: its sends, oldest first.
#[derive(Serialize, Deserialize)]
struct WindowRepr(Vec<Remembered>);

/// Recently applied identified sends by dedup key ([`super::dedup_key`]).
///
/// Invariant: `by_key` holds one `(hash, seq)` per send of `order`, `seq` its position
/// counted from `first_seq` and `hash` its `Slot::hash` (keys are unique: a hit is not
/// remembered again), plus the positions of evicted sends (`seq < first_seq`, never a
/// match); `order` is in apply order. The table holds positions, not keys, so each send's
/// key is stored once and hashed once on insert. Eviction leaves its position in the table
/// (a random probe per evicted send was most of `expire`'s cost: apply looks up, remembers
/// and evicts one send per identified message on every node); once evicted positions
/// outnumber the live ones, one sequential pass drops them all.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "WindowRepr", into = "WindowRepr")]
pub struct DedupWindow {
    order: VecDeque<Slot>,
    by_key: HashTable<(u64, u64)>,
    /// Sequence number of `order[0]`.
    first_seq: u64,
    /// SipHash with this window's random keys: keys are client input.
    hasher: RandomState,
}

impl PartialEq for DedupWindow {
    fn eq(&self, other: &Self) -> bool {
        self.order.len() == other.order.len()
            && self.order.iter().zip(&other.order).all(|(a, b)| a.m == b.m)
    }
}

impl Eq for DedupWindow {}

impl From<WindowRepr> for DedupWindow {
    fn from(r: WindowRepr) -> Self {
        let mut w = DedupWindow::default();
        for m in r.0 {
            // A key twice (a hand-edited file): the first stays, as apply would keep it.
            if w.get(&m.key).is_none() {
                w.push(m);
            }
        }
        w
    }
}

impl From<DedupWindow> for WindowRepr {
    fn from(w: DedupWindow) -> Self {
        WindowRepr(w.order.into_iter().map(|s| s.m).collect())
    }
}

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
        let at = self.position(self.hasher.hash_one(key), key)?;
        Some(&self.order[at].m.send)
    }

    /// The original result of the send with `key` if remembered, else the key with its hash
    /// to [`remember`](Self::remember) once the send is dispatched (apply hashes each
    /// identified message once).
    pub fn lookup(&self, key: String) -> Result<&StoredSend, Unseen> {
        let hash = self.hasher.hash_one(key.as_str());
        match self.position(hash, &key) {
            Some(at) => Ok(&self.order[at].m.send),
            None => Err(Unseen { key, hash }),
        }
    }

    /// Remembers a send [`lookup`](Self::lookup) did not find, just dispatched. The window
    /// did not change in between but for [`expire`](Self::expire) (same hasher).
    pub fn remember(&mut self, unseen: Unseen, send: StoredSend) {
        debug_assert_eq!(unseen.hash, self.hasher.hash_one(unseen.key.as_str()));
        debug_assert!(
            self.get(&unseen.key).is_none(),
            "{} remembered twice",
            unseen.key
        );
        self.push_hashed(
            unseen.hash,
            Remembered {
                key: unseen.key.into_boxed_str(),
                send,
            },
        );
    }

    /// Forgets the sends older than `params.window_ms` before `now_ms` (a leader timestamp);
    /// then, when full, the oldest ones until one more fits. Apply calls it before each
    /// identified message (deterministic: only entry bytes decide).
    pub fn expire(&mut self, now_ms: TimestampMs, params: DedupParams) {
        let max = params.max_entries.max(1) as usize;
        while let Some(front) = self.order.front() {
            let old = front
                .m
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

    /// Remembers a send just dispatched. The caller looked `key` up first (a miss).
    pub fn insert(&mut self, key: String, send: StoredSend) {
        let hash = self.hasher.hash_one(key.as_str());
        self.remember(Unseen { key, hash }, send);
    }

    /// Forgets every send of `topic` (the topic was deleted: its offsets are gone).
    pub fn remove_topic(&mut self, topic: &str) {
        let before = self.order.len();
        let old = std::mem::take(&mut self.order);
        *self = DedupWindow::from(WindowRepr(
            old.into_iter()
                .map(|s| s.m)
                .filter(|m| key_topic(&m.key) != Some(topic))
                .collect(),
        ));
        tracing::debug!(
            topic,
            forgotten = before - self.order.len(),
            "dedup window: topic deleted"
        );
    }

    /// Writes the sends, oldest first, in the dispatch checkpoint's binary form
    /// ([`crate::state::checkpoint`]): their count (`u64`), then per send its key
    /// ([`Writer::blob32`], UTF-8), queue id (`u32`), queue offset, physical offset, store
    /// timestamp, and the term and index of its entry (`u64` each). Streams through `out`
    /// one send at a time (the window is megabytes: no buffer of it all).
    pub(crate) fn write_binary(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(&(self.order.len() as u64).to_le_bytes())?;
        let mut scratch = Vec::with_capacity(128);
        for slot in &self.order {
            scratch.clear();
            let mut w = Writer::new(&mut scratch);
            let (m, s) = (&slot.m, &slot.m.send);
            w.blob32("dedup key", m.key.as_bytes())
                .map_err(std::io::Error::other)?;
            w.u32(s.queue_id.get());
            w.u64(s.queue_offset.get());
            w.u64(s.phys_offset.get());
            w.u64(s.store_timestamp_ms);
            w.u64(s.log_id.leader_id.term);
            w.u64(s.log_id.index);
            out.write_all(&scratch)?;
        }
        Ok(())
    }

    /// Reads a window [`write_binary`](Self::write_binary) wrote (a key twice, only a damaged
    /// file has that: as in the serde form, the first stays).
    pub(crate) fn read_binary(r: &mut Reader<'_>) -> Result<DedupWindow> {
        /// Bytes of a send with an empty key.
        const MIN_SEND_BYTES: usize = 4 + 4 + 5 * 8;
        let count = r.u64("dedup window send count")?;
        // The count is file input: reserve no more than the bytes left can hold.
        let fit = r.remaining() / MIN_SEND_BYTES;
        let mut sends = Vec::with_capacity(usize::try_from(count).unwrap_or(usize::MAX).min(fit));
        for _ in 0..count {
            let at = r.pos();
            let key = std::str::from_utf8(r.blob32("dedup key")?)
                .map_err(|e| r.corrupt(at, format!("dedup key is not UTF-8: {e}")))?;
            let send = StoredSend {
                queue_id: QueueId::new(r.u32("dedup queue id")?),
                queue_offset: QueueOffset::new(r.u64("dedup queue offset")?),
                phys_offset: PhysOffset::new(r.u64("dedup physical offset")?),
                store_timestamp_ms: r.u64("dedup store timestamp")?,
                log_id: LogId::new_term_index(r.u64("dedup term")?, r.u64("dedup index")?),
            };
            sends.push(Remembered {
                key: key.into(),
                send,
            });
        }
        Ok(DedupWindow::from(WindowRepr(sends)))
    }

    /// Checks the invariant cheaply (see the type docs): as many keys as sends, and the
    /// oldest and newest sends at their positions. Apply runs it in debug builds.
    pub fn validate(&self) -> crate::error::Result<()> {
        if self.by_key.len() < self.order.len() {
            return Err(crate::error::StoreError::invalid(format!(
                "dedup window: {} keys for {} sends",
                self.by_key.len(),
                self.order.len()
            )));
        }
        let ends = [0, self.order.len().saturating_sub(1)];
        self.check_positions(ends.into_iter().filter(|&i| i < self.order.len()))
    }

    /// [`validate`](Self::validate) for every send, and exactly one live position per send
    /// (O(n): tests and tools).
    pub fn validate_all(&self) -> crate::error::Result<()> {
        self.validate()?;
        let live = (self.by_key.iter())
            .filter(|&&(_, seq)| seq >= self.first_seq)
            .count();
        if live != self.order.len() {
            return Err(crate::error::StoreError::invalid(format!(
                "dedup window: {live} live keys for {} sends",
                self.order.len()
            )));
        }
        self.check_positions(0..self.order.len())
    }

    fn check_positions(&self, at: impl Iterator<Item = usize>) -> crate::error::Result<()> {
        for i in at {
            let s = &self.order[i];
            let hash = self.hasher.hash_one(&*s.m.key);
            if s.hash != hash || self.position(hash, &s.m.key) != Some(i) {
                return Err(crate::error::StoreError::invalid(format!(
                    "dedup window: key {} is not at position {i}",
                    s.m.key
                )));
            }
        }
        Ok(())
    }

    /// Index in `order` of the send with `key` (of hash `hash`).
    fn position(&self, hash: u64, key: &str) -> Option<usize> {
        let (order, first) = (&self.order, self.first_seq);
        let &(_, seq) = self.by_key.find(hash, |&(h, seq)| {
            h == hash && seq >= first && *order[index_of(first, seq)].m.key == *key
        })?;
        Some(index_of(first, seq))
    }

    fn push(&mut self, m: Remembered) {
        self.push_hashed(self.hasher.hash_one(&*m.key), m);
    }

    fn push_hashed(&mut self, hash: u64, m: Remembered) {
        let seq = self.first_seq + self.order.len() as u64;
        self.order.push_back(Slot { hash, m });
        self.by_key.insert_unique(hash, (hash, seq), |&(h, _)| h);
    }

    fn pop_front(&mut self) {
        if self.order.pop_front().is_some() {
            self.first_seq += 1;
            // Amortised: a pass over the table per as many evictions as it has live sends.
            if self.evicted_positions() > self.order.len().max(64) {
                let first = self.first_seq;
                self.by_key.retain(|&mut (_, seq)| seq >= first);
            }
        }
    }

    /// Positions in the table, live and evicted (tests).
    #[cfg(test)]
    pub(crate) fn table_len(&self) -> usize {
        self.by_key.len()
    }

    /// Positions in `by_key` of sends already evicted.
    fn evicted_positions(&self) -> usize {
        self.by_key.len().saturating_sub(self.order.len())
    }
}

/// Index in `order` of the send at position `seq >= first`, `order[0]` being at `first`.
fn index_of(first: u64, seq: u64) -> usize {
    usize::try_from(seq - first).expect("by_key holds positions of order")
}

/// The topic part of a dedup key (`<kind><len>:<topic>...`).
fn key_topic(key: &str) -> Option<&str> {
    let rest = key.get(1..)?;
    let (len, rest) = rest.split_once(':')?;
    rest.get(..len.parse::<usize>().ok()?)
}
