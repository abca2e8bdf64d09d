//! [`Runs`]: the [`DedupWindow`](super::DedupWindow)'s index of sequence keys by runs.
//!
//! A producer (a topic and a producer id: the key up to its sequence) sends sequence after
//! sequence, and apply remembers each at the next position of the window. So per producer
//! the remembered sends fall into *runs*: consecutive sequences at consecutive positions. A
//! batch of 32 from one producer is one run, found by one comparison of the producer's key
//! with the last producer's and answered by arithmetic: no hash of the key, no probe of the
//! window's table at a random place, and eviction shrinks a run from its front. Before, every
//! identified message was hashed, probed for, inserted and later swept out of a table of
//! megabytes on every node (about 12% of a leader's and 19% of a follower's CPU at
//! batch-32).
//!
//! A send joins the runs only above its producer's last sequence in them, so each
//! producer's runs are in sequence order and in position order alike. A sequence at or below
//! that (a client's sends applied out of order, or a retry of one already evicted) goes to the
//! window's table, as a client message id does; the producer counts those, and a lookup
//! probes the table only while it has any.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::dedup::identity::canonical_u64;

/// The producer of a send whose key is not a sequence key (its key is in the table alone).
pub(super) const NO_PRODUCER: u32 = u32::MAX;

/// Consecutive sequences remembered at consecutive positions.
#[derive(Clone, Copy, Debug)]
struct Run {
    first_seq: u64,
    /// Absolute position of the first send (see `DedupWindow::first_seq`).
    first_pos: u64,
    /// >= 1.
    len: u64,
}

impl Run {
    fn last_seq(&self) -> u64 {
        self.first_seq + (self.len - 1)
    }
}

#[derive(Clone, Debug)]
struct Producer {
    /// The key up to the sequence: kind, topic and producer id (shared with `by_prefix`).
    prefix: Arc<str>,
    /// Oldest first: in position order and in sequence order.
    runs: VecDeque<Run>,
    /// Live sends of this producer in the window's table.
    in_table: usize,
}

/// Where [`Runs::find`] found a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// In a run, at this absolute position.
    At(u64),
    /// In no run; the table may hold it only if `in_table` (the producer has sends there).
    Missing { in_table: bool },
}

/// The runs of every producer with a send in the window.
#[derive(Clone, Debug, Default)]
pub(super) struct Runs {
    /// SipHash with random keys: prefixes are client input.
    by_prefix: HashMap<Arc<str>, u32>,
    /// Indexed by producer number; `None`: free, listed in `free`.
    producers: Vec<Option<Producer>>,
    free: Vec<u32>,
    /// Sends in runs.
    len: usize,
    /// The producer found or placed last: a batch's messages mostly share one, and a
    /// comparison with its prefix spares the hash.
    last: Memo,
}

/// A producer number remembered by lookups through `&self` (an atomic only so the window
/// stays `Sync`: one thread applies, and a relaxed load or store is a plain move).
#[derive(Debug, Default)]
struct Memo(AtomicU32);

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo(AtomicU32::new(self.get()))
    }
}

impl Memo {
    fn get(&self) -> u32 {
        self.0.load(Relaxed)
    }

    fn set(&self, id: u32) {
        self.0.store(id, Relaxed);
    }
}

impl Runs {
    /// Sends in runs.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Where the send of `prefix` with sequence `seq` is, if in a run.
    pub(super) fn find(&self, prefix: &str, seq: u64) -> Found {
        let Some(p) = self.producer_of(prefix).map(|id| self.get(id)) else {
            return Found::Missing { in_table: false };
        };
        let in_run = match p.runs.back() {
            // The usual case: the producer's next sequence.
            Some(last) if last.last_seq() < seq => None,
            Some(_) => {
                let i = p.runs.partition_point(|r| r.first_seq <= seq);
                let r = i.checked_sub(1).map(|i| p.runs[i]);
                r.filter(|r| seq - r.first_seq < r.len)
                    .map(|r| r.first_pos + (seq - r.first_seq))
            }
            None => None,
        };
        match in_run {
            Some(pos) => Found::At(pos),
            None => Found::Missing {
                in_table: p.in_table > 0,
            },
        }
    }

