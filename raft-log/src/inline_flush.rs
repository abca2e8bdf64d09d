//! [`InlineFlush`]: when a `sync` append runs its flush on the appending thread rather than
//! handing it to the flusher thread.
//!
//! An append that waits alone for its flush pays two thread hand-offs around the fdatasync:
//! waking the flusher, and the flusher waking the appender's runtime with the completion. On a
//! VM whose idle vCPUs halt each costs about as much as the fdatasync itself (73-77 µs
//! measured, see BENCHMARKS.md "Wake-ups per send"). So a log whose owner asks for it
//! ([`InlineFlush::set_enabled`]: a node that is not the leader) runs the flush cycle itself,
//! under the flusher's cycle lock, when the log was quiet: no append for [`QUIET`] and the
//! flusher not in a cycle. Under load appends follow each other within [`QUIET`] and share the
//! flusher's group commit; at most the first append of a burst is flushed alone.
//!
//! A leader must not flush inline: openraft starts replicating an entry only after the
//! leader's `append` returns, so its fdatasync would come before the followers' instead of
//! beside them. An inline flush slower than [`SLOW`] (a stalling disk) turns inline flushing
//! off for [`BACKOFF`], so a follower's Raft core (heartbeats, commits) is not held up by the
//! disk on every append.
//!
//! Durability is the same either way: the callback completes after the fdatasync covering
//! the append (the same cycle, [`crate::flusher::Flusher::cycle_under`]).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

/// No append for this long: the next one is flushed inline. Shorter than the gap between a
/// lone producer's entries (its next send waits for this one's ack: about 190 us from an
/// inline flush's end to the next append on a VM with a 50 us fdatasync, where 200 us sent
/// every other append to the flusher), longer than the gaps within a pipelined burst.
pub const QUIET: Duration = Duration::from_micros(60);
/// An inline flush slower than this turns inline flushing off for [`BACKOFF`]. Far above the
/// occasional 2-5 ms fdatasync of a busy disk (each of which would otherwise turn it off),
/// far below an election timeout.
pub const SLOW: Duration = Duration::from_millis(20);
/// How long inline flushing stays off after a [`SLOW`] flush.
pub const BACKOFF: Duration = Duration::from_secs(1);

/// The inline-flush switch and the timestamps its rule needs (nanoseconds since `epoch`).
pub struct InlineFlush {
    epoch: Instant,
    enabled: AtomicBool,
    /// When the last append (and its inline flush) returned; 0 = none yet.
    last_done: AtomicU64,
    /// No inline flush before this.
    off_until: AtomicU64,
    /// Appends flushed inline (`LogStore::inline_flushes`, for tests).
    count: AtomicU64,
}

impl Default for InlineFlush {
    fn default() -> Self {
        InlineFlush {
            epoch: Instant::now(),
            enabled: AtomicBool::new(false),
            last_done: AtomicU64::new(0),
            off_until: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl InlineFlush {
    /// Turns inline flushing on (a node that is not the leader) or off.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Whether an append starting now should flush inline.
    pub fn admits(&self) -> bool {
        if !self.enabled.load(Ordering::Relaxed) {
            return false;
        }
        let now = self.now();
        let last = self.last_done.load(Ordering::Relaxed);
        now >= self.off_until.load(Ordering::Relaxed)
            && (last == 0 || now.saturating_sub(last) >= nanos(QUIET))
    }

    /// Records that an inline flush took `took`.
    pub fn record_inline(&self, took: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if took > SLOW {
            tracing::warn!(
                took_ms = took.as_secs_f64() * 1e3,
                "slow inline flush: flushing on the flusher thread for the next second"
            );
            self.off_until
                .store(self.now() + nanos(BACKOFF), Ordering::Relaxed);
        }
    }

    /// Records that an append returned (the quiet time counts from here). A leader's appends
    /// (inline flushing off) read no clock: a stale time only means the log was quiet.
    pub fn record_done(&self) {
        if self.enabled.load(Ordering::Relaxed) {
            self.last_done.store(self.now().max(1), Ordering::Relaxed);
        }
    }

    /// Appends flushed inline so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn now(&self) -> u64 {
        nanos(self.epoch.elapsed())
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_until_enabled_then_only_after_a_quiet_gap() {
        let f = InlineFlush::default();
        assert!(
            !f.admits(),
            "off by default (a leader must not flush inline)"
        );
        f.set_enabled(true);
        assert!(f.admits(), "the first append of a quiet log");
        f.record_done();
        assert!(
            !f.admits(),
            "an append right after another goes to the flusher"
        );
        std::thread::sleep(QUIET * 2);
        assert!(f.admits());
    }

    #[test]
    fn a_slow_flush_turns_it_off_for_the_backoff() {
        let f = InlineFlush::default();
        f.set_enabled(true);
        f.record_inline(SLOW / 2);
        assert!(f.admits());
        f.record_inline(SLOW * 2);
        assert!(!f.admits(), "off after a slow flush");
        assert_eq!(f.count(), 2);
        // The backoff ends: pretend it started BACKOFF ago.
        f.off_until.store(f.now(), Ordering::Relaxed);
        assert!(f.admits());
    }
}
