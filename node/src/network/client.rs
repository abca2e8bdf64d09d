//! Client side of the peer transport: `RaftNetworkFactory` and `RaftNetworkV2` over tonic.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

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
use openraft::network::RaftNetworkFactory;
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
use openraft::ErrorSubject;
use openraft::ErrorVerb;
use openraft::StorageError;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use raftmq_proto::v1::RaftRequest;
use raftmq_proto::v1::SnapshotChunk;
use raftmq_proto::v1::SnapshotHeader;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::Channel;
use tonic::transport::Endpoint;
use tonic::Code;
use tonic::Status;

use super::codec;
use super::snapshot::SnapshotSource;
use super::PeerNetworkOptions;

/// Creates [`PeerNetwork`] clients; keeps one channel per peer for the factory's lifetime.
///
/// `SD` is the state machine's snapshot data type (what `full_snapshot` sends).
pub struct PeerNetworkFactory<C, SD> {
    self_id: NodeId,
    opts: Arc<PeerNetworkOptions>,
    /// Invariant: one channel per peer id, replaced only when the peer's address changes.
    channels: Arc<Mutex<HashMap<NodeId, (String, Channel)>>>,
    _types: PhantomData<fn() -> (C, SD)>,
}

impl<C, SD> PeerNetworkFactory<C, SD> {
    /// A factory for node `self_id` (sent as the sender id of every request).
    pub fn new(self_id: NodeId, opts: PeerNetworkOptions) -> Self {
        Self {
            self_id,
            opts: Arc::new(opts),
            channels: Arc::new(Mutex::new(HashMap::new())),
            _types: PhantomData,
        }
    }

    /// The channel to `target` at `addr`, created (lazily connecting) on first use.
    fn channel(&self, target: NodeId, addr: &str) -> Result<Channel, String> {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((known_addr, ch)) = channels.get(&target) {
            if known_addr == addr {
                return Ok(ch.clone());
            }
        }
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("invalid raft address {addr:?} of node {target}: {e}"))?
            .connect_timeout(self.opts.connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(self.opts.keepalive_interval)
            .keep_alive_while_idle(true)
            .http2_adaptive_window(true);
        let ch = endpoint.connect_lazy();
        tracing::info!(target_node = target, addr, "peer channel created");
        channels.insert(target, (addr.to_string(), ch.clone()));
        Ok(ch)
    }
}

impl<C, SD> Clone for PeerNetworkFactory<C, SD> {
    fn clone(&self) -> Self {
        Self {
            self_id: self.self_id,
            opts: self.opts.clone(),
            channels: self.channels.clone(),
            _types: PhantomData,
        }
    }
}

impl<C, SD> RaftNetworkFactory<C> for PeerNetworkFactory<C, SD>
where
    C: LogTypes,
    SD: SnapshotSource,
{
    type Network = PeerNetwork<C, SD>;

    async fn new_client(&mut self, target: NodeId, node: &PeerNode) -> Self::Network {
        let client = self.channel(target, &node.raft_addr).map(|ch| {
            RaftPeerClient::new(ch)
                .max_decoding_message_size(self.opts.max_message_bytes)
                .max_encoding_message_size(self.opts.max_message_bytes)
        });
        PeerNetwork {
            ctx: Ctx {
                self_id: self.self_id,
                target,
                addr: node.raft_addr.clone(),
            },
            opts: self.opts.clone(),
            client,
            _types: PhantomData,
        }
    }
}

/// The connection to one peer, as openraft's replication, heartbeat and snapshot tasks use it.
pub struct PeerNetwork<C, SD> {
    ctx: Ctx,
    opts: Arc<PeerNetworkOptions>,
    /// `Err` when the peer's address cannot be a URI: every call answers `Unreachable`.
    client: Result<RaftPeerClient<Channel>, String>,
    _types: PhantomData<fn() -> (C, SD)>,
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
struct Ctx {
    self_id: NodeId,
    target: NodeId,
    addr: String,
}

impl Ctx {
    fn timeout<C: LogTypes>(&self, action: RPCTypes, ttl: Duration) -> Timeout<C> {
        Timeout {
            action,
            id: self.self_id,
            target: self.target,
            timeout: ttl,
        }
    }