    /// Places a send [`find`](Self::find) did not find (nor the table), remembered at `pos`,
    /// past every position held: in its producer's runs if its sequence is above their last
    /// one, else it goes to the table (`false`; the producer counts it). Returns the
    /// producer's number, for [`evict`](Self::evict).
    pub(super) fn place(&mut self, prefix: &str, seq: u64, pos: u64) -> (u32, bool) {
        let id = match self.producer_of(prefix) {
            Some(id) => id,
            None => self.add(prefix),
        };
        let p = self.get_mut(id);
        match p.runs.back_mut() {
            Some(last) if last.last_seq() >= seq => {
                p.in_table += 1;
                return (id, false);
            }
            Some(last) if seq - last.first_seq == last.len && pos - last.first_pos == last.len => {
                last.len += 1;
            }
            _ => p.runs.push_back(Run {
                first_seq: seq,
                first_pos: pos,
                len: 1,
            }),
        }
        self.len += 1;
        (id, true)
    }

    /// Forgets the send of producer `id` at `pos`, the window's oldest: the first of the
    /// producer's first run, or else one of its sends in the table (`false`: the table's
    /// sweep drops its position). A producer with nothing left is dropped.
    pub(super) fn evict(&mut self, id: u32, pos: u64) -> bool {
        let Some(Some(p)) = self.producers.get_mut(id as usize) else {
            debug_assert!(false, "dedup runs: evicted send of unknown producer {id}");
            return false;
        };
        let in_run = match p.runs.front_mut() {
            Some(r) if r.first_pos == pos => {
                if r.len == 1 {
                    p.runs.pop_front();
                } else {
                    (r.first_seq, r.first_pos, r.len) = (r.first_seq + 1, pos + 1, r.len - 1);
                }
                true
            }
            _ => {
                debug_assert!(p.in_table > 0, "dedup runs: evicted send in no run");
                p.in_table = p.in_table.saturating_sub(1);
                false
            }
        };
        if p.runs.is_empty() && p.in_table == 0 {
            self.remove(id);
        }
        self.len -= usize::from(in_run);
        in_run
    }

    /// Checks every run (O(sends)): within a producer in sequence and position order,
    /// `len` their sum; `table` (the live sends in the window's table) is at least the
    /// producers' counts there; `live` (a position range) holds every run.
    pub(super) fn check(&self, table: usize, live: std::ops::Range<u64>) -> Result<(), String> {
        let (mut sum, mut in_table) = (0, 0);
        for (id, p) in self.producers.iter().enumerate() {
            let Some(p) = p else { continue };
            if self.by_prefix.get(&*p.prefix) != Some(&(id as u32)) {
                return Err(format!("producer {:?} is not indexed", p.prefix));
            }
            if p.runs.is_empty() && p.in_table == 0 {
                return Err(format!("producer {:?} holds nothing", p.prefix));
            }
            let in_order = p
                .runs
                .iter()
                .zip(p.runs.iter().skip(1))
                .all(|(a, b)| a.last_seq() < b.first_seq && a.first_pos + a.len <= b.first_pos);
            let held =
                |r: &Run| r.len > 0 && live.start <= r.first_pos && r.first_pos + r.len <= live.end;
            if !in_order || !p.runs.iter().all(held) {
                return Err(format!("producer {:?}: runs {:?}", p.prefix, p.runs));
            }
            sum += p.runs.iter().map(|r| r.len as usize).sum::<usize>();
            in_table += p.in_table;
        }
        let indexed = self.by_prefix.len() == self.producers.iter().flatten().count();
        if sum != self.len || in_table > table || !indexed {
            return Err(format!(
                "{sum} sends in runs (counted {}), {in_table} in the table of {table} live, \
                 {} producers indexed",
                self.len,
                self.by_prefix.len()
            ));
        }
        Ok(())
    }

