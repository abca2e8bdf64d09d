//! The Raft transport between peers: openraft's network traits over tonic gRPC.
//!
//! - [`PeerNetworkFactory`] (client side) implements `RaftNetworkFactory`: one long-lived,
//!   lazily connected HTTP/2 [`tonic::transport::Channel`] per peer for replication,
//!   heartbeats and votes (plus one for snapshots); tonic re-dials a broken connection on the
//!   next call, and openraft spaces retries with our capped exponential
//!   [`Backoff`](openraft::network::Backoff). Replication is pipelined over a bidirectional
//!   `StreamAppend` stream; requests above the message limit are split (`split.rs`).
//! - [`PeerService`] (server side) implements the generated `RaftPeer` service and forwards
//!   each request into `openraft::Raft`.
//!
//! Error mapping (what openraft does next): a connect failure or UNAVAILABLE answer →
//! `Unreachable` (back off, then retry); a broken stream or other transport error →
//! `NetworkError` (retry at once); no answer within `RPCOption::hard_ttl` → `Timeout`; a
//! refused request (wrong cluster id or target node, unknown codec) → `Unreachable`, logged
//! as a warning, because retrying cannot fix configuration but must not stop Raft either.
//!
//! A follower whose leader's replication stream breaks pre-votes as soon as its leader lease
//! ends, instead of also waiting out its election timeout ([`LeaderContact`]).
//!
//! Invariant: a request is processed only by a node whose cluster id and node id match the
//! request's; see [`PeerService`].

mod checker;
mod client;
mod codec;
mod factory;
pub mod fault;
mod leader_contact;
mod server;
mod snapshot;
mod split;
mod streams;
mod vote_guard;

use std::time::Duration;

pub use client::PeerNetwork;
pub use codec::CodecError;
pub use factory::PeerNetworkFactory;
pub use leader_contact::LeaderContact;
pub use leader_contact::StreamEnd;
pub use server::PeerService;
pub use server::PeerServiceStats;
pub use snapshot::MemorySnapshotSink;
pub use snapshot::SnapshotSink;
pub use snapshot::SnapshotSource;
pub use vote_guard::FloorFn;
pub use vote_guard::VoteGuard;

/// Default gRPC message size limit for peer traffic: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;

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
        }
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
