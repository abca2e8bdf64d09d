//! The reply side of a StreamAppend call ([`AppendReplies`]): what was sent and not yet
//! answered ([`Pending`]), each reply waited for within its part's timeout, and the replies
//! to one request's parts merged back into openraft's one result.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use openraft::errors::NetworkError;
use openraft::errors::RPCError;
use openraft::network::RPCTypes;
use openraft::raft::StreamAppendResult;
use raftmq_raft_log::types::LogTypes;
use tokio::sync::Notify;

use super::append_request::Body;
use super::client::Ctx;
use super::codec;
use super::lock;
use super::session_input::InputGuard;
use super::split;
use super::PeerNetworkOptions;

/// The requests of a StreamAppend call sent and not yet answered.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Part counts of the requests, oldest first.
    groups: VecDeque<usize>,
    /// Byte sizes of the parts, oldest first.
    parts: VecDeque<usize>,
}

impl Pending {
    pub(super) fn push(&mut self, parts: &[split::Part<Body>]) {
        if parts.is_empty() {
            return;
        }
        self.groups.push_back(parts.len());
        self.parts.extend(parts.iter().map(|p| p.payload.len()));
    }
}

/// The reply side of a StreamAppend call.
pub(super) struct AppendReplies {
    pub(super) replies: tonic::Streaming<raftmq_proto::v1::RaftReply>,
    pub(super) pending: Arc<Mutex<Pending>>,
    pub(super) opts: Arc<PeerNetworkOptions>,
    /// openraft's deadline per answer (one heartbeat interval); raised per part, see
    /// [`PeerNetworkOptions::reply_timeout`].
    pub(super) hard_ttl: Duration,
    /// Ends this stream while nothing is outstanding (see `kick.rs`).
    pub(super) kick: Arc<Notify>,
    pub(super) done: bool,
    /// Ends openraft's request stream when the replies are dropped.
    pub(super) _guard: InputGuard,
}

impl AppendReplies {
    /// The next reply, waiting at most the oldest outstanding part's reply timeout. `None`
    /// when the server closed the stream, or on a kick while nothing is outstanding.
    async fn next_reply<C: LogTypes>(
        &mut self,
        ctx: &Ctx,
    ) -> Option<Result<StreamAppendResult<C>, RPCError<C>>> {
        loop {
            let oldest = lock(&self.pending).parts.front().copied();
            let ttl = self.opts.reply_timeout(self.hard_ttl, oldest.unwrap_or(0));
            let kicked = self.kick.notified();
            let next = tokio::select! {
                r = tokio::time::timeout(ttl, self.replies.message()) => r,
                () = kicked => {
                    if lock(&self.pending).parts.is_empty() {
                        tracing::info!(target_node = ctx.target, "idle replication stream ended by the catch-up watcher");
                        self.opts.kick.count_ended();
                        return None;
                    }
                    continue;
                }
            };
            match next {
                Err(_) if oldest.is_some() => {
                    tracing::info!(
                        target_node = ctx.target,
                        part_bytes = oldest,
                        timeout_ms = ttl.as_millis() as u64,
                        "no answer to a replication request in time"
                    );
                    return Some(Err(RPCError::Timeout(
                        ctx.timeout(RPCTypes::AppendEntries, ttl),
                    )));
                }
                Err(_) => continue,
                Ok(Ok(None)) => return None,
                Ok(Err(status)) => {
                    return Some(Err(ctx.status_error(RPCTypes::AppendEntries, ttl, &status)))
                }
                Ok(Ok(Some(reply))) => {
                    lock(&self.pending).parts.pop_front();
                    return Some(
                        codec::decode("StreamAppendResult", &reply.payload)
                            .map_err(|e| RPCError::Network(NetworkError::new(&e))),
                    );
                }
            }
        }
    }

    /// The merged result of the oldest outstanding request, and whether the stream must end.
    pub(super) async fn next_result<C: LogTypes>(
        &mut self,
        ctx: &Ctx,
    ) -> Option<(Result<StreamAppendResult<C>, RPCError<C>>, bool)> {
        let mut results = Vec::new();
        loop {
            let item = match self.next_reply::<C>(ctx).await {
                None if results.is_empty() => return None,
                // The server ended the stream inside a group: it failed a part.
                None => return Some((Ok(split::merge_stream(&results).0), true)),
                Some(item) => item,
            };
            let res = match item {
                Ok(r) => r,
                Err(e) if results.is_empty() => return Some((Err(e), true)),
                Err(_) => return Some((Ok(split::merge_stream(&results).0), true)),
            };
            let failed = res.is_err();
            results.push(res);
            let want = lock(&self.pending).groups.front().copied().unwrap_or(1);
            if results.len() >= want || failed {
                lock(&self.pending).groups.pop_front();
                let (merged, end) = split::merge_stream(&results);
                if let Ok(Some(last)) = &merged {
                    tracing::trace!(
                        target_node = ctx.target,
                        log_index = last.index,
                        "append answer received"
                    );
                }
                return Some((Ok(merged), end || failed));
            }
        }
    }
}
