//! The checks every peer request passes before Raft sees it: addressing (cluster id, target
//! node, payload codec), payload decoding, and the injected link faults of tests.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use raftmq_proto::v1::RaftRequest;
use raftmq_raft_log::types::NodeId;
use tonic::Status;

use super::codec;
use super::fault::PeerFaults;
use super::raw_append::PeerRequest;
use super::server_parts::PeerServiceStats;

/// The addressing checks of this node, detached from the service so streams can own it.
#[derive(Clone)]
pub(super) struct Checker {
    pub(super) node_id: NodeId,
    pub(super) cluster_id: String,
    pub(super) stats: Arc<PeerServiceStats>,
    pub(super) faults: Option<Arc<PeerFaults>>,
}

impl Checker {
    /// Checks the addressing fields every request carries.
    pub(super) fn check(
        &self,
        cluster_id: &str,
        from: NodeId,
        to: NodeId,
        codec: i32,
    ) -> Result<(), Status> {
        let res = self.check_fields(cluster_id, from, to, codec);
        if res.is_err() {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    fn check_fields(
        &self,
        cluster_id: &str,
        from: NodeId,
        to: NodeId,
        codec: i32,
    ) -> Result<(), Status> {
        if cluster_id != self.cluster_id {
            tracing::warn!(
                from_node = from,
                their_cluster = cluster_id,
                "peer request from another cluster refused"
            );
            return Err(Status::failed_precondition(format!(
                "cluster id mismatch: request from node {from} is for cluster {cluster_id:?}, \
                 but node {} belongs to cluster {:?}",
                self.node_id, self.cluster_id
            )));
        }
        if to != self.node_id {
            return Err(Status::failed_precondition(format!(
                "node id mismatch: request from node {from} is for node {to}, but this is node {}",
                self.node_id
            )));
        }
        if codec != codec::CODEC as i32 {
            return Err(Status::failed_precondition(format!(
                "unsupported payload codec {codec} from node {from}; this node speaks {:?}",
                codec::CODEC
            )));
        }
        Ok(())
    }

    pub(super) async fn fault_in(&self, from: NodeId) -> Result<(), Status> {
        fault_in(&self.faults, from, self.node_id).await
    }

    pub(super) fn fault_out(&self, from: NodeId) -> Result<(), Status> {
        fault_out(&self.faults, from, self.node_id)
    }

    pub(super) fn decode<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        req: &RaftRequest,
    ) -> Result<T, Status> {
        self.check(&req.cluster_id, req.from_node_id, req.to_node_id, req.codec)?;
        codec::decode_shared(what, &req.payload)
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }

    /// [`Checker::decode`] of a request whose payload is in pieces (`raw_append`).
    pub(super) fn decode_parts<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        req: &PeerRequest,
    ) -> Result<T, Status> {
        let f = &req.fields;
        self.check(&f.cluster_id, f.from_node_id, f.to_node_id, f.codec)?;
        codec::decode_parts(what, &req.payload).map_err(|e| Status::invalid_argument(e.to_string()))
    }
}

/// Injected faults (tests only), before node `me` processes a request from `from`.
pub(super) async fn fault_in(
    faults: &Option<Arc<PeerFaults>>,
    from: NodeId,
    me: NodeId,
) -> Result<(), Status> {
    match faults {
        Some(f) => f.inbound(from, me).await,
        None => Ok(()),
    }
}

/// Injected faults (tests only), before node `me` answers a request from `from`.
pub(super) fn fault_out(
    faults: &Option<Arc<PeerFaults>>,
    from: NodeId,
    me: NodeId,
) -> Result<(), Status> {
    match faults {
        Some(f) => f.outbound(from, me),
        None => Ok(()),
    }
}
