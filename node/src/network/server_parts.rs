//! What the peer service's handlers share: its request counters, the disk gate that refuses
//! entries on a full disk, and the encoding of replies and of a stopped Raft.

use std::fmt::Display;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use raftmq_proto::v1::RaftReply;
use serde::Serialize;
use tonic::Response;
use tonic::Status;

use super::codec;

/// Answers `Some(reason)` while the node must refuse entries and snapshots (its disk is full).
pub type DiskGate = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// A request with entries (not a heartbeat) refused because `gate` says so.
pub(super) fn disk_refusal(gate: &Option<DiskGate>, entries: usize) -> Option<Status> {
    if entries == 0 {
        return None;
    }
    gate.as_ref()
        .and_then(|g| g())
        .map(Status::resource_exhausted)
}

/// Requests served by a [`PeerService`], by kind (for metrics and tests).
#[derive(Debug, Default)]
pub struct PeerServiceStats {
    /// Unary AppendEntries calls.
    pub append_entries: AtomicU64,
    /// AppendEntries requests received over StreamAppend streams.
    pub stream_append_requests: AtomicU64,
    /// Vote and PreVote calls.
    pub votes: AtomicU64,
    /// Snapshot chunks received.
    pub snapshot_chunks: AtomicU64,
    /// Snapshots installed.
    pub snapshots_installed: AtomicU64,
    /// Requests refused (cluster id, node id, codec or decoding).
    pub refused: AtomicU64,
}

/// Encodes `value` as the payload of a peer reply.
pub(super) fn reply<T: Serialize>(
    what: &'static str,
    value: &T,
) -> Result<Response<RaftReply>, Status> {
    let payload = codec::encode(what, value).map_err(|e| Status::internal(e.to_string()))?;
    Ok(Response::new(RaftReply { payload }))
}

/// Raft refused to process a request (it has stopped): the peer should back off.
pub(super) fn raft_stopped(e: impl Display) -> Status {
    Status::unavailable(format!("raft is not running on this node: {e}"))
}
