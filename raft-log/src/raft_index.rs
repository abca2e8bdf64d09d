//! The raft index: log index -> (physical offset, record size, term), kept in memory and in
//! `raft-index/index` as fixed-width records. The file is a rebuildable cache: recovery checks
//! it against the CommitLog scan and rewrites it when missing or inconsistent. Its records
//! below a durable flush checkpoint are durable too, so open takes them instead of scanning
//! the bytes they cover ([`RaftIndex::trusted_prefix`]).
//!
//! Record layout (32 bytes, little-endian):
//!
//! | offset | size | field   |
//! |-------:|-----:|---------|
//! |      0 |    8 | `index` |
//! |      8 |    8 | `phys`  |
//! |     16 |    8 | `term`  |
//! |     24 |    4 | `size`  |
//! |     28 |    4 | `crc`   | CRC32 of bytes 0..28

use std::collections::VecDeque;
use std::sync::Arc;

use crate::env::PlainFile;
use crate::types::LogIndex;
use crate::types::PhysOffset;
use crate::types::RawIndex;
use crate::types::RawPhys;
use crate::types::Term;

/// Bytes per raft index record.
pub const INDEX_RECORD_LEN: usize = 32;

/// Where one entry sits in the CommitLog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryLocation {
    /// Log index.
    pub index: RawIndex,
    /// Physical offset of the record (its header).
    pub phys: RawPhys,
    /// Record bytes (header + payload).
    pub size: u32,
    /// Term.
    pub term: Term,
}

impl EntryLocation {
    /// Physical offset of the record (its header), as the public type.
    pub fn phys_offset(&self) -> PhysOffset {
        PhysOffset::new(self.phys)
    }

    /// Log index, as the public type.
    pub fn log_index(&self) -> LogIndex {
        LogIndex::new(self.index)
    }

    /// Physical end of the record, as the public type.
    pub fn phys_end(&self) -> PhysOffset {
        PhysOffset::new(self.end())
    }

    /// Physical end of the record.
    pub fn end(&self) -> RawPhys {
        self.phys + self.size as u64
    }

