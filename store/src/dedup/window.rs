//! [`DedupWindow`]: the identified sends applied recently, with their original results, in
//! apply order; bounded by age and count ([`DedupParams`], stamped into each entry).

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

use raftmq_raft_log::types::LogId;
use serde::Deserialize;
use serde::Serialize;

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
    #[serde(with = "arc_str")]
    key: Arc<str>,
    #[serde(flatten)]
    send: StoredSend,
}

/// The serde form of the window: its sends, oldest first.
#[derive(Serialize, Deserialize)]
struct WindowRepr(Vec<Remembered>);

/// Recently applied identified sends by dedup key ([`super::dedup_key`]).
///
/// Invariant: `by_key` maps exactly the keys of `order`, each to its position counted from
/// `first_seq` (keys are unique: a hit is not remembered again); `order` is in apply order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "WindowRepr", into = "WindowRepr")]
pub struct DedupWindow {
    order: VecDeque<Remembered>,
    by_key: HashMap<Arc<str>, u64>,
    /// Sequence number of `order[0]`.
    first_seq: u64,
}

impl PartialEq for DedupWindow {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
    }
}

impl Eq for DedupWindow {}

impl From<WindowRepr> for DedupWindow {
    fn from(r: WindowRepr) -> Self {
        let mut w = DedupWindow::default();
        for m in r.0 {
            // A key twice (a hand-edited file): the first stays, as apply would keep it.
            if !w.by_key.contains_key(&m.key) {
                w.push(m);
            }
        }
        w
    }
}

impl From<DedupWindow> for WindowRepr {
    fn from(w: DedupWindow) -> Self {
        WindowRepr(w.order.into())
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
        let seq = *self.by_key.get(key)?;
        let at = usize::try_from(seq - self.first_seq).expect("by_key holds positions of order");
        Some(&self.order[at].send)
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

    /// Remembers a send just dispatched. The caller looked `key` up first (a miss).
    pub fn insert(&mut self, key: String, send: StoredSend) {
        debug_assert!(
            !self.by_key.contains_key(key.as_str()),
            "{key} remembered twice"
        );
        self.push(Remembered {
            key: Arc::from(key),
            send,
        });
    }

    /// Forgets every send of `topic` (the topic was deleted: its offsets are gone).
    pub fn remove_topic(&mut self, topic: &str) {
        let before = self.order.len();
        let old = std::mem::take(&mut self.order);
        *self = DedupWindow::from(WindowRepr(
            old.into_iter()
                .filter(|m| key_topic(&m.key) != Some(topic))
                .collect(),
        ));
        tracing::debug!(
            topic,
            forgotten = before - self.order.len(),
            "dedup window: topic deleted"
        );
    }

    /// Checks the invariant cheaply (see the type docs): as many keys as sends, and the
    /// oldest and newest sends at their positions. Apply runs it in debug builds.
    pub fn validate(&self) -> crate::error::Result<()> {
        if self.by_key.len() != self.order.len() {
            return Err(crate::error::StoreError::invalid(format!(
                "dedup window: {} keys for {} sends",
                self.by_key.len(),
                self.order.len()
            )));
        }
        let ends = [0, self.order.len().saturating_sub(1)];
        self.check_positions(ends.into_iter().filter(|&i| i < self.order.len()))
    }

    /// [`validate`](Self::validate) for every send (O(n): tests and tools).
    pub fn validate_all(&self) -> crate::error::Result<()> {
        self.validate()?;
        self.check_positions(0..self.order.len())
    }

    fn check_positions(&self, at: impl Iterator<Item = usize>) -> crate::error::Result<()> {
        for i in at {
            let m = &self.order[i];
            if self.by_key.get(&m.key) != Some(&(self.first_seq + i as u64)) {
                return Err(crate::error::StoreError::invalid(format!(
                    "dedup window: key {} is not at position {i}",
                    m.key
                )));
            }
        }
        Ok(())
    }

    fn push(&mut self, m: Remembered) {
        let seq = self.first_seq + self.order.len() as u64;
        self.by_key.insert(m.key.clone(), seq);
        self.order.push_back(m);
    }

    fn pop_front(&mut self) {
        if let Some(m) = self.order.pop_front() {
            self.by_key.remove(&m.key);
            self.first_seq += 1;
        }
    }
}

/// The topic part of a dedup key (`<kind><len>:<topic>...`).
fn key_topic(key: &str) -> Option<&str> {
    let rest = key.get(1..)?;
    let (len, rest) = rest.split_once(':')?;
    rest.get(..len.parse::<usize>().ok()?)
}

/// Serde of an `Arc<str>` as a string (serde's `rc` feature is off in the workspace).
mod arc_str {
    use std::sync::Arc;

    use serde::Deserialize;
    use serde::Deserializer;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(d).map(Arc::from)
    }
}