    /// Maps a failed call to what openraft should do next (see the module docs).
    fn status_error<C: LogTypes>(
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
            Code::FailedPrecondition | Code::InvalidArgument | Code::Unimplemented => {
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
    fn client(&self) -> Result<RaftPeerClient<Channel>, RPCError<C>> {
        self.client
            .clone()
            .map_err(|e| RPCError::Unreachable(Unreachable::from_string(e)))
    }

    /// Opens the StreamAppend call and turns its replies into openraft's result stream.
    async fn open_append_stream<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> Result<BoxStream<'s, Result<StreamAppendResult<C>, RPCError<C>>>, RPCError<C>>
    where
        S: futures::Stream<Item = AppendEntriesRequest<C>> + Send + Unpin + 'static,
    {
        use futures::StreamExt;

        let mut client = self.client()?;
        let ttl = option.hard_ttl();
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        let (cluster_id, from, to) = (
            self.opts.cluster_id.clone(),
            self.ctx.self_id,
            self.ctx.target,
        );
        let requests = input.filter_map(move |req| {
            let encoded = codec::encode("AppendEntriesRequest", &req);
            let out = match encoded {
                Ok(payload) => {
                    counter.fetch_add(1, Ordering::Relaxed);
                    Some(RaftRequest {
                        cluster_id: cluster_id.clone(),
                        from_node_id: from,
                        to_node_id: to,
                        codec: codec::CODEC as i32,
                        payload,
                    })
                }
                Err(e) => {
                    tracing::error!(target_node = to, error = %e, "dropping unencodable append request");
                    None
                }
            };
            std::future::ready(out)
        });
        let ctx = self.ctx.clone();
        let replies = match tokio::time::timeout(ttl, client.stream_append(requests)).await {
            Err(_) => return Err(RPCError::Timeout(ctx.timeout(RPCTypes::AppendEntries, ttl))),
            Ok(Err(status)) => return Err(ctx.status_error(RPCTypes::AppendEntries, ttl, &status)),
            Ok(Ok(resp)) => resp.into_inner(),
        };
        struct St {
            replies: tonic::Streaming<raftmq_proto::v1::RaftReply>,
            received: u64,
            done: bool,
        }
        let st = St {
            replies,
            received: 0,
            done: false,
        };
        let results = futures::stream::unfold(st, move |mut st| {
            let ctx = ctx.clone();
            let sent = sent.clone();
            async move {
                if st.done {
                    return None;
                }
                loop {
                    let item = match tokio::time::timeout(ttl, st.replies.message()).await {
                        Err(_) if sent.load(Ordering::Relaxed) > st.received => {
                            Err(RPCError::Timeout(ctx.timeout(RPCTypes::AppendEntries, ttl)))
                        }
                        Err(_) => continue,
                        Ok(Ok(None)) => return None,
                        Ok(Err(status)) => {
                            Err(ctx.status_error(RPCTypes::AppendEntries, ttl, &status))
                        }
                        Ok(Ok(Some(reply))) => {
                            st.received += 1;
                            codec::decode::<StreamAppendResult<C>>(
                                "StreamAppendResult",
                                &reply.payload,
                            )
                            .map_err(|e| RPCError::Network(NetworkError::new(&e)))
                        }
                    };
                    st.done = item.is_err();
                    return Some((item, st));
                }
            }
        });
        Ok(Box::pin(results))
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
        let mut client = self.client()?;
        let payload =
            codec::encode(req_name, req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let ttl = option.hard_ttl();
        let mut request = tonic::Request::new(RaftRequest {
            cluster_id: self.opts.cluster_id.clone(),
            from_node_id: self.ctx.self_id,
            to_node_id: self.ctx.target,
            codec: codec::CODEC as i32,
            payload,
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
        let reply = match tokio::time::timeout(ttl, call).await {
            Err(_elapsed) => return Err(RPCError::Timeout(self.ctx.timeout(kind.rpc_type(), ttl))),
            Ok(Err(status)) => return Err(self.ctx.status_error(kind.rpc_type(), ttl, &status)),
            Ok(Ok(reply)) => reply.into_inner(),
        };
        codec::decode(resp_name, &reply.payload)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }
}

impl<C, SD> RaftNetworkV2<C> for PeerNetwork<C, SD>
where
    C: LogTypes,
    SD: SnapshotSource,
{
    type SnapshotData = SD;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<C>, RPCError<C>> {
        self.unary(Unary::AppendEntries, &rpc, &option).await
    }

    /// Pipelined replication over one bidirectional gRPC stream: requests go out as openraft
    /// produces them, results come back in order. A result that does not arrive within
    /// `hard_ttl` while requests are outstanding ends the stream with `Timeout`.
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
        let mut client = self.client()?;
        let ttl = option.hard_ttl();
        let chunk_bytes = option
            .snapshot_chunk_size()
            .unwrap_or(self.opts.snapshot_chunk_bytes)
            .clamp(1, self.opts.max_message_bytes.saturating_sub(4096).max(1));
        let signature = snapshot.meta.signature();
        let encode_err = |e: codec::CodecError| StreamingError::Network(NetworkError::new(&e));
        let header = SnapshotHeader {
            cluster_id: self.opts.cluster_id.clone(),
            from_node_id: self.ctx.self_id,
            to_node_id: self.ctx.target,
            codec: codec::CODEC as i32,
            vote: codec::encode("Vote", &vote).map_err(encode_err)?,
            meta: codec::encode("SnapshotMeta", &snapshot.meta).map_err(encode_err)?,
        };

        let started = Instant::now();
        let progress_ms = Arc::new(AtomicU64::new(0));
        let read_error: Arc<Mutex<Option<std::io::Error>>> = Arc::new(Mutex::new(None));
        let chunks = chunk_stream(
            snapshot.snapshot,
            header,
            chunk_bytes,
            started,
            progress_ms.clone(),
            read_error.clone(),
        );

        let call = client.install_snapshot(chunks);
        let watchdog = async {
            loop {
                tokio::time::sleep(ttl).await;
                let idle = started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(progress_ms.load(Ordering::Relaxed)));
                if idle >= ttl {
                    return;
                }
            }
        };
        let reply = tokio::select! {
            r = call => r,
            closed = cancel => return Err(StreamingError::Closed(closed)),
            _ = watchdog => return Err(StreamingError::Timeout(self.ctx.timeout(RPCTypes::InstallSnapshot, ttl))),
        };
        let local_err = read_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(io_err) = local_err {
            return Err(StreamingError::StorageError(StorageError::from_io_error(
                ErrorSubject::Snapshot(Some(signature)),
                ErrorVerb::Read,
                io_err,
            )));
        }
        let reply = match reply {
            Ok(r) => r.into_inner(),
            Err(status) => {
                return Err(self
                    .ctx
                    .status_error(RPCTypes::InstallSnapshot, ttl, &status)
                    .into())
            }
        };
        codec::decode("SnapshotResponse", &reply.payload)
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))
    }

    fn backoff(&self) -> Option<Backoff> {
        Some(Backoff::new(self.opts.backoff_delays()))
    }
}

/// The chunks of one snapshot transfer: header first, then data in order, `done` on the last.
/// A read error ends the stream early (the receiver then aborts) and is left in `read_error`.
fn chunk_stream<SD: SnapshotSource>(
    data: SD,
    header: SnapshotHeader,
    chunk_bytes: usize,
    started: Instant,
    progress_ms: Arc<AtomicU64>,
    read_error: Arc<Mutex<Option<std::io::Error>>>,
) -> impl futures::Stream<Item = SnapshotChunk> + Send + 'static {
    struct State<SD> {
        data: SD,
        header: Option<SnapshotHeader>,
        offset: u64,
        finished: bool,
    }
    let state = State {
        data,
        header: Some(header),
        offset: 0,
        finished: false,
    };
    futures::stream::unfold(state, move |mut st| {
        let progress_ms = progress_ms.clone();
        let read_error = read_error.clone();
        async move {
            if st.finished {
                return None;
            }
            progress_ms.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            let data = match st.data.read_chunk(st.offset, chunk_bytes).await {
                Ok(d) => d,
                Err(e) => {
                    *read_error
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(e);
                    return None;
                }
            };
            let done = data.is_empty();
            let chunk = SnapshotChunk {
                header: st.header.take(),
                offset: st.offset,
                done,
                data,
            };
            st.offset += chunk.data.len() as u64;
            st.finished = done;
            Some((chunk, st))
        }
    })
}