    /// Encodes the fixed-width record.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.phys.to_le_bytes());
        out.extend_from_slice(&self.term.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    /// Decodes a record; `None` if the CRC does not match.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..INDEX_RECORD_LEN)?;
        let u64_at = |i: usize| {
            b.get(i..i + 8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let u32_at = |i: usize| {
            b.get(i..i + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
        };
        if crc32fast::hash(&b[..28]) != u32_at(28)? {
            return None;
        }
        Some(EntryLocation {
            index: u64_at(0)?,
            phys: u64_at(8)?,
            term: u64_at(16)?,
            size: u32_at(24)?,
        })
    }
}

/// Index records not yet written to the file (written by the flusher, off the append path).
#[derive(Default)]
pub struct PendingWrite {
    /// Empty the file before writing (the index restarted after a purge gap).
    pub reset: bool,
    /// File offset of `bytes`.
    pub offset: u64,
    /// Encoded records.
    pub bytes: Vec<u8>,
}

impl PendingWrite {
    /// Applies the write to `file`.
    pub fn apply(self, file: &dyn PlainFile) -> std::io::Result<()> {
        if self.reset {
            file.set_len(0)?;
        }
        if !self.bytes.is_empty() {
            file.write_at(self.offset, &self.bytes)?;
        }
        Ok(())
    }
}

/// The in-memory index plus its file.
pub struct RaftIndex {
    /// Invariant: indexes are contiguous and increasing, physical offsets increasing.
    recs: VecDeque<EntryLocation>,
    file: Arc<dyn PlainFile>,
    /// Index of the record at file offset 0.
    file_base: Option<RawIndex>,
    /// Invariant: covers exactly the records appended since the last `take_pending`.
    pending: PendingWrite,
}

impl RaftIndex {
    /// Builds the index from recovered locations, rewriting the file unless it holds them or
    /// (after retention emptied it, see [`RaftIndex::drop_below`]) a non-empty tail of them.
    /// `have`: the file's bytes, as open read them (the file is not written in between).
    pub fn load(
        file: Arc<dyn PlainFile>,
        recs: Vec<EntryLocation>,
        have: Vec<u8>,
    ) -> std::io::Result<(Self, bool)> {
        let mut want = Vec::with_capacity(recs.len() * INDEX_RECORD_LEN);
        for r in &recs {
            r.encode(&mut want);
        }
        let tail = have == want
            || (!have.is_empty() && have.len() % INDEX_RECORD_LEN == 0 && want.ends_with(&have));
        let rebuilt = !tail;
        let first_in_file = if rebuilt {
            file.set_len(0)?;
            file.write_at(0, &want)?;
            file.sync()?;
            0
        } else {
            recs.len() - have.len() / INDEX_RECORD_LEN
        };
        let file_base = recs.get(first_in_file).map(|r| r.index);
        Ok((
            RaftIndex {
                recs: recs.into(),
                file,
                file_base,
                pending: PendingWrite::default(),
            },
            rebuilt,
        ))
    }

    /// The records of an index file that a durable flush checkpoint vouches for: the run
    /// from the file start of valid (CRC), contiguous records (indexes +1, terms not
    /// decreasing, each inside one segment, each starting at or after the previous end), cut
    /// at the first that ends past `checkpoint_end`. The file is fdatasynced before every
    /// checkpoint is made durable (`checkpointer.rs`, `Flusher::flush_locked`), so for such
    /// records it holds exactly what the CommitLog holds.
    pub fn trusted_prefix(
        bytes: &[u8],
        checkpoint_end: RawPhys,
        segment_bytes: u64,
    ) -> Vec<EntryLocation> {
        let mut out: Vec<EntryLocation> = Vec::with_capacity(bytes.len() / INDEX_RECORD_LEN);
        for chunk in bytes.chunks_exact(INDEX_RECORD_LEN) {
            let Some(r) = EntryLocation::decode(chunk) else {
                break;
            };
            let in_one_segment =
                r.size > 0 && r.phys / segment_bytes == (r.end() - 1) / segment_bytes;
            let follows = out
                .last()
                .is_none_or(|p| r.index == p.index + 1 && r.term >= p.term && r.phys >= p.end());
            if !in_one_segment || !follows || r.end() > checkpoint_end {
                break;
            }
            out.push(r);
        }
        out
    }

    /// The file (synced before a flush checkpoint is made durable).
    pub fn file(&self) -> Arc<dyn PlainFile> {
        self.file.clone()
    }

    /// First indexed entry.
    pub fn first(&self) -> Option<&EntryLocation> {
        self.recs.front()
    }

    /// Last indexed entry.
    pub fn last(&self) -> Option<&EntryLocation> {
        self.recs.back()
    }

    /// Location of `index`.
    pub fn get(&self, index: RawIndex) -> Option<EntryLocation> {
        let first = self.recs.front()?.index;
        let i = index.checked_sub(first)?;
        self.recs.get(usize::try_from(i).ok()?).copied()
    }

    /// Locations with index in `[start, end)`.
    pub fn range(&self, start: RawIndex, end: RawIndex) -> Vec<EntryLocation> {
        let Some(first) = self.recs.front().map(|r| r.index) else {
            return Vec::new();
        };
        let s = start.max(first) - first;
        let e = end.saturating_sub(first).min(self.recs.len() as u64);
        (s..e.max(s))
            .filter_map(|i| self.recs.get(i as usize).copied())
            .collect()
    }

    /// Appends locations (the caller checked contiguity, or that a gap follows purged
    /// entries, in which case the older records are dropped). The file is written later.
    pub fn push_batch(&mut self, batch: &[EntryLocation]) {
        let Some(first) = batch.first() else { return };
        if self.recs.back().is_some_and(|l| l.index + 1 != first.index) {
            self.recs.clear();
            self.file_base = None;
            self.pending = PendingWrite {
                reset: true,
                offset: 0,
                bytes: Vec::new(),
            };
        }
        let base = *self.file_base.get_or_insert(first.index);
        if self.pending.bytes.is_empty() {
            self.pending.offset = (first.index - base) * INDEX_RECORD_LEN as u64;
        }
        for r in batch {
            r.encode(&mut self.pending.bytes);
        }
        self.recs.extend(batch.iter().copied());
    }

    /// The file and the records to write to it (the flusher writes them outside the lock).
    pub fn take_pending(&mut self) -> (Arc<dyn PlainFile>, PendingWrite) {
        (self.file.clone(), std::mem::take(&mut self.pending))
    }

    /// Writes the pending records now.
    pub fn write_pending(&mut self) -> std::io::Result<()> {
        let (file, p) = self.take_pending();
        p.apply(file.as_ref())
    }

    /// Drops every entry with index > `last` (all of them for `None`).
    pub fn truncate_after(&mut self, last: Option<RawIndex>) -> std::io::Result<()> {
        self.write_pending()?;
        while self
            .recs
            .back()
            .is_some_and(|r| last.is_none_or(|l| r.index > l))
        {
            self.recs.pop_back();
        }
        match (self.recs.back(), self.file_base) {
            (Some(b), Some(base)) if b.index >= base => self
                .file
                .set_len((b.index - base + 1) * INDEX_RECORD_LEN as u64),
            _ => {
                self.file_base = None;
                self.file.set_len(0)
            }
        }
    }

    /// Drops every entry whose record starts below `phys`. O(dropped), no I/O: the file is
    /// emptied (by the next write) rather than rewritten. Rewriting the whole index under the
    /// log lock (80 MB after a few million entries) stalled appends for about a second, long
    /// enough for a leader to lose its followers. The file restarts at the next appended
    /// entry; the next open accepts it as a tail of the index (rebuilt only if it is not one).
    pub fn drop_below(&mut self, phys: RawPhys) {
        while self.recs.front().is_some_and(|r| r.phys < phys) {
            self.recs.pop_front();
        }
        self.file_base = None;
        self.pending = PendingWrite {
            reset: true,
            offset: 0,
            bytes: Vec::new(),
        };
    }

    /// Writes pending records and fdatasyncs the file.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.file.sync()
    }
}
