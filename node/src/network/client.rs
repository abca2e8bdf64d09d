//! [`PeerNetwork`]: openraft's `RaftNetworkV2` for one peer over tonic (unary calls here; the
//! streaming ones in `streams.rs`), and the mapping of transport failures to openraft errors.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use openraft::base::BoxFuture;
use openraft::base::BoxStream;
use openraft::errors::NetworkError;
use openraft::errors::RPCError;
use openraft::errors::ReplicationClosed;
use openraft::errors::StreamingError;
use openraft::errors::Timeout;
use openraft::errors::Unreachable;
use openraft::network::Backoff;
use openraft::network::RPCOption;
use openraft::network::RPCTypes;
use openraft::network::RaftNetworkV2;
use openraft::raft::AppendEntriesRequest;
use openraft::raft::AppendEntriesResponse;
use openraft::raft::SnapshotResponse;
use openraft::raft::StreamAppendResult;
use openraft::raft::TransferLeaderRequest;
use openraft::raft::TransferLeaderResponse;
use openraft::raft::VoteRequest;
use openraft::raft::VoteResponse;
use openraft::storage::Snapshot;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use raftmq_proto::v1::RaftRequest;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::Channel;
use tonic::Code;
use tonic::Status;

use super::codec;
use super::snapshot::SnapshotSource;
use super::split;
use super::PeerNetworkOptions;

/// The connection to one peer, as openraft's replication, heartbeat and snapshot tasks use it.
pub struct PeerNetwork<C, SD> {
    pub(super) ctx: Ctx,
    pub(super) opts: Arc<PeerNetworkOptions>,
    /// `Err` when the peer's address cannot be a URI: every call answers `Unreachable`.
    pub(super) client: Result<PeerClient, String>,
    /// The TLS generation `client` was made with, and how to get the channel of the current
    /// one: after a certificate or CA reload, calls go on a new connection with the new
    /// material (the old connection serves the calls already on it).
    pub(super) tls_refresh: Option<(u64, PeerClientSource)>,
    /// Replication streams that failed to open in a row (0 after one opened); each failure
    /// waits the next backoff delay before it is reported (see `streams.rs`).
    pub(super) failed_opens: u32,
    /// Of those, the opens that timed out in a row: each makes the next open wait longer
    /// ([`super::PeerNetworkOptions::open_timeout`]).
    pub(super) timed_out_opens: u32,
    pub(super) _types: PhantomData<fn() -> (C, SD)>,
}

/// Makes the client of a peer from the factory's current channel.
pub(super) type PeerClientSource = Arc<dyn Fn() -> Result<PeerClient, String> + Send + Sync>;

/// The clients of one peer connection.
#[derive(Clone)]
pub(super) struct PeerClient {
    /// Every call but StreamAppend.
    pub(super) rpc: RaftPeerClient<Channel>,
    /// StreamAppend, its requests framed by the leader ([`super::framed`]).
    pub(super) append: Channel,
}

/// The unary RPCs.
#[derive(Clone, Copy, Debug)]
enum Unary {
    AppendEntries,
    Vote,
    PreVote,
    TransferLeader,
}

impl Unary {
    fn rpc_type(self) -> RPCTypes {
        match self {
            Unary::AppendEntries => RPCTypes::AppendEntries,
            Unary::Vote | Unary::PreVote => RPCTypes::Vote,
            Unary::TransferLeader => RPCTypes::TransferLeader,
        }
    }

    fn names(self) -> (&'static str, &'static str) {
        match self {
            Unary::AppendEntries => ("AppendEntriesRequest", "AppendEntriesResponse"),
            Unary::Vote => ("VoteRequest", "VoteResponse"),
            Unary::PreVote => ("PreVoteRequest", "PreVoteResponse"),
            Unary::TransferLeader => ("TransferLeaderRequest", "TransferLeaderResponse"),
        }
    }
}

/// Who talks to whom, for errors and logs.
#[derive(Clone, Debug)]
pub(super) struct Ctx {
    pub(super) self_id: NodeId,
    pub(super) target: NodeId,
    pub(super) addr: String,
}

impl Ctx {
    pub(super) fn timeout<C: LogTypes>(&self, action: RPCTypes, ttl: Duration) -> Timeout<C> {
        Timeout {
            action,
            id: self.self_id,
            target: self.target,
            timeout: ttl,
        }
    }

    /// Maps a failed call to what openraft should do next (see the module docs).
    pub(super) fn status_error<C: LogTypes>(
        &self,
        action: RPCTypes,
        ttl: Duration,
        status: &Status,
    ) -> RPCError<C> {
        let what = format!(
            "{action} to node {} at {}: {:?}: {}",
            self.target,
            self.addr,
            status.code(),
            status.message()
        );
        // tonic reports its own client-side deadline as CANCELLED "Timeout expired".
        let deadline_hit = status.code() == Code::DeadlineExceeded
            || (status.code() == Code::Cancelled && status.message().contains("Timeout expired"));
        if deadline_hit {
            return RPCError::Timeout(self.timeout(action, ttl));
        }
        match status.code() {
            Code::Cancelled | Code::Unknown | Code::Internal | Code::Aborted => {
                tracing::debug!(target_node = self.target, error = %what, "peer rpc failed");
                RPCError::Network(NetworkError::from_string(what))
            }
            Code::FailedPrecondition
            | Code::InvalidArgument
            | Code::Unimplemented
            | Code::DataLoss => {
                tracing::warn!(target_node = self.target, error = %what, "peer refused rpc");
                RPCError::Unreachable(Unreachable::from_string(what))
            }
            _ => {
                tracing::debug!(target_node = self.target, error = %what, "peer unreachable");
                RPCError::Unreachable(Unreachable::from_string(what))
            }
        }
    }
}

