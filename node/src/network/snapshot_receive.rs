//! One InstallSnapshot transfer up to the point openraft may see it: the ids check that keeps
//! a forged header from tripping openraft's assertions (which would stop the node), and the
//! chunk loop into a [`SnapshotSink`] ending with a verified snapshot.
//!
//! Every early return drops the sink's partial snapshot, which removes what it wrote; a
//! snapshot refused by `verify` is removed by the sink.

use std::sync::atomic::Ordering;

use raftmq_proto::v1::SnapshotChunk;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::Vote;
use tonic::Status;
use tonic::Streaming;

use super::fault::PeerFaults;
use super::server_parts::PeerServiceStats;
use super::snapshot::SnapshotSink;

/// Refuses (INVALID_ARGUMENT) a snapshot openraft would assert on: a last log id whose term
/// lies above the vote that sends it (no leader can own such an entry), or one above this
/// node's committed id at an index not above it (two entries in one committed slot).
/// `committed` is this node's committed id as read just before; it only grows, so a
/// snapshot refused by it would be refused later too.
pub(super) fn check_ids(
    vote: &Vote,
    last: Option<&LogId>,
    committed: Option<&LogId>,
) -> Result<(), Status> {
    let Some(last) = last else {
        return Ok(());
    };
    if last.leader_id.term > vote.leader_id().term {
        return Err(Status::invalid_argument(format!(
            "snapshot refused: its last log id {last} lies above its vote {vote} (term {} > {})",
            last.leader_id.term,
            vote.leader_id().term
        )));
    }
    if let Some(c) = committed {
        if last > c && last.index <= c.index {
            return Err(Status::invalid_argument(format!(
                "snapshot refused: its last log id {last} contradicts this node's committed \
                 log id {c} (a later term at an index not above it)"
            )));
        }
    }
    Ok(())
}

/// A sink error as a status: a snapshot over its size cap (`FileTooLarge`) or a full disk is
/// RESOURCE_EXHAUSTED, anything else INTERNAL.
fn sink_status(e: std::io::Error) -> Status {
    match e.kind() {
        std::io::ErrorKind::FileTooLarge | std::io::ErrorKind::StorageFull => {
            Status::resource_exhausted(format!("snapshot refused: {e}"))
        }
        _ => Status::internal(format!("snapshot receive failed: {e}")),
    }
}

/// Where one transfer comes from and what it is counted in.
pub(super) struct Transfer<'a> {
    /// The sending node.
    pub from: NodeId,
    /// Counts the chunks.
    pub stats: &'a PeerServiceStats,
    /// Test hook: corrupt one chunk of this transfer.
    pub corrupt: Option<&'a PeerFaults>,
}

/// Receives the chunks of `stream` (starting with `first`) into `sink`, then verifies the
/// snapshot against `last`. Returns it with the bytes received; DATA_LOSS if verify refused
/// it, ABORTED if the stream ended early, INVALID_ARGUMENT for a gap.
pub(super) async fn receive<SD: Send, K: SnapshotSink<SD>>(
    sink: &K,
    t: Transfer<'_>,
    first: SnapshotChunk,
    stream: &mut Streaming<SnapshotChunk>,
    last: Option<LogId>,
) -> Result<(SD, u64), Status> {
    let mut partial = sink.begin().await.map_err(sink_status)?;
    let mut received: u64 = 0;
    let mut chunk = first;
    let mut corrupt = t.corrupt;
    loop {
        if let (Some(f), true) = (corrupt, chunk.offset > 0 && !chunk.data.is_empty()) {
            f.corrupt_chunk(&mut chunk.data);
            corrupt = None;
        }
        if chunk.offset != received {
            return Err(Status::invalid_argument(format!(
                "snapshot chunk at offset {}, expected {received}",
                chunk.offset
            )));
        }
        if !chunk.data.is_empty() {
            sink.write_chunk(&mut partial, chunk.offset, &chunk.data)
                .await
                .map_err(sink_status)?;
            received += chunk.data.len() as u64;
            t.stats.snapshot_chunks.fetch_add(1, Ordering::Relaxed);
        }
        if chunk.done {
            break;
        }
        chunk = stream
            .message()
            .await?
            .ok_or_else(|| Status::aborted("snapshot stream ended before its last chunk"))?;
    }
    let data = sink.finish(partial).await.map_err(sink_status)?;
    // Refuse a bad snapshot here, before openraft: an install error would stop Raft.
    match sink.verify(data, last).await {
        Ok(d) => Ok((d, received)),
        Err(e) => {
            tracing::warn!(from_node = t.from, bytes = received, error = %e,
                "snapshot refused; the leader will send again");
            Err(Status::data_loss(format!("snapshot refused: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_above_the_vote_or_against_the_committed_slot_are_refused() {
        let vote = Vote::new_committed(5, 2);
        let ok = LogId::new_term_index(5, 100);
        check_ids(&vote, Some(&ok), None).expect("at the vote's term");
        check_ids(&vote, None, None).expect("an empty snapshot");
        let above = LogId::new_term_index(6, 100);
        let e = check_ids(&vote, Some(&above), None).expect_err("above the vote");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("above its vote"), "{e:?}");
        let committed = LogId::new_term_index(4, 100);
        let e = check_ids(&vote, Some(&ok), Some(&committed)).expect_err("same slot");
        assert!(e.message().contains("committed"), "{e:?}");
        check_ids(
            &vote,
            Some(&LogId::new_term_index(5, 101)),
            Some(&committed),
        )
        .expect("past the committed index");
        check_ids(&vote, Some(&LogId::new_term_index(3, 90)), Some(&committed))
            .expect("below committed: openraft declines it itself");
    }

    #[test]
    fn a_size_cap_is_resource_exhausted() {
        let e = std::io::Error::new(std::io::ErrorKind::FileTooLarge, "max-snapshot-bytes");
        assert_eq!(sink_status(e).code(), tonic::Code::ResourceExhausted);
        let e = std::io::Error::other("disk");
        assert_eq!(sink_status(e).code(), tonic::Code::Internal);
    }
}
