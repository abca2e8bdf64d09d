//! [`ZeroAhead`]: writes zeros into the active segment ahead of the append position, on its
//! own thread, so that appends overwrite blocks the file system already holds as written.
//!
//! A segment is `fallocate`d (space reserved, a full disk fails at creation), which leaves its
//! blocks *unwritten* extents. The first write into such a block converts the extent, and
//! the fdatasync after it must then write the file's metadata too (on ext4 without a journal:
//! the extent blocks and the inode, each a synchronous write before the data's cache flush;
//! with a journal, a journal commit). Measured on the dev VM (ext4), 30 KB pwrite +
//! fdatasync, the size of one entry of 28 messages: 229–240 µs p50 and 101–105 µs of CPU
//! into fallocated space against 107–110 µs and 50–53 µs into written zeros. Writing zeros
//! at creation instead would write a whole segment (1 GiB by default) before a node starts.
//!
//! So this thread keeps [`AHEAD`] bytes past the append position written with zeros, in
//! [`CHUNK`]s, each written back (`SegmentFile::zero_fill`) before the writer gets there; the
//! conversion's metadata then goes out with one log fdatasync per chunk instead of every
//! one. Nothing here is needed for correctness: a segment's unwritten bytes read as zeros
//! either way, and when the thread falls behind (or fails) appends write into unwritten space
//! as before.
//!
//! Safety of the data: the thread only writes at or above the `floor`, which the writer
//! raises to the end of every write *before* it writes, after waiting out a chunk in progress
//! that overlaps its range; so a zero write never lands on appended bytes. A segment's floor
//! starts at the first write into it, so only a segment newer than every one written since
//! the last [`ZeroAhead::forget`] is zeroed (above it lies nothing but what recovery or a
//! truncation already zeroed); one written to again after a newer one is left alone (a
//! truncation back into it). Appends are contiguous, so the wait is rare (the thread keeps
//! ahead) and at most one chunk long.

use std::sync::Arc;

use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::env::SegmentFile;
use crate::env::PAGE_BYTES;
use crate::error::LogError;
use crate::error::LogResult;
use crate::shared::join_thread;
use crate::types::RawPhys;

// Zeros start at a whole page past the last write, which must not fall inside the block a
// write stage writes out again (`stage.rs`): pages are whole blocks.
const _: () = assert!(PAGE_BYTES % crate::ring::BLOCK == 0);

/// Bytes zeroed per step of the thread: the most a writer can wait for, and how often a log
/// fdatasync writes the conversion's metadata.
pub const CHUNK: u64 = 128 << 10;
/// How far ahead of the append position the thread zeroes; it starts again once less than
/// half of it is left.
pub const AHEAD: u64 = 8 << 20;
/// Zeroing pays only while fdatasyncs are frequent: below this many bytes written per
/// fdatasync (measured over every [`WINDOW`] bytes). Writing the zeros costs the writer's
/// node about 0.4 µs of CPU per KiB (a follower at batches of 32 × 1 KiB: 3.2 against 2.8 µs
/// per message), a conversion about 50 µs per fdatasync. Measured on the dev VM: 1.2 KB per
/// fdatasync at 1 in flight and 37 KB at 1 × 64 (faster with zeros: 1.04–1.12 ×, 1.14–1.22 ×),
/// 100–130 KB at 4 × 64 (0.98–1.04 ×, but a worse p99), 260–480 KB at batches of 32 (0.93–0.95 ×);
/// megabytes under `async` flush.
pub const MAX_BYTES_PER_SYNC: u64 = 96 << 10;
/// Bytes written between two measures of the bytes per fdatasync.
pub const WINDOW: u64 = 4 << 20;

/// The segment being zeroed ahead of the writer.
struct Target {
    /// Physical start of the segment.
    start: RawPhys,
    file: Arc<dyn SegmentFile>,
}