impl<C: LogTypes, SD> PeerNetwork<C, SD> {
    pub(super) fn client(&self) -> Result<PeerClient, RPCError<C>> {
        let current = self.opts.tls.as_ref().map(|t| t.generation());
        let client = match (&self.tls_refresh, current) {
            (Some((made_with, source)), Some(now)) if *made_with != now => source(),
            _ => self.client.clone(),
        };
        client.map_err(|e| RPCError::Unreachable(Unreachable::from_string(e)))
    }

    /// One unary call: encode, send with a deadline of `option.hard_ttl()`, decode.
    async fn unary<Req, Resp>(
        &mut self,
        kind: Unary,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<C>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
    {
        let (req_name, resp_name) = kind.names();
        let payload =
            codec::encode(req_name, req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let reply = self.unary_raw(kind, payload, option).await?;
        codec::decode(resp_name, &reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }

    /// Sends an encoded request, returns the encoded reply.
    async fn unary_raw(
        &mut self,
        kind: Unary,
        payload: Vec<u8>,
        option: &RPCOption,
    ) -> Result<Vec<u8>, RPCError<C>> {
        let mut client = self.client()?.rpc;
        let ttl = option.hard_ttl();
        let mut request = tonic::Request::new(RaftRequest {
            cluster_id: self.opts.cluster_id.clone(),
            from_node_id: self.ctx.self_id,
            to_node_id: self.ctx.target,
            codec: codec::CODEC as i32,
            payload: payload.into(),
        });
        request.set_timeout(ttl);
        let call = async move {
            match kind {
                Unary::AppendEntries => client.append_entries(request).await,
                Unary::Vote => client.vote(request).await,
                Unary::PreVote => client.pre_vote(request).await,
                Unary::TransferLeader => client.transfer_leader(request).await,
            }
        };
        match tokio::time::timeout(ttl, call).await {
            Err(_elapsed) => Err(RPCError::Timeout(self.ctx.timeout(kind.rpc_type(), ttl))),
            Ok(Err(status)) => Err(self.ctx.status_error(kind.rpc_type(), ttl, &status)),
            Ok(Ok(reply)) => Ok(reply.into_inner().payload),
        }
    }

    /// AppendEntries as one or more unary calls (see `split.rs`), each with the reply timeout
    /// of its size ([`PeerNetworkOptions::reply_timeout`]).
    async fn append_unary(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        option: &RPCOption,
    ) -> Result<AppendEntriesResponse<C>, RPCError<C>> {
        let parts = split::encode_append(rpc, self.opts.append_part_bytes())
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut prev_last = None;
        for (i, part) in parts.into_iter().enumerate() {
            let ttl = self
                .opts
                .reply_timeout(option.hard_ttl(), part.payload.len());
            let reply = self
                .unary_raw(Unary::AppendEntries, part.payload, &RPCOption::new(ttl))
                .await?;
            let resp: AppendEntriesResponse<C> = codec::decode("AppendEntriesResponse", &reply)
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
            if let Err(merged) = split::merge_unary(i, prev_last, resp) {
                return Ok(merged);
            }
            prev_last = part.last;
        }
        Ok(AppendEntriesResponse::Success)
    }
}

impl<C, SD> RaftNetworkV2<C> for PeerNetwork<C, SD>
where
    C: LogTypes,
    SD: SnapshotSource,
{
    type SnapshotData = SD;

    /// openraft's unary path (it replicates and sends heartbeats on streams): on an `async`
    /// node the commit index is lowered to what the gate lets out now (`commit_gate.rs`);
    /// the next request carries the newer one.
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<C>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<C>, RPCError<C>> {
        if let Some(gate) = &self.opts.commit_gate {
            super::commit_gate::clamp(gate, &mut rpc);
        }
        self.append_unary(rpc, &option).await
    }

    /// Pipelined replication over one bidirectional gRPC stream: requests go out as openraft
    /// produces them, results come back in order. A result that does not arrive within the
    /// reply timeout of the oldest outstanding part ([`PeerNetworkOptions::reply_timeout`],
    /// at least `hard_ttl`) ends the stream with `Timeout`.
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, Result<StreamAppendResult<C>, RPCError<C>>>, RPCError<C>>>
    where
        S: futures::Stream<Item = AppendEntriesRequest<C>> + Send + Unpin + 'static,
    {
        Box::pin(self.open_append_stream(input, option))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<C>,
        option: RPCOption,
    ) -> Result<VoteResponse<C>, RPCError<C>> {
        self.unary(Unary::Vote, &rpc, &option).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<C>,
        option: RPCOption,
    ) -> Result<VoteResponse<C>, RPCError<C>> {
        self.unary(Unary::PreVote, &rpc, &option).await
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<C>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<C>, RPCError<C>> {
        self.unary(Unary::TransferLeader, &req, &option).await
    }

    /// Streams the snapshot in chunks of `option.snapshot_chunk_size()` (or the configured
    /// default). The deadline is per chunk: the call fails with `Timeout` when no chunk was
    /// taken by the transport for `hard_ttl`, so large snapshots are not cut short.
    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<raftmq_raft_log::types::CommittedLeaderId, NodeId, PeerNode, SD>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<C>, StreamingError<C>> {
        self.send_snapshot(vote, snapshot, cancel, option).await
    }

    fn backoff(&self) -> Option<Backoff> {
        Some(Backoff::new(self.opts.backoff_delays()))
    }
}
