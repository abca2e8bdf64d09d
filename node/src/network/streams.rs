//! The streaming calls of [`PeerNetwork`]: pipelined StreamAppend and chunked snapshots.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use futures::future::Either;
use openraft::base::BoxStream;
use openraft::errors::NetworkError;
use openraft::errors::RPCError;
use openraft::errors::ReplicationClosed;
use openraft::errors::StreamingError;
use openraft::network::RPCOption;
use openraft::network::RPCTypes;
use openraft::raft::AppendEntriesRequest;
use openraft::raft::SnapshotResponse;
use openraft::raft::StreamAppendResult;
use openraft::storage::Snapshot;
use openraft::ErrorSubject;
use openraft::ErrorVerb;
use openraft::StorageError;
use raftmq_proto::v1::SnapshotChunk;
use raftmq_proto::v1::SnapshotHeader;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;

use super::append_replies::AppendReplies;
use super::append_replies::Pending;
use super::append_request::AppendRequest;
use super::append_request::Body;
use super::client::PeerNetwork;
use super::codec;
use super::commit_gate::GateCommits;
use super::commit_hold::HoldCommits;
use super::lock;
use super::session_input::session_input;
use super::snapshot::SnapshotSource;
use super::split;

impl<C: LogTypes, SD: SnapshotSource> PeerNetwork<C, SD> {
    /// Opens the StreamAppend call and turns its replies into openraft's result stream.
    ///
    /// The request stream is wrapped in a [`SessionInput`] whose guard lives with the reply
    /// side: when the session ends (an error, a timeout, openraft dropping the results, or a
    /// failed open) openraft's request stream is dropped at once and never polled again.
    /// Inside it, [`HoldCommits`] lets a commit-only request wait for the next entries, and
    /// on an `async` node [`GateCommits`] lets a commit index out only once it is durable.
    pub(super) async fn open_append_stream<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> Result<BoxStream<'s, Result<StreamAppendResult<C>, RPCError<C>>>, RPCError<C>>
    where
        S: futures::Stream<Item = AppendEntriesRequest<C>> + Send + Unpin + 'static,
    {
        use futures::StreamExt;

        let held = HoldCommits::new(input, self.opts.commit_hold);
        let (input, guard) = match self.opts.commit_gate.clone() {
            Some(gate) => session_input(Either::Left(GateCommits::new(held, gate))),
            None => session_input(Either::Right(held)),
        };
        let client = self.client()?.append;
        let opts = self.opts.clone();
        let hard_ttl = option.hard_ttl();
        // What was sent and not yet answered, oldest first.
        let pending: Arc<Mutex<Pending>> = Arc::default();
        let sent = pending.clone();
        let (cluster_id, from, to) = (
            Arc::<str>::from(self.opts.cluster_id.as_str()),
            self.ctx.self_id,
            self.ctx.target,
        );
        let part_bytes = self.opts.append_part_bytes();
        let requests = input.then(move |req| {
            if let Some(e) = req.entries.last() {
                tracing::trace!(
                    target_node = to,
                    log_index = e.log_id.index,
                    "append request out"
                );
            }
            encode_off_hyper(req, part_bytes)
        });
        let requests = requests.flat_map(move |encoded| {
            let parts = match encoded {
                Ok(parts) => parts,
                Err(e) => {
                    tracing::error!(target_node = to, error = %e, "dropping unencodable append request");
                    Vec::new()
                }
            };
            lock(&sent).push(&parts);
            let cluster_id = cluster_id.clone();
            futures::stream::iter(parts.into_iter().map(move |part| AppendRequest {
                cluster_id: cluster_id.clone(),
                from_node_id: from,
                to_node_id: to,
                body: part.payload,
            }))
        });
        // Framed where tonic's encoder encoded them (in the body's poll). One longer than the
        // message limit (an entry above it, sent alone) ends the stream as tonic's encoder
        // did: the follower's decoder would refuse it.
        let max_bytes = self.opts.max_message_bytes;
        let requests = requests
            .map(move |r| r.frame(max_bytes))
            .take_while(move |framed| {
                if framed.is_none() {
                    tracing::error!(
                        target_node = to,
                        max_bytes,
                        "append request above the message limit; ending the replication stream"
                    );
                }
                futures::future::ready(framed.is_some())
            })
            .filter_map(futures::future::ready);
        let ctx = self.ctx.clone();
        // The call's response headers: the connection may have to be made first.
        let open_ttl = opts.open_timeout(hard_ttl, self.timed_out_opens);
        let call = super::framed::stream_append(client, Box::pin(requests), opts.max_message_bytes);
        let replies = match tokio::time::timeout(open_ttl, call).await {
            Err(_) => {
                self.timed_out_opens = self.timed_out_opens.saturating_add(1);
                tracing::info!(
                    target_node = ctx.target,
                    timeout_ms = open_ttl.as_millis() as u64,
                    "replication stream did not open in time; the next open waits longer"
                );
                let e = RPCError::Timeout(ctx.timeout(RPCTypes::AppendEntries, open_ttl));
                return Err(self.failed_open(e).await);
            }
            Ok(Err(status)) => {
                let e = ctx.status_error(RPCTypes::AppendEntries, open_ttl, &status);
                return Err(self.failed_open(e).await);
            }
            Ok(Ok(replies)) => replies,
        };
        self.failed_opens = 0;
        self.timed_out_opens = 0;
        let st = AppendReplies {
            replies,
            pending,
            kick: opts.kick.signal(ctx.target),
            opts,
            hard_ttl,
            done: false,
            _guard: guard,
        };
        let results = futures::stream::unfold(st, move |mut st| {
            let ctx = ctx.clone();
            async move {
                if st.done {
                    return None;
                }
                let (item, end) = st.next_result(&ctx).await?;
                st.done = end || item.is_err();
                Some((item, st))
            }
        });
        Ok(Box::pin(results))
    }