    /// The prefix of producer `id` (a live send's).
    pub(super) fn prefix(&self, id: u32) -> Option<&str> {
        let p = self.producers.get(id as usize)?.as_ref()?;
        Some(&p.prefix)
    }

    fn producer_of(&self, prefix: &str) -> Option<u32> {
        let last = self.last.get();
        if self.prefix(last) == Some(prefix) {
            return Some(last);
        }
        let id = *self.by_prefix.get(prefix)?;
        self.last.set(id);
        Some(id)
    }

    fn add(&mut self, prefix: &str) -> u32 {
        let prefix: Arc<str> = prefix.into();
        // Room for one run: a producer with one send costs about 150 bytes here.
        let p = Producer {
            prefix: Arc::clone(&prefix),
            runs: VecDeque::with_capacity(1),
            in_table: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.producers[id as usize] = Some(p);
                id
            }
            None => {
                self.producers.push(Some(p));
                // At most one producer a send, and a window holds far fewer than 2^32 sends.
                u32::try_from(self.producers.len() - 1).expect("fewer producers than sends")
            }
        };
        self.by_prefix.insert(prefix, id);
        self.last.set(id);
        id
    }

    fn remove(&mut self, id: u32) {
        if let Some(p) = self.producers[id as usize].take() {
            self.by_prefix.remove(&p.prefix);
            self.free.push(id);
        }
    }

    fn get(&self, id: u32) -> &Producer {
        self.producers[id as usize]
            .as_ref()
            .expect("an indexed producer")
    }

    fn get_mut(&mut self, id: u32) -> &mut Producer {
        self.producers[id as usize]
            .as_mut()
            .expect("an indexed producer")
    }
}

/// The producer prefix's length and the sequence of a key `p{tlen}:{topic}{plen}:{producer}
/// {seq}` (see `Identity::write_key`) whose sequence is a `u64` in canonical decimal; `None`
/// for any other key (a client message id's, or a sequence the leader's check would refuse:
/// apply must not rely on that check), which goes to the table alone.
pub(super) fn sequence_of(key: &str) -> Option<(usize, u64)> {
    let b = key.as_bytes();
    if b.first() != Some(&b'p') {
        return None;
    }
    let topic_end = counted(b, 1)?.end;
    let prefix_len = counted(b, topic_end)?.end;
    // `None` unless ASCII digits follow: then `prefix_len` is a char boundary.
    let seq = canonical_u64(key.get(prefix_len..)?)?;
    Some((prefix_len, seq))
}

