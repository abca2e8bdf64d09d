//! Server side of the peer transport: the `RaftPeer` gRPC service feeding `openraft::Raft`.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use openraft::async_runtime::WatchReceiver;
use openraft::raft::AppendEntriesRequest;
use openraft::raft::TransferLeaderRequest;
use openraft::raft::VoteRequest;
use openraft::storage::RaftStateMachine;
use openraft::storage::Snapshot;
use openraft::storage::SnapshotMeta;
use openraft::Raft;
use raftmq_proto::v1::raft_peer_server::RaftPeer;
use raftmq_proto::v1::RaftReply;
use raftmq_proto::v1::RaftRequest;
use raftmq_proto::v1::SnapshotChunk;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use tonic::Request;
use tonic::Response;
use tonic::Status;
use tonic::Streaming;

use super::checker::fault_in;
use super::checker::fault_out;
use super::checker::Checker;
use super::codec;
use super::fault::PeerFaults;
use super::leader_contact::LeaderContact;
use super::raw_append::AppendStream;
use super::raw_append::PeerRequest;
use super::raw_append::PeerServer;
use super::server_parts::disk_refusal;
use super::server_parts::raft_stopped;
use super::server_parts::reply;
use super::server_parts::DiskGate;
use super::server_parts::PeerServiceStats;
use super::snapshot::SnapshotSink;
use super::snapshot_receive::check_ids;
use super::snapshot_receive::receive;
use super::snapshot_receive::Transfer;
use super::vote_guard::FloorFn;
use super::vote_guard::VoteGuard;

/// The `RaftPeer` gRPC service of one node.
///
/// Invariants:
/// - A request whose `cluster_id` differs from this node's, or whose `to_node_id` is not this
///   node, is refused with FAILED_PRECONDITION naming both values and never reaches Raft.
/// - Votes, pre-votes and leader transfers pass the [`VoteGuard`] first.
pub struct PeerService<C, SM, K>
where
    C: LogTypes,
    SM: RaftStateMachine<C>,
{
    pub(super) raft: Raft<C, SM>,
    pub(super) node_id: NodeId,
    cluster_id: String,
    sink: Arc<K>,
    stats: Arc<PeerServiceStats>,
    /// Injected link faults (tests only; see `fault.rs`).
    faults: Option<Arc<PeerFaults>>,
    /// This node's lost-commit floor, if the vote guard is on.
    pub(super) vote_guard: VoteGuard,
    /// When a leader was last heard; pre-votes when its stream breaks.
    pub(super) contact: Arc<LeaderContact>,
    /// `Some(reason)` while this node takes no entries (disk full, see `disk_guard`).
    pub(super) disk_gate: Option<DiskGate>,
}

impl<C, SM, K> PeerService<C, SM, K>
where
    C: LogTypes,
    SM: RaftStateMachine<C>,
    K: SnapshotSink<SM::SnapshotData>,
{
    /// Serves `raft` (node `node_id` of cluster `cluster_id`); received snapshots are rebuilt
    /// by `sink`.
    pub fn new(raft: Raft<C, SM>, node_id: NodeId, cluster_id: impl Into<String>, sink: K) -> Self {
        let cluster_id = cluster_id.into();
        Self {
            raft,
            node_id,
            faults: super::fault::faults_of(&cluster_id),
            cluster_id,
            sink: Arc::new(sink),
            stats: Arc::default(),
            vote_guard: VoteGuard::default(),
            contact: Arc::default(),
            disk_gate: None,
        }
    }

    /// Turns on the vote guard: `floor` reads this node's lost-commit floor.
    pub fn with_lost_commit_floor(mut self, floor: FloorFn) -> Self {
        self.vote_guard = VoteGuard::new(floor);
        self
    }

    /// Refuses AppendEntries with entries, and snapshots, with RESOURCE_EXHAUSTED while `gate`
    /// answers a reason (heartbeats still pass); the leader backs off and sends again.
    pub fn with_disk_gate(mut self, gate: DiskGate) -> Self {
        self.disk_gate = Some(gate);
        self
    }

    /// Counts the Pre-Votes started because a leader's stream broke in `counter`.
    pub fn with_pre_vote_counter(
        mut self,
        counter: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        self.contact = Arc::new(LeaderContact::counting(counter));
        self
    }

    /// This node's current vote.
    fn current_vote(&self) -> Vote {
        self.raft.metrics().borrow_watched().vote
    }

    async fn fault_in(&self, from: NodeId) -> Result<(), Status> {
        fault_in(&self.faults, from, self.node_id).await
    }

    fn fault_out(&self, from: NodeId) -> Result<(), Status> {
        fault_out(&self.faults, from, self.node_id)
    }

    /// Counters of the requests this service has served.
    pub fn stats(&self) -> Arc<PeerServiceStats> {
        self.stats.clone()
    }

    /// The gRPC service (StreamAppend on the raw body, see `raw_append`) with message limits
    /// of `max_message_bytes` both ways.
    pub fn into_server(self, max_message_bytes: usize) -> PeerServer<Self> {
        PeerServer::new(self, max_message_bytes)
    }

    pub(super) fn checker(&self) -> Checker {
        Checker {
            node_id: self.node_id,
            cluster_id: self.cluster_id.clone(),
            stats: self.stats.clone(),
            faults: self.faults.clone(),
        }
    }

    fn check(&self, cluster_id: &str, from: NodeId, to: NodeId, codec: i32) -> Result<(), Status> {
        self.checker().check(cluster_id, from, to, codec)
    }

    fn decode_request<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        req: &RaftRequest,
    ) -> Result<T, Status> {
        self.checker().decode(what, req)
    }
}

