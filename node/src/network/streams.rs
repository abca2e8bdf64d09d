//! The streaming calls of [`PeerNetwork`]: pipelined StreamAppend and chunked snapshots.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

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
use raftmq_proto::v1::RaftRequest;
use raftmq_proto::v1::SnapshotChunk;
use raftmq_proto::v1::SnapshotHeader;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;

use super::client::PeerNetwork;
use super::codec;
use super::snapshot::SnapshotSource;

impl<C: LogTypes, SD: SnapshotSource> PeerNetwork<C, SD> {
    /// Opens the StreamAppend call and turns its replies into openraft's result stream.
    pub(super) async fn open_append_stream<'s, S>(
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

    /// Sends `snapshot` as a client stream of chunks (see `full_snapshot`).
    pub(super) async fn send_snapshot(
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
