//! [`Writer`]: the append path of the CommitLog. Under the log lock each entry is checked
//! (index continues the log, term not decreasing, record <= segment), placed at the append
//! position or, if it does not fit, at the next segment start after a padding record, and the
//! records of one call are written with one write per segment; the completion callback follows
//! the flush policy. The next segment is prepared by the [`Preallocator`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::batch::encode_batch;
use crate::config::FlushPolicy;
use crate::config::LogConfig;
use crate::env::Env;
use crate::env::SegmentFile;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flush_queue::FlushCallback;
use crate::flush_queue::FlushWaiter;
use crate::format::encode_header;
use crate::format::encode_padding;
use crate::format::ENTRY_HEADER_LEN;
use crate::prealloc::Preallocator;
use crate::raft_index::EntryLocation;
use crate::recycle::Recycler;
use crate::segments::segment_name;
use crate::shared::Shared;
use crate::state::State;
use crate::types::LogEntry;
use crate::types::RawPhys;
use crate::zero_ahead::ZeroAhead;

/// Who runs the flush a `sync` append waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushBy {
    /// The flusher thread, woken for it (group commit).
    FlusherThread,
    /// The appending thread, right after the append, under the cycle lock it holds
    /// ([`crate::inline_flush`]).
    Caller,
}

/// Appends entries to the CommitLog (and the raft index) and owns the segment preallocator.
pub struct Writer {
    shared: Arc<Shared>,
    config: LogConfig,
    env: Arc<dyn Env>,
    /// The `commitlog/` directory.
    commitlog_dir: PathBuf,
    /// Next-segment preallocation (`preallocate` on).
    prealloc: Option<Preallocator>,
    /// Zeros ahead of the appends (`zero_ahead` on).
    zero_ahead: Option<ZeroAhead>,
}

impl Writer {
    /// A writer over the opened state in `shared`; starts the preallocator (if configured)
    /// and asks it for the segment after the current one.
    pub fn start(
        shared: Arc<Shared>,
        config: LogConfig,
        env: Arc<dyn Env>,
        commitlog_dir: PathBuf,
    ) -> LogResult<Self> {
        let recycler = shared.state.lock().segments.recycler().clone();
        let prealloc = match config.preallocate {
            true => Some(Preallocator::start(
                recycler,
                commitlog_dir.clone(),
                config.segment_bytes,
            )?),
            false => None,
        };
        let zero_ahead = match config.zero_ahead {
            true => Some(ZeroAhead::start()?),
            false => None,
        };
        let w = Writer {
            shared,
            config,
            env,
            commitlog_dir,
            prealloc,
            zero_ahead,
        };
        w.request_next_segment(&w.shared.state.lock());
        Ok(w)
    }

    /// The core this writer works on.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The configuration in use.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The I/O environment.
    pub fn env(&self) -> &Arc<dyn Env> {
        &self.env
    }

    /// Asks the preallocator for the segment after the one holding the append position.
    pub fn request_next_segment(&self, st: &State) {
        if let Some(p) = &self.prealloc {
            p.request(st.segments.start_of(st.append_pos) + self.config.segment_bytes);
        }
    }

    /// Waits for a segment preparation in progress and forgets the prepared segment (before
    /// a snapshot install swaps the segment files).
    pub fn discard_prepared_segment(&self) {
        if let Some(p) = &self.prealloc {
            p.discard();
        }
        if let Some(z) = &self.zero_ahead {
            z.forget();
        }
    }

    /// Stops the preallocator and zero-ahead threads.
    pub fn stop(&self) {
        if let Some(p) = &self.prealloc {
            p.stop();
        }
        if let Some(z) = &self.zero_ahead {
            z.stop();
        }
    }

    /// Appends entries (readable when this returns); `on_durable` completes per the flush
    /// policy (`sync`: queued for the flush covering them, run by `flush_by`; `async`: at
    /// once), or with the error. An I/O error (or a full disk) stops the log. Returns the
    /// physical end.
    pub fn append(
        &self,
        entries: &[LogEntry],
        on_durable: FlushCallback,
        flush_by: FlushBy,
    ) -> LogResult<RawPhys> {
        let end = match self.append_locked(entries) {
            Ok(end) => end,
            Err(e) => {
                let e = match e {
                    e @ (LogError::Io { .. } | LogError::DiskFull { .. }) => self.shared.fail(e),
                    e => e,
                };
                // The callback is completed too, so no caller waits forever on it.
                on_durable(Err(std::io::Error::other(e.to_string())));
                return Err(e);
            }
        };
        let waiter = FlushWaiter {
            end,
            callback: on_durable,
        };
        match (self.config.flush, flush_by) {
            (FlushPolicy::Sync, FlushBy::FlusherThread) => self.shared.waiters.enqueue(waiter),
            (FlushPolicy::Sync, FlushBy::Caller) => self.shared.waiters.enqueue_quietly(waiter),
            (FlushPolicy::Async, _) => (waiter.callback)(Ok(())),
        }
        Ok(end)
    }