#[derive(Default)]
struct State {
    target: Option<Target>,
    /// Bumped on every change of target: a chunk finished for an older target moves nothing.
    generation: u64,
    /// In the target segment, the thread writes only at or above this: below it every byte is
    /// zeroed, or written (or being written) by the appender.
    floor: RawPhys,
    /// The thread zeroes up to here.
    want: RawPhys,
    /// The start of the newest segment targeted since the last `forget`.
    newest_start: Option<RawPhys>,
    /// The chunk being zeroed: generation, start, end.
    busy: Option<(u64, RawPhys, RawPhys)>,
    /// Where the current measure of bytes per fdatasync started: physical offset, syncs.
    window: (RawPhys, u64),
    /// Whether the last measure found fdatasyncs frequent enough for zeroing to pay.
    idle: bool,
    /// A zero write failed: the thread stopped zeroing (appends go on without it).
    failed: bool,
    stop: bool,
}

/// The zero-ahead thread and its shared state.
pub struct ZeroAhead {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ZeroAhead {
    /// Starts the thread.
    pub fn start() -> LogResult<Self> {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raftlog-zero".into())
            .spawn(move || zero_loop(&sh))
            .map_err(|e| LogError::io("spawn zero-ahead", "", e))?;
        Ok(ZeroAhead {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Called by the writer before it writes `[from, to)` of the segment `file` starting at
    /// `start`, with the count of flush cycles that synced something: waits out a chunk being
    /// zeroed in that range, keeps the thread out of it from now on, and asks for more zeros
    /// ahead when less than half of [`AHEAD`] is left, unless fdatasyncs are too rare for it
    /// to pay ([`MAX_BYTES_PER_SYNC`]).
    pub fn before_write(
        &self,
        start: RawPhys,
        file: &Arc<dyn SegmentFile>,
        from: RawPhys,
        to: RawPhys,
        syncs: u64,
    ) {
        let (mu, cv) = &*self.shared;
        let mut s = mu.lock();
        let same = s.target.as_ref().is_some_and(|t| {
            t.start == start && std::ptr::addr_eq(Arc::as_ptr(&t.file), Arc::as_ptr(file))
        });
        if !same {
            s.generation += 1;
            s.target = Some(Target {
                start,
                file: file.clone(),
            });
            // A segment met before (since the last `forget`) may hold written bytes above
            // `from`: it is not zeroed again. A new one holds nothing above its first write.
            s.floor = match s.newest_start {
                Some(n) if start <= n => start + file.capacity(),
                _ => from,
            };
            s.want = s.floor;
            s.newest_start = s.newest_start.max(Some(start));
        }
        while s
            .busy
            .is_some_and(|(g, a, b)| g == s.generation && a < to && from < b)
        {
            cv.wait(&mut s);
        }
        s.floor = s.floor.max(to);
        let (at, synced) = s.window;
        if to < at || syncs < synced {
            s.window = (to, syncs);
        } else if to - at >= WINDOW {
            let idle = (syncs - synced).saturating_mul(MAX_BYTES_PER_SYNC) <= to - at;
            let bytes_per_sync = (to - at) / (syncs - synced).max(1);
            if idle != s.idle {
                tracing::debug!(bytes_per_sync, zeroing = !idle, "zero-ahead switched");
            } else {
                tracing::trace!(bytes_per_sync, zeroing = !idle, "zero-ahead measured");
            }
            s.idle = idle;
            s.window = (to, syncs);
        }
        let end = start + file.capacity();
        // A reused segment's blocks are all written: no extent to convert.
        let written = file.blocks_written();
        if s.failed || s.idle || written || s.floor >= end || s.floor - to >= AHEAD / 2 {
            return;
        }
        let want = (to + AHEAD).min(end);
        if want > s.want {
            s.want = want;
            cv.notify_all();
        }
    }

    /// Waits for a chunk in progress and forgets the target (the log's segment files are
    /// about to be replaced).
    pub fn forget(&self) {
        let (mu, cv) = &*self.shared;
        let mut s = mu.lock();
        while s.busy.is_some() {
            cv.wait(&mut s);
        }
        s.target = None;
        s.newest_start = None;
        s.generation += 1;
    }

    /// Stops the thread (after the chunk in progress).
    pub fn stop(&self) {
        {
            let (mu, cv) = &*self.shared;
            mu.lock().stop = true;
            cv.notify_all();
        }
        join_thread(&self.thread, "zero-ahead");
    }
}

fn zero_loop(shared: &(Mutex<State>, Condvar)) {
    let (mu, cv) = shared;
    loop {
        let (generation, file, offset, len) = {
            let mut s = mu.lock();
            let (file, start) = loop {
                if s.stop {
                    return;
                }
                match &s.target {
                    Some(t) if !s.failed && s.floor < s.want => break (t.file.clone(), t.start),
                    _ => cv.wait(&mut s),
                }
            };
            // From the next whole page: the one holding the floor also holds the last write's
            // end (written, so nothing to convert), and a write stage writes it out again
            // whole (`stage.rs`), which zeros written back after would undo.
            let from = (start + (s.floor - start).next_multiple_of(PAGE_BYTES)).min(s.want);
            let to = (from + CHUNK).min(s.want);
            if from == to {
                s.floor = s.want;
                continue;
            }
            s.busy = Some((s.generation, from, to));
            (s.generation, file, from - start, to - from)
        };
        let res = file.zero_fill(offset, len);
        let mut s = mu.lock();
        s.busy = None;
        match res {
            Ok(()) if s.generation == generation => {
                let done = s.target.as_ref().map_or(0, |t| t.start) + offset + len;
                s.floor = s.floor.max(done);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(error = %e, "zeroing the segment ahead of the appends failed; appends go on without it");
                s.failed = true;
            }
        }
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::Path;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::env::Env;
    use crate::mem_env::MemEnv;

    /// A segment whose zero fills are slow and counted, so writes run into chunks in progress.
    struct SlowZeros {
        inner: Arc<dyn SegmentFile>,
        zeroed: AtomicU64,
    }

    impl SegmentFile for SlowZeros {
        fn capacity(&self) -> u64 {
            self.inner.capacity()
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.inner.write_at(offset, data)
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.inner.read_at(offset, buf)
        }
        fn sync_range(&self, offset: u64, len: u64) -> io::Result<()> {
            self.inner.sync_range(offset, len)
        }
        fn zero_fill(&self, offset: u64, len: u64) -> io::Result<()> {
            std::thread::sleep(Duration::from_millis(2));
            self.zeroed.fetch_add(len, Ordering::SeqCst);
            self.inner.zero_fill(offset, len)
        }
    }

    fn segment(capacity: u64) -> Arc<SlowZeros> {
        let inner = MemEnv::new()
            .create_segment(Path::new("seg"), capacity)
            .unwrap();
        Arc::new(SlowZeros {
            inner,
            zeroed: AtomicU64::new(0),
        })
    }

    /// Contiguous appends of a non-zero pattern racing the thread: every appended byte
    /// survives, the thread zeroed ahead of them, and what lies past the appends reads zero.
    #[test]
    fn zeros_never_land_on_appended_bytes() {
        const START: RawPhys = 64 << 20;
        let cap = 3 * AHEAD;
        let seg = segment(cap);
        let file: Arc<dyn SegmentFile> = seg.clone();
        let z = ZeroAhead::start().unwrap();
        let mut pos = 0u64;
        let mut n = 0u64;
        let mut waited = false;
        while pos < 2 * AHEAD {
            // 1..=300 KiB, so writes straddle chunk edges.
            let len = 1024 * (1 + (n * 7919) % 300);
            let byte = (n % 255 + 1) as u8;
            z.before_write(START, &file, START + pos, START + pos + len, 4 * n);
            file.write_at(pos, &vec![byte; len as usize]).unwrap();
            pos += len;
            n += 1;
            if !waited && pos >= AHEAD {
                // The race needs the thread under way (it starts once the first measure of
                // bytes per fdatasync, after WINDOW bytes, found them frequent): on a loaded
                // machine the appends could otherwise be done before it first ran (a CI run
                // failed so).
                waited = true;
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while seg.zeroed.load(Ordering::SeqCst) == 0 {
                    assert!(std::time::Instant::now() < deadline, "the thread never ran");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        z.stop();
        assert!(
            seg.zeroed.load(Ordering::SeqCst) >= CHUNK,
            "the thread zeroed nothing"
        );
        let mut at = 0u64;
        for i in 0..n {
            let len = 1024 * (1 + (i * 7919) % 300);
            let mut buf = vec![0u8; len as usize];
            file.read_at(at, &mut buf).unwrap();
            let byte = (i % 255 + 1) as u8;
            assert!(
                buf.iter().all(|b| *b == byte),
                "write {i} at {at} was overwritten"
            );
            at += len;
        }
        let mut rest = vec![1u8; (cap - pos) as usize];
        file.read_at(pos, &mut rest).unwrap();
        assert!(rest.iter().all(|b| *b == 0));
    }

    /// Waits until the thread has nothing left to do.
    fn wait_idle(z: &ZeroAhead) {
        loop {
            {
                let s = z.shared.0.lock();
                if s.busy.is_none() && (s.failed || s.floor >= s.want) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Writes out of physical order across segments (a segment's closing padding, then the
    /// next segment, then the records before that padding, as the writer once did): the
    /// padding survives, because a segment met again is not zeroed.
    #[test]
    fn a_segment_met_again_is_not_zeroed() {
        let z = ZeroAhead::start().unwrap();
        let a: Arc<dyn SegmentFile> = segment(4 * CHUNK);
        let b: Arc<dyn SegmentFile> = segment(4 * CHUNK);
        let end = 4 * CHUNK;
        let pad = end - 48;
        z.before_write(0, &a, pad, end, 0);
        a.write_at(pad, &[7u8; 48]).unwrap();
        z.before_write(end, &b, end, end + 100, 0);
        b.write_at(0, &[8u8; 100]).unwrap();
        wait_idle(&z);
        z.before_write(0, &a, 1000, 2000, 0);
        a.write_at(1000, &[9u8; 1000]).unwrap();
        wait_idle(&z);
        z.stop();
        let mut buf = [0u8; 48];
        a.read_at(pad, &mut buf).unwrap();
        assert_eq!(buf, [7u8; 48], "the padding was zeroed");
        let mut buf = [0u8; 100];
        b.read_at(0, &mut buf).unwrap();
        assert_eq!(buf, [8u8; 100]);
    }

    /// Zeroing stops while fdatasyncs are rare (1 MiB written per sync) and starts again
    /// once they are frequent (64 KiB per sync).
    #[test]
    fn zeroes_only_while_syncs_are_frequent() {
        let z = ZeroAhead::start().unwrap();
        let f: Arc<dyn SegmentFile> = segment(8 * AHEAD);
        let mut pos = 0;
        let mut syncs = 0;
        let mut write = |step: u64| {
            z.before_write(0, &f, pos, pos + step, syncs);
            pos += step;
            syncs += 1;
        };
        for _ in 0..2 * WINDOW / (1 << 20) {
            write(1 << 20);
        }
        let want = z.shared.0.lock().want;
        assert!(z.shared.0.lock().idle);
        for _ in 0..2 * AHEAD / (1 << 20) {
            write(1 << 20);
        }
        assert_eq!(z.shared.0.lock().want, want, "zeroing went on");
        for _ in 0..2 * WINDOW / (64 << 10) {
            write(64 << 10);
        }
        let s = z.shared.0.lock();
        assert!(!s.idle);
        assert!(s.want >= pos + AHEAD / 2, "zeroing did not start again");
        drop(s);
        z.stop();
    }

    /// A new file at a start met before (the log's segments replaced) is zeroed only after
    /// `forget`, which the writer calls before an install; then its floor starts at its first
    /// write. Stop returns.
    #[test]
    fn forget_starts_over() {
        let z = ZeroAhead::start().unwrap();
        let a: Arc<dyn SegmentFile> = segment(2 * AHEAD);
        let b: Arc<dyn SegmentFile> = segment(2 * AHEAD);
        z.before_write(0, &a, 0, 100, 0);
        z.before_write(0, &b, 10, 20, 0);
        assert_eq!(z.shared.0.lock().floor, 2 * AHEAD, "met before: not zeroed");
        z.forget();
        assert!(z.shared.0.lock().target.is_none());
        z.before_write(0, &b, 10, 20, 0);
        {
            let s = z.shared.0.lock();
            assert!(s.target.as_ref().is_some_and(|t| Arc::ptr_eq(&t.file, &b)));
            assert_eq!(s.want, 20 + AHEAD, "zeroed from its first write on");
        }
        z.stop();
    }
}
