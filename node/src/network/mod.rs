//! The Raft transport between peers: openraft's network traits over tonic gRPC.
//!
//! - [`PeerNetworkFactory`] (client side) implements `RaftNetworkFactory`: one long-lived,
//!   lazily connected HTTP/2 [`tonic::transport::Channel`] per peer for replication,
//!   heartbeats and votes (plus one for snapshots); tonic re-dials a broken connection on the
//!   next call, and openraft spaces retries with our capped exponential
//!   [`Backoff`](openraft::network::Backoff). Replication is pipelined over a bidirectional
//!   `StreamAppend` stream; requests above the message limit are split (`split.rs`).
//! - [`PeerService`] (server side) implements the generated `RaftPeer` service and forwards
//!   each request into `openraft::Raft`; [`PeerServer`] serves it, StreamAppend on the raw
//!   HTTP/2 body so a request's entry payloads stay slices of the frames they arrived in
//!   (`raw_append.rs`).
//!
//! Error mapping (what openraft does next): a connect failure or UNAVAILABLE answer →
//! `Unreachable` (back off, then retry); a broken stream or other transport error →
//! `NetworkError` (retry at once); no answer in time → `Timeout` (`RPCOption::hard_ttl`, but
//! for replication at least [`PeerNetworkOptions::reply_timeout`]: openraft asks for one
//! heartbeat interval, shorter than a follower takes to write and fsync a large request); a
//! refused request (wrong cluster id or target node, unknown codec) → `Unreachable`, logged
//! as a warning, because retrying cannot fix configuration but must not stop Raft either.
//!
//! A replication session's request stream ends with its reply side (`session_input.rs`), so
//! a timed-out session cannot take the entries of the next one; the catch-up watcher can end
//! an idle stream to a follower that stays behind ([`ReplicationKick`]).
//!
//! A follower whose leader's replication stream breaks pre-votes as soon as its leader lease
//! ends, instead of also waiting out its election timeout ([`LeaderContact`]).
//!
//! Invariant: a request is processed only by a node whose cluster id and node id match the
//! request's; see [`PeerService`].

mod append_replies;
mod append_request;
mod checker;
mod client;
pub(crate) mod codec;
mod commit_gate;
mod commit_hold;
mod factory;
pub mod fault;
mod framed;
mod kick;
mod leader_contact;
mod raw_append;
mod rope;
mod server;
mod server_parts;
mod session_input;
mod snapshot;
mod snapshot_receive;
mod split;
mod stream_append;
mod streams;
mod vote_guard;

use std::sync::Arc;
use std::time::Duration;

pub use client::PeerNetwork;
pub use codec::CodecError;
pub use factory::PeerNetworkFactory;
pub use kick::ReplicationKick;
pub use leader_contact::LeaderContact;
pub use leader_contact::StreamEnd;
pub use raw_append::PeerServer;
pub use server::PeerService;
pub use server_parts::PeerServiceStats;
pub use snapshot::MemorySnapshotSink;
pub use snapshot::SnapshotSink;
pub use snapshot::SnapshotSource;
pub use vote_guard::FloorFn;
pub use vote_guard::VoteGuard;

/// Default gRPC message size limit for peer traffic: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Default wait for the answer to one replication request part before its byte allowance.
pub const DEFAULT_REPLICATION_TIMEOUT: Duration = Duration::from_secs(1);

/// Extra wait per MiB a replication request part carries: the follower writes and fsyncs it
/// before it answers (100 ms per MiB = a 10 MiB/s floor, for disks shared with other load).
pub const REPLICATION_TIMEOUT_PER_MIB: Duration = Duration::from_millis(100);

/// Largest part an AppendEntries request is cut into for replication (see `split.rs`),
/// bytes: a follower answers (and the leader learns its progress) at least every 8 MiB.
pub const MAX_APPEND_PART_BYTES: usize = 8 << 20;

/// How often a replication stream's open timeout doubles after opens that timed out in a row
/// ([`PeerNetworkOptions::open_timeout`]: at most 8 × the base).
pub const MAX_OPEN_TIMEOUT_DOUBLINGS: u32 = 3;