/// Where the bytes of a length-prefixed part `{len}:{len bytes}` of `b` starting at `at` are.
pub(super) fn counted(b: &[u8], at: usize) -> Option<std::ops::Range<usize>> {
    // At most 5 digits (a length is 16-bit), then the colon.
    let colon = at + b.get(at..)?.iter().take(6).position(|&c| c == b':')?;
    let digits = &b[at..colon];
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let len: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let end = colon + 1 + len;
    (end <= b.len()).then_some(colon + 1..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::dedup_key;
    use crate::dedup::CLIENT_MESSAGE_ID_PROPERTY;
    use crate::dedup::PRODUCER_ID_PROPERTY;
    use crate::dedup::SEQUENCE_PROPERTY;

    fn key(topic: &str, producer: &str, seq: &str) -> String {
        let props = [(PRODUCER_ID_PROPERTY, producer), (SEQUENCE_PROPERTY, seq)];
        dedup_key(topic, &props).expect("identity")
    }

    #[test]
    fn a_sequence_is_read_by_the_key_s_lengths() {
        // A producer id ending in digits, a topic with a colon: the lengths decide.
        let k = key("a:1", "p12", "345");
        assert_eq!(sequence_of(&k), Some((k.len() - 3, 345)));
        assert_eq!(&k[..k.len() - 3], "p3:a:13:p12");
        let max = u64::MAX.to_string();
        assert_eq!(
            sequence_of(&key("t", "p", &max)).map(|s| s.1),
            Some(u64::MAX)
        );
        assert_eq!(sequence_of(&key("t", "p", "0")).map(|s| s.1), Some(0));
        // Anything else is no sequence: the table holds it.
        for bad in ["01", "", "18446744073709551616", "1a", "-1", "１"] {
            assert_eq!(sequence_of(&key("t", "p", bad)), None, "{bad:?}");
        }
        let uniq = dedup_key("t", &[(CLIENT_MESSAGE_ID_PROPERTY, "7")]).expect("id");
        assert_eq!(sequence_of(&uniq), None);
        for bad in [
            "p",
            "p1",
            "p1:",
            "p9:t1:p1",
            "px:t1:p1",
            "p1:t123456:p1",
            "p1:t1p1",
        ] {
            assert_eq!(sequence_of(bad), None, "{bad:?}");
        }
    }

    /// Apply takes a key's sequence from the identity; the key read back agrees.
    #[test]
    fn the_identity_s_sequence_is_the_key_s() {
        for tlen in [1, 9, 10, 99, 100, 1234] {
            for plen in [1, 9, 10, 128] {
                let (t, p) = ("t".repeat(tlen), "7".repeat(plen));
                for seq in ["0", "9", "10", &u64::MAX.to_string(), "01", "x", ""] {
                    let props = [(PRODUCER_ID_PROPERTY, p.as_str()), (SEQUENCE_PROPERTY, seq)];
                    let id = crate::dedup::Identity::of(&props).expect("identity");
                    let k = key(&t, &p, seq);
                    assert_eq!(id.sequence(&t), sequence_of(&k), "{k}");
                }
            }
        }
        let props = [(CLIENT_MESSAGE_ID_PROPERTY, "1")];
        let id = crate::dedup::Identity::of(&props).expect("identity");
        assert_eq!(id.sequence("t"), None);
    }

    #[test]
    fn runs_grow_split_and_shrink_from_the_front() {
        let mut r = Runs::default();
        // Sequences 1, 2, 3 at positions 0, 1, 2: one run.
        for (seq, pos) in [(1, 0), (2, 1), (3, 2)] {
            assert_eq!(r.find("a", seq), Found::Missing { in_table: false });
            assert_eq!(r.place("a", seq, pos), (0, true));
        }
        assert_eq!(r.find("a", 2), Found::At(1));
        // Another producer in between: "a"'s next sequence starts a run of its own.
        assert_eq!(r.place("b", 1, 3), (1, true));
        assert_eq!(r.place("a", 4, 4), (0, true));
        assert_eq!(r.find("a", 4), Found::At(4));
        // A gap in the sequences starts one too; one below the last goes to the table.
        assert_eq!(r.place("a", 9, 5), (0, true));
        assert_eq!(r.find("a", 7), Found::Missing { in_table: false });
        assert_eq!(r.place("a", 7, 6), (0, false));
        assert_eq!(r.find("a", 7), Found::Missing { in_table: true });
        assert_eq!(r.len(), 6);
        r.check(1, 0..7).expect("valid");
        // Evicting positions 0..=6 in order empties the runs and drops both producers.
        let owners = [0, 0, 0, 1, 0, 0, 0];
        for (pos, &id) in owners.iter().enumerate() {
            assert_eq!(r.evict(id, pos as u64), pos != 6, "position {pos}");
            r.check(1, pos as u64 + 1..7).expect("valid");
        }
        assert_eq!((r.len(), r.by_prefix.len()), (0, 0));
        // A freed number is used again (the last freed first).
        assert_eq!(r.place("c", u64::MAX, 7), (0, true));
        assert_eq!(r.find("c", u64::MAX), Found::At(7));
        assert!(r.evict(0, 7));
        r.check(0, 8..8).expect("empty");
    }
}
