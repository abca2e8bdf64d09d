//! A follower's side of StreamAppend: the leader's requests checked, decoded and fed to
//! `Raft::stream_append`, the answers in order.

use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;

use futures::Stream;
use futures::StreamExt as _;
use openraft::raft::AppendEntriesRequest;
use openraft::storage::RaftStateMachine;
use raftmq_proto::v1::RaftReply;
use raftmq_raft_log::types::LogTypes;
use tonic::Status;

use super::codec;
use super::leader_contact::StreamEnd;
use super::raw_append::AppendStream;
use super::raw_append::PeerRequest;
use super::server_parts::disk_refusal;
use super::server_parts::raft_stopped;
use super::snapshot::SnapshotSink;
use super::PeerService;

impl<C, SM, K> AppendStream for PeerService<C, SM, K>
where
    C: LogTypes,
    SM: RaftStateMachine<C>,
    K: SnapshotSink<SM::SnapshotData>,
{
    /// Decodes and checks each request, feeds them to `Raft::stream_append`, and answers each
    /// in order. A bad request ends the stream with its status after the results before it.
    fn append_stream(
        &self,
        input: Pin<Box<dyn Stream<Item = Result<PeerRequest, Status>> + Send>>,
    ) -> Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send>> {
        let refusal: Arc<Mutex<Option<Status>>> = Arc::new(Mutex::new(None));
        let checker = self.checker();
        let slot = refusal.clone();
        let peer = Arc::new(AtomicU64::new(0));
        let peer_in = peer.clone();
        let contact = self.contact.clone();
        let (raft, node_id, guard) = (self.raft.clone(), self.node_id, self.vote_guard.clone());
        let lost = Arc::new(StreamEnd::new(move || {
            contact.stream_lost(&raft, node_id, guard.clone())
        }));
        let heard = self.contact.clone();
        let gate = self.disk_gate.clone();
        let requests = futures::stream::unfold(Some(input), move |input| {
            let slot = slot.clone();
            let gate = gate.clone();
            let checker = checker.clone();
            let peer_in = peer_in.clone();
            let lost = lost.clone();
            let heard = heard.clone();
            async move {
                let mut input = input?;
                let failed = match input.next().await {
                    None => {
                        lost.fire();
                        return None;
                    }
                    Some(Ok(req)) => match checker
                        .decode_parts::<AppendEntriesRequest<C>>("AppendEntriesRequest", &req)
                    {
                        Ok(rpc) => match checker.fault_in(req.fields.from_node_id).await {
                            Err(status) => status,
                            Ok(()) => {
                                heard.heard();
                                if let Some(e) = rpc.entries.last() {
                                    tracing::trace!(
                                        log_index = e.log_id.index,
                                        "append request received"
                                    );
                                }
                                if let Some(refusal) = disk_refusal(&gate, rpc.entries.len()) {
                                    refusal
                                } else {
                                    peer_in.store(req.fields.from_node_id, Ordering::Relaxed);
                                    checker
                                        .stats
                                        .stream_append_requests
                                        .fetch_add(1, Ordering::Relaxed);
                                    return Some((rpc, Some(input)));
                                }
                            }
                        },
                        Err(status) => status,
                    },
                    Some(Err(status)) => {
                        // The connection broke (e.g. the leader's process died).
                        lost.fire();
                        status
                    }
                };
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(failed);
                None
            }
        });
        let out_checker = self.checker();
        let results = self.raft.stream_append(requests).map(move |res| match res {
            Ok(r) => {
                if let Ok(Some(last)) = &r {
                    tracing::trace!(log_index = last.index, "append answer sent");
                }
                out_checker
                    .fault_out(peer.load(Ordering::Relaxed))
                    .and_then(|()| {
                        codec::encode("StreamAppendResult", &r)
                            .map(|payload| RaftReply { payload })
                            .map_err(|e| Status::internal(e.to_string()))
                    })
            }
            Err(fatal) => Err(raft_stopped(fatal)),
        });
        let tail = futures::stream::once(async move {
            refusal.lock().unwrap_or_else(|p| p.into_inner()).take()
        })
        .filter_map(|s| std::future::ready(s.map(Err)));
        Box::pin(results.chain(tail))
    }
}