/// A mutex's guard, also after a panic while it was held (the guarded state stays usable: each
/// holder leaves it consistent between its steps).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Settings of the peer transport (client and server side).
#[derive(Clone, Debug)]
pub struct PeerNetworkOptions {
    /// Cluster id sent with every request and checked by every receiver.
    pub cluster_id: String,
    /// Largest gRPC message sent or accepted. Must exceed the largest AppendEntries batch
    /// (`max_payload_entries` x the largest entry) plus framing.
    pub max_message_bytes: usize,
    /// Timeout of one TCP connect attempt.
    pub connect_timeout: Duration,
    /// First retry delay after a peer was unreachable.
    pub backoff_initial: Duration,
    /// Retry delay cap; the delay doubles from `backoff_initial` up to this.
    pub backoff_max: Duration,
    /// Snapshot chunk size used when openraft does not specify one.
    pub snapshot_chunk_bytes: usize,
    /// HTTP/2 keep-alive ping interval, detecting dead connections while idle.
    pub keepalive_interval: Duration,
    /// How long a replication stream waits for the answer to its oldest request part before
    /// it ends with `Timeout`, before the part's byte allowance ([`Self::reply_timeout`]).
    /// openraft asks for one heartbeat interval, far too short for a part of many MiB.
    pub replication_timeout: Duration,
    /// Ends idle replication streams on request of the catch-up watcher.
    pub kick: Arc<ReplicationKick>,
    /// TLS towards peers (node certificate, CA; None: plaintext). A reload makes new channels.
    pub tls: Option<Arc<crate::tls::TlsState>>,
    /// Set on connections to peers on this host (`loopback-congestion-control`).
    pub congestion: crate::tls::LoopbackCongestion,
    /// How long a commit-only AppendEntries waits for the next entries to travel with
    /// (`commit_hold`); zero sends it at once.
    pub commit_hold: Duration,
    /// On an `async` node, the log's gate that every request's commit index passes
    /// (`commit_gate`); `None` on a `sync` node, whose commit index is always durable.
    pub commit_gate: Option<raftmq_raft_log::CommitGate>,
}

impl PeerNetworkOptions {
    /// Defaults for cluster `cluster_id`.
    pub fn new(cluster_id: impl Into<String>) -> Self {
        Self {
            cluster_id: cluster_id.into(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_millis(500),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            snapshot_chunk_bytes: 1 << 20,
            keepalive_interval: Duration::from_secs(10),
            replication_timeout: DEFAULT_REPLICATION_TIMEOUT,
            kick: Arc::default(),
            tls: None,
            congestion: crate::tls::LoopbackCongestion::new(
                crate::tls::congestion::DEFAULT_LOOPBACK_CONGESTION_CONTROL,
            ),
            commit_hold: commit_hold::COMMIT_HOLD,
            commit_gate: None,
        }
    }

    /// How long to wait for the answer to a replication request part of `part_bytes`:
    /// `replication_timeout` plus [`REPLICATION_TIMEOUT_PER_MIB`] per MiB, and never less
    /// than openraft's `hard_ttl`.
    pub fn reply_timeout(&self, hard_ttl: Duration, part_bytes: usize) -> Duration {
        let per_mib = REPLICATION_TIMEOUT_PER_MIB.as_micros() as u64;
        let allowance = Duration::from_micros((part_bytes as u64).saturating_mul(per_mib) >> 20);
        hard_ttl.max(self.replication_timeout.saturating_add(allowance))
    }

    /// How long to wait for a replication stream to open (its response headers) after
    /// `timed_out` opens in a row timed out: [`PeerNetworkOptions::reply_timeout`] of an empty
    /// part, doubled per timeout up to [`MAX_OPEN_TIMEOUT_DOUBLINGS`] times.
    ///
    /// Every new stream resends the follower's whole backlog from its matched index; when the
    /// nodes are so starved for CPU that one open takes longer than the fixed timeout, each
    /// retry did the same work again and timed out again, and a follower never caught up. A
    /// peer that is down fails at connect, not here.
    pub fn open_timeout(&self, hard_ttl: Duration, timed_out: u32) -> Duration {
        let base = self.reply_timeout(hard_ttl, 0);
        base.saturating_mul(1 << timed_out.min(MAX_OPEN_TIMEOUT_DOUBLINGS))
    }

    /// The byte size replication request parts are cut to: [`MAX_APPEND_PART_BYTES`], at
    /// most the message limit.
    pub fn append_part_bytes(&self) -> usize {
        self.max_message_bytes.min(MAX_APPEND_PART_BYTES)
    }

    /// The retry delays: `backoff_initial`, doubled each time, capped at `backoff_max`.
    pub fn backoff_delays(&self) -> impl Iterator<Item = Duration> + Send + 'static {
        let max = self.backoff_max.max(Duration::from_millis(1));
        let mut next = self.backoff_initial.min(max);
        std::iter::repeat_with(move || {
            let d = next;
            next = (next * 2).min(max);
            d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_timeout_doubles_per_timed_out_open_up_to_eight_times_the_reply_timeout() {
        let mut opts = PeerNetworkOptions::new("c");
        opts.replication_timeout = Duration::from_millis(1_000);
        let hard_ttl = Duration::from_millis(50);
        let waits: Vec<u128> = (0..6)
            .map(|n| opts.open_timeout(hard_ttl, n).as_millis())
            .collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
        assert_eq!(opts.open_timeout(hard_ttl, u32::MAX).as_millis(), 8_000);
        // Never below openraft's own deadline.
        assert_eq!(
            opts.open_timeout(Duration::from_secs(3), 0),
            Duration::from_secs(3)
        );
    }
}