    /// Validates, positions and writes `entries`; returns the physical end.
    fn append_locked(&self, entries: &[LogEntry]) -> LogResult<RawPhys> {
        let mut st = self.shared.state.lock();
        st.check_writable()?;
        let encoded = encode_batch(&st, entries, self.config.segment_bytes)?;
        // Place every record (padding a segment and opening the next as needed), then write
        // the records that land back to back in one segment with one vectored write, each
        // header and payload from where it is (no copy into a run buffer). The writes go in
        // physical order, a segment's closing padding before the next segment's records: the
        // zero-ahead thread zeroes only past the latest write in a segment.
        let mut batch = Vec::with_capacity(encoded.len());
        let mut headers = Vec::with_capacity(encoded.len());
        let mut paddings = Vec::new();
        for (i, e) in encoded.iter().enumerate() {
            let total = (ENTRY_HEADER_LEN + e.payload.len()) as u64;
            let (pos, padding) = self.reserve(&mut st, total)?;
            paddings.extend(padding.map(|(phys, bytes)| (i, phys, bytes)));
            headers.push(encode_header(e.kind, e.term, e.index, pos, &e.payload));
            st.append_pos = pos + total;
            batch.push(EntryLocation {
                index: e.index,
                phys: pos,
                size: total as u32,
                term: e.term,
            });
        }
        let mut run = Run {
            start: 0,
            end: None,
            parts: Vec::with_capacity(2 * encoded.len() + paddings.len()),
        };
        let mut paddings = paddings.iter().peekable();
        for (i, (l, e)) in batch.iter().zip(&encoded).enumerate() {
            if let Some((_, phys, bytes)) = paddings.next_if(|p| p.0 == i) {
                self.push_piece(&st, &mut run, *phys, bytes)?;
            }
            self.push_piece(&st, &mut run, l.phys, &headers[i])?;
            self.push_piece(&st, &mut run, l.phys + ENTRY_HEADER_LEN as u64, &e.payload)?;
        }
        self.write_run(&st, run.start, &run.parts)?;
        st.index.push_batch(&batch);
        st.recent.push(entries);
        if let Some(l) = batch.last() {
            tracing::trace!(
                log_index = l.index,
                term = l.term,
                phys_offset = l.phys,
                entries = batch.len(),
                "appended"
            );
        }
        st.debug_validate();
        Ok(st.append_pos)
    }

    /// Adds `bytes` at `phys` to the run, or writes the run and starts the next one with them
    /// if they do not follow it in its segment.
    fn push_piece<'a>(
        &self,
        st: &State,
        run: &mut Run<'a>,
        phys: RawPhys,
        bytes: &'a [u8],
    ) -> LogResult<()> {
        let follows =
            run.end == Some(phys) && st.segments.start_of(phys) == st.segments.start_of(run.start);
        if !follows {
            self.write_run(st, run.start, &run.parts)?;
            run.parts.clear();
            run.start = phys;
        }
        run.parts.push(bytes);
        run.end = Some(phys + bytes.len() as u64);
        Ok(())
    }

    /// Writes `parts`, back to back, at `phys` (inside one segment), keeping the zero-ahead
    /// thread out of the range.
    fn write_run(&self, st: &State, phys: RawPhys, parts: &[&[u8]]) -> LogResult<()> {
        if parts.is_empty() {
            return Ok(());
        }
        if let Some(z) = &self.zero_ahead {
            let (file, off) = st.segments.locate(phys)?;
            let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
            z.before_write(phys - off, &file, phys, phys + len, st.syncs);
        }
        st.segments.write_vectored(phys, parts)
    }

    /// Position for a record of `total` bytes: the append position, or the next segment's
    /// start if it does not fit, with the padding record that closes the current one (for the
    /// caller to write, in order). Creates the segment if needed.
    fn reserve(&self, st: &mut State, total: u64) -> LogResult<(RawPhys, Option<Padding>)> {
        let seg_bytes = self.config.segment_bytes;
        let mut pos = st.append_pos;
        let start = st.segments.start_of(pos);
        let room = start + seg_bytes - pos;
        let mut padding = None;
        if room < total {
            let mut own_end = pos;
            if room >= ENTRY_HEADER_LEN as u64 && st.segments.get(start).is_some() {
                padding = Some((pos, encode_padding(pos, room as u32)));
                own_end += ENTRY_HEADER_LEN as u64;
            }
            st.rolled_ends.insert(start, own_end);
            pos = start + seg_bytes;
            st.append_pos = pos;
            tracing::info!(phys_offset = pos, "rolling to a new segment");
            if matches!(self.config.flush, FlushPolicy::Async) {
                self.shared.waiters.wake();
            }
        }
        let seg_start = st.segments.start_of(pos);
        if st.segments.get(seg_start).is_none() {
            let f = self.new_segment(st.segments.recycler(), seg_start)?;
            st.segments.insert(seg_start, f);
            if let Some(p) = &self.prealloc {
                p.request(seg_start + seg_bytes);
            }
        }
        Ok((pos, padding))
    }

    fn new_segment(&self, recycler: &Recycler, start: RawPhys) -> LogResult<Arc<dyn SegmentFile>> {
        let path = self.commitlog_dir.join(segment_name(start));
        match self.prealloc.as_ref().and_then(|p| p.take(start)) {
            Some(Ok(f)) => return Ok(f),
            Some(Err(e)) => {
                tracing::warn!(phys_offset = start, error = %e, "preallocation had failed; retrying inline")
            }
            None => tracing::debug!(
                phys_offset = start,
                "no preallocated segment; creating inline"
            ),
        }
        recycler
            .create(&path, self.config.segment_bytes)
            .map_err(|e| LogError::io("create segment", path, e))
    }
}

/// A segment's closing padding record: where, and its bytes.
type Padding = (RawPhys, [u8; ENTRY_HEADER_LEN]);

/// Pieces that lie back to back in one segment, written with one vectored write.
struct Run<'a> {
    start: RawPhys,
    /// Where the next piece must start to join the run (`None`: nothing yet).
    end: Option<RawPhys>,
    parts: Vec<&'a [u8]>,
}