#[tonic::async_trait]
impl<C, SM, K> RaftPeer for PeerService<C, SM, K>
where
    C: LogTypes,
    SM: RaftStateMachine<C>,
    K: SnapshotSink<SM::SnapshotData>,
{
    async fn append_entries(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let rpc: AppendEntriesRequest<C> =
            self.decode_request("AppendEntriesRequest", request.get_ref())?;
        let from = request.get_ref().from_node_id;
        self.fault_in(from).await?;
        self.stats.append_entries.fetch_add(1, Ordering::Relaxed);
        self.contact.heard();
        if let Some(refusal) = disk_refusal(&self.disk_gate, rpc.entries.len()) {
            return Err(refusal);
        }
        let resp = self.raft.append_entries(rpc).await.map_err(raft_stopped)?;
        self.fault_out(from)?;
        reply("AppendEntriesResponse", &resp)
    }

    type StreamAppendStream =
        Pin<Box<dyn futures::Stream<Item = Result<RaftReply, Status>> + Send + 'static>>;

    /// Served on the raw body (`raw_append`); this is what tonic's own route would do.
    async fn stream_append(
        &self,
        request: Request<Streaming<RaftRequest>>,
    ) -> Result<Response<Self::StreamAppendStream>, Status> {
        use futures::StreamExt;
        let input = request.into_inner().map(|r| r.map(PeerRequest::from));
        Ok(Response::new(self.append_stream(Box::pin(input))))
    }

    async fn vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let rpc: VoteRequest<C> = self.decode_request("VoteRequest", request.get_ref())?;
        let from = request.get_ref().from_node_id;
        self.fault_in(from).await?;
        self.stats.votes.fetch_add(1, Ordering::Relaxed);
        let resp = match self.vote_guard.refuse("vote", &rpc, || self.current_vote()) {
            Some(refusal) => refusal,
            None => self.raft.vote(rpc).await.map_err(raft_stopped)?,
        };
        self.fault_out(from)?;
        reply("VoteResponse", &resp)
    }

    async fn pre_vote(&self, request: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        let rpc: VoteRequest<C> = self.decode_request("PreVoteRequest", request.get_ref())?;
        let from = request.get_ref().from_node_id;
        self.fault_in(from).await?;
        self.stats.votes.fetch_add(1, Ordering::Relaxed);
        let resp = match self
            .vote_guard
            .refuse("pre-vote", &rpc, || self.current_vote())
        {
            Some(refusal) => refusal,
            None => self.raft.pre_vote(rpc).await.map_err(raft_stopped)?,
        };
        self.fault_out(from)?;
        reply("PreVoteResponse", &resp)
    }

    async fn transfer_leader(
        &self,
        request: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        let rpc: TransferLeaderRequest<C> =
            self.decode_request("TransferLeaderRequest", request.get_ref())?;
        self.fault_in(request.get_ref().from_node_id).await?;
        if let Some(refusal) = self.vote_guard.refuse_transfer(self.node_id) {
            return Err(refusal);
        }
        let resp = self
            .raft
            .handle_transfer_leader(rpc)
            .await
            .map_err(raft_stopped)?;
        reply("TransferLeaderResponse", &resp)
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<RaftReply>, Status> {
        let mut stream = request.into_inner();
        let first = stream
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
        let header = first
            .header
            .clone()
            .ok_or_else(|| Status::invalid_argument("first snapshot chunk has no header"))?;
        self.check(
            &header.cluster_id,
            header.from_node_id,
            header.to_node_id,
            header.codec,
        )?;
        self.fault_in(header.from_node_id).await?;
        if let Some(refusal) = disk_refusal(&self.disk_gate, 1) {
            return Err(refusal);
        }
        let vote: Vote = codec::decode("Vote", &header.vote)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let meta: SnapshotMeta<CommittedLeaderId, NodeId, PeerNode> =
            codec::decode("SnapshotMeta", &header.meta)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
        tracing::info!(from_node = header.from_node_id, meta = %meta, "receiving snapshot");

        let committed = self
            .raft
            .with_raft_state(|st| st.local_committed().cloned())
            .await
            .map_err(raft_stopped)?;
        check_ids(&vote, meta.last_log_id.as_ref(), committed.as_ref())?;
        let transfer = Transfer {
            from: header.from_node_id,
            stats: &self.stats,
            corrupt: self
                .faults
                .as_deref()
                .filter(|f| f.take_snapshot_corruption(header.from_node_id, self.node_id)),
        };
        let (data, received) =
            receive(&*self.sink, transfer, first, &mut stream, meta.last_log_id).await?;
        // Removes the file if openraft declines (stale vote, already committed) or fails it.
        let _leftover = self.sink.leftover(&data);
        let snapshot = Snapshot {
            meta,
            snapshot: data,
        };
        let resp = self
            .raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(raft_stopped)?;
        self.stats
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            from_node = header.from_node_id,
            bytes = received,
            "snapshot installed"
        );
        reply("SnapshotResponse", &resp)
    }
}