    /// Waits the backoff delay of this failure in a row, then returns `e`.
    ///
    /// openraft sleeps its backoff only while it produces the next request, which a stream
    /// that never opened (peer down: connect refused) does not ask for; without this wait the
    /// leader retried a dead follower thousands of times a second, starving the node.
    async fn failed_open(&mut self, e: RPCError<C>) -> RPCError<C> {
        let n = self.failed_opens as usize;
        self.failed_opens = self.failed_opens.saturating_add(1);
        if let Some(delay) = self.opts.backoff_delays().nth(n.min(32)) {
            tokio::time::sleep(delay).await;
        }
        e
    }

    /// Sends `snapshot` as a client stream of chunks (see `full_snapshot`).
    pub(super) async fn send_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<raftmq_raft_log::types::CommittedLeaderId, NodeId, PeerNode, SD>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<C>, StreamingError<C>> {
        let mut client = self.client()?.rpc;
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
        let local_err = lock(&read_error).take();
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
}

/// Requests up to this size (about their encoding: one part at most) are encoded as their
/// frame is built, where the request body is polled (`super::framed`).
const INLINE_ENCODE_MAX_BYTES: usize = super::MAX_APPEND_PART_BYTES;

/// Cuts one request of a stream into its parts. One that fits a part (the live sends, and a
/// catch-up's requests up to 8 MiB) is measured here and encoded as its gRPC frame is built
/// ([`Body::Later`]): its large entries shared, not copied ([`AppendRequest::frame`]). A
/// larger one (a catch-up's many MiB) is cut and encoded on the blocking pool: hyper polls a
/// new stream's body once inside its connection task before it spawns the body's own task, so
/// encoding tens of MiB there held up every frame of the connection, the stream's own response
/// headers included; on a node short of CPU the open then timed out and each new session began
/// the same work again.
/// A deferred part costs at most one part's small pieces copied in such a poll (the body
/// yields each request's chunks as soon as it is framed).
async fn encode_off_hyper<C: LogTypes>(
    req: AppendEntriesRequest<C>,
    part_bytes: usize,
) -> Result<Vec<split::Part<Body>>, String> {
    if split::size_hint(&req.entries) <= INLINE_ENCODE_MAX_BYTES {
        let parts = split::plan_append(req, part_bytes).map_err(|e| e.to_string())?;
        let later = |p: split::Deferred<C>| Body::Later(Box::new(p));
        return Ok(parts.into_iter().map(|p| p.map(later)).collect());
    }
    match tokio::task::spawn_blocking(move || split::encode_append(req, part_bytes)).await {
        Ok(parts) => Ok(parts
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|p| p.map(|v| Body::Encoded(v.into())))
            .collect()),
        Err(e) => Err(format!("the encoding task failed: {e}")),
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
                    *lock(&read_error) = Some(e);
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
