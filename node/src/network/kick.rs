//! [`ReplicationKick`]: lets a watcher end an idle replication stream to one follower, so
//! openraft opens the next one from the follower's matched index and sends what it lacks.
//!
//! openraft resumes replication after a failed stream, but an idle stream whose entries were
//! lost in transit (sent, never answered, nothing outstanding any more) would wait for the next
//! log entry. A kick ends such a stream as if the follower had closed it; a stream with
//! requests outstanding ignores kicks (its reply timeout covers it), so heartbeats and busy
//! streams are never cut.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;

use raftmq_raft_log::types::NodeId;
use tokio::sync::Notify;

/// Per-follower kick signals shared by the transport and the catch-up watcher.
#[derive(Debug, Default)]
pub struct ReplicationKick {
    targets: Mutex<HashMap<NodeId, Arc<Notify>>>,
    /// Streams a kick ended so far.
    ended: AtomicU64,
}

impl ReplicationKick {
    /// Ends the idle replication stream to `target`, if one is waiting for replies now.
    pub fn kick(&self, target: NodeId) {
        self.signal(target).notify_waiters();
    }

    /// How many idle streams kicks have ended so far.
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Counts a stream a kick ended.
    pub(super) fn count_ended(&self) {
        self.ended.fetch_add(1, Ordering::Relaxed);
    }

    /// The signal the streams to `target` wait on.
    pub(super) fn signal(&self, target: NodeId) -> Arc<Notify> {
        self.targets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(target)
            .or_default()
            .clone()
    }
}
