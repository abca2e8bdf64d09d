//! [`LongPolls`]: the node-wide cap on long polls waiting at once (raftmq `Pull` and RocketMQ
//! `Receive` together), `max-long-poll-waiters`. A call that would wait takes a
//! [`WaitSlot`] first; without one it answers at once (see the callers).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use raftmq_store::StoreError;

/// Counts the long polls waiting on this node against their cap.
#[derive(Debug)]
pub struct LongPolls {
    waiting: Arc<AtomicUsize>,
    max: usize,
}

/// One waiting long poll; gives its place back when dropped.
#[derive(Debug)]
pub struct WaitSlot(Arc<AtomicUsize>);

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LongPolls {
    /// A cap of `max` waiting long polls (0: none may wait).
    pub fn new(max: u32) -> Self {
        LongPolls {
            waiting: Arc::default(),
            max: max as usize,
        }
    }

    /// A place to wait in, or the [`StoreError::LimitReached`] naming the setting when all
    /// `max-long-poll-waiters` are taken.
    pub fn try_wait(&self) -> Result<WaitSlot, StoreError> {
        let taken = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(WaitSlot(self.waiting.clone())),
            Err(n) => Err(StoreError::LimitReached {
                what: format!("{n} long polls wait on this node"),
                setting: "max-long-poll-waiters",
                max: self.max as u64,
            }),
        }
    }

    /// Long polls waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_holds_and_slots_come_back() {
        let p = LongPolls::new(2);
        let a = p.try_wait().expect("first");
        let b = p.try_wait().expect("second");
        let e = p.try_wait().expect_err("third");
        assert!(e.to_string().contains("max-long-poll-waiters is 2"), "{e}");
        assert_eq!(p.waiting(), 2);
        drop(a);
        let _c = p.try_wait().expect("a place came back");
        drop(b);
        assert_eq!(p.waiting(), 1);
        assert!(LongPolls::new(0).try_wait().is_err(), "0: nobody waits");
    }
}
