//! [`Client`]: the raftmq client over the `RaftMq` gRPC service.

use std::collections::HashMap;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_proto::header_cut::CutResponses;
use raftmq_proto::shared::Shared;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_proto::v1::*;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::transport::Endpoint;
use tonic::Code;
use tonic::Status;

use crate::credentials::Credentials;
use crate::credentials::Grpc;
use crate::credentials::Sender;
use crate::credentials::Signer;
use crate::error::ClientError;
use crate::producer::Producer;
use crate::send_stream::batch_unsupported;
use crate::send_stream::SendMux;
use crate::send_stream::Sent;
use crate::send_stream::SentBatch;
use crate::tls::ClientTls;

/// Client settings.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Timeout of one TCP connect. Default 1 s.
    pub connect_timeout: Duration,
    /// Deadline of one attempt (a pull adds its long-poll timeout). Default 10 s.
    pub request_timeout: Duration,
    /// Attempts per call, redirects included. Default 6.
    pub max_attempts: u32,
    /// First delay before retrying on another node; doubles up to `backoff_max`. Default 50 ms.
    pub backoff_initial: Duration,
    /// Retry delay cap. Default 1 s.
    pub backoff_max: Duration,
    /// Resend a write whose outcome is unknown (timeout, lost connection, no quorum). This can
    /// store the message twice; off by default, in which case such a failure is returned as
    /// [`ClientError::UnknownOutcome`].
    pub retry_unknown_writes: bool,
    /// gRPC message limit both ways. Default 64 MiB.
    pub max_message_bytes: usize,
    /// Give each sent message this client's producer id and a sequence number (unless it has
    /// an identity already), and resend it after an unknown outcome: the broker answers a
    /// resend it already stored with the original result. Off: sends carry no identity and
    /// follow `retry_unknown_writes`. Default true.
    pub idempotent: bool,
    /// Access key and secret key that sign every call (needed when the cluster has
    /// `auth-enabled`). Default none: calls go unsigned.
    pub credentials: Option<Credentials>,
    /// TLS towards the nodes (`https`; see [`ClientTls`]). Default None: plaintext.
    pub tls: Option<ClientTls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            max_attempts: 6,
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            retry_unknown_writes: false,
            max_message_bytes: 64 << 20,
            idempotent: true,
            credentials: None,
            tls: None,
        }
    }
}

/// How a call may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Served by any node; retried anywhere.
    Read,
    /// Executed by the leader and safe to repeat (sets a value): retried like a read.
    IdempotentWrite,
    /// Executed by the leader, not safe to repeat blindly (send, create, membership).
    Write,
    /// A send whose messages carry an identity: the broker's dedup window makes a resend
    /// after an unknown outcome safe, so it is resent (same identity).
    IdempotentSend,
}

/// Known nodes and the leader hint.
///
/// Invariant: `leader`, when set, is one of `nodes`.
#[derive(Default)]
pub(crate) struct Routing {
    nodes: Vec<String>,
    pub(crate) leader: Option<String>,
    /// Next node to try for calls without a leader preference.
    cursor: usize,
    channels: HashMap<String, Channel>,
    /// The `SendStream` to each node that single sends share.
    send_streams: HashMap<String, Arc<SendMux>>,
    /// Nodes that answered `SendStream` with UNIMPLEMENTED (older servers): unary `Send`.
    no_send_stream: HashSet<String>,
    /// Nodes whose `SendStream` takes no batches (older servers): unary `SendBatch`.
    no_stream_batch: HashSet<String>,
}

/// A raftmq client: knows the seed nodes, follows leader hints, retries what is safe to retry.
///
/// Cheap to clone; clones share connections and the leader hint.
#[derive(Clone)]
pub struct Client {
    pub(crate) opts: ClientOptions,
    routing: Arc<Mutex<Routing>>,
    /// The identity of this client's sends (see [`crate::producer`]).
    pub(crate) producer: Arc<Producer>,
    /// Signs every call with `opts.credentials`.
    signer: Signer,
}

pub(crate) fn normalize(addr: &str) -> String {
    normalized(addr).to_string()
}

/// [`normalize`] without the copy.
fn normalized(addr: &str) -> &str {
    addr.trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

impl Client {
    /// A client for `seeds` (client addresses, host:port) that connects on first use.
    pub fn new(seeds: &[String], opts: ClientOptions) -> Result<Self, ClientError> {
        let mut nodes: Vec<String> = Vec::new();
        for s in seeds {
            let a = normalize(s);
            if a.is_empty() || Endpoint::from_shared(format!("http://{a}")).is_err() {
                return Err(ClientError::InvalidArgument(format!(
                    "bad server address {s:?}"
                )));
            }
            if !nodes.contains(&a) {
                nodes.push(a);
            }
        }
        if nodes.is_empty() {
            return Err(ClientError::InvalidArgument(
                "no server addresses given".into(),
            ));
        }
        Ok(Self {
            signer: Signer::new(opts.credentials.clone()),
            opts,
            routing: Arc::new(Mutex::new(Routing {
                nodes,
                ..Default::default()
            })),
            producer: Arc::new(Producer::random()),
        })
    }

    /// [`Client::new`], then asks the cluster for its members and leader (so every member is
    /// known even if only one seed was given). Fails when no seed answers.
    pub async fn connect(seeds: &[String], opts: ClientOptions) -> Result<Self, ClientError> {
        let client = Self::new(seeds, opts)?;
        client.refresh().await?;
        Ok(client)
    }

    /// Re-reads the members and leader from the cluster.
    pub async fn refresh(&self) -> Result<ClusterStatusReply, ClientError> {
        let status = self.cluster_status().await?;
        let mut r = self.routing();
        for m in &status.members {
            let a = normalize(&m.client_addr);
            if !a.is_empty() && !r.nodes.contains(&a) {
                r.nodes.push(a);
            }
        }
        r.leader = status
            .leader_id
            .and_then(|id| status.members.iter().find(|m| m.node_id == id))
            .map(|m| normalize(&m.client_addr))
            .filter(|a| !a.is_empty());
        Ok(status)
    }

    /// The leader's client address as last learned, if any.
    pub fn leader_hint(&self) -> Option<String> {
        self.routing().leader.clone()
    }

    /// Every node address the client knows.
    pub fn nodes(&self) -> Vec<String> {
        self.routing().nodes.clone()
    }

    pub(crate) fn routing(&self) -> std::sync::MutexGuard<'_, Routing> {
        self.routing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn channel(&self, addr: &str) -> Result<Channel, ClientError> {
        let mut r = self.routing();
        if let Some(ch) = r.channels.get(addr) {
            return Ok(ch.clone());
        }
        let ch = crate::tls::endpoint(self.opts.tls.as_ref(), addr)?
            .connect_timeout(self.opts.connect_timeout)
            .tcp_nodelay(true)
            .max_frame_size(raftmq_proto::MAX_FRAME_BYTES)
            .connect_lazy();
        r.channels.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    pub(crate) fn grpc(&self, addr: &str) -> Result<Grpc, ClientError> {
        Ok(RaftMqClient::with_interceptor(
            CutResponses::new(self.channel(addr)?),
            self.signer.clone(),
        )
        .max_decoding_message_size(self.opts.max_message_bytes)
        .max_encoding_message_size(self.opts.max_message_bytes))
    }

    /// [`grpc`](Self::grpc)'s channel and limits, for the sends of shared messages.
    pub(crate) fn sender(&self, addr: &str) -> Result<Sender, ClientError> {
        let service =
            InterceptedService::new(CutResponses::new(self.channel(addr)?), self.signer.clone());
        Ok(Sender::new(service)
            .max_decoding_message_size(self.opts.max_message_bytes)
            .max_encoding_message_size(self.opts.max_message_bytes))
    }

    /// Where the next attempt goes: the leader if known (writes always prefer it), else the
    /// node under the cursor.
    pub(crate) fn pick(&self) -> String {
        let r = self.routing();
        if let Some(l) = &r.leader {
            return l.clone();
        }
        r.nodes[r.cursor % r.nodes.len()].clone()
    }

    pub(crate) fn follow(&self, leader: &str) {
        let mut r = self.routing();
        // Every successful write follows the node that took it: usually the leader already.
        if r.leader.as_deref() == Some(normalized(leader)) {
            return;
        }
        let a = normalize(leader);
        if !r.nodes.contains(&a) {
            r.nodes.push(a.clone());
        }
        r.leader = Some(a);
    }

    /// `addr` failed: forget it as leader and move the cursor past it.
    pub(crate) fn demote(&self, addr: &str) {
        let mut r = self.routing();
        if r.leader.as_deref() == Some(addr) {
            r.leader = None;
        }
        if let Some(i) = r.nodes.iter().position(|n| n == addr) {
            r.cursor = i + 1;
        } else {
            r.cursor += 1;
        }
    }

    /// One single send at `addr`, on the node's shared `SendStream` (unary `Send` for a node
    /// that lacks it). With the result: the leader's address if `addr` forwarded the send.
    pub(crate) async fn send_attempt(
        &self,
        addr: &str,
        message: &Shared<Message>,
    ) -> Result<Sent, Status> {
        // The caller keeps the message for the next attempt; the stream shares it, the unary
        // fallback (a node without `SendStream`) copies it.
        let unary = || async move {
            let req = SendRequest {
                message: Some(message.get().clone()),
            };
            let reply = self
                .attempt(addr, req, Duration::ZERO, &|mut c: Grpc, r| async move {
                    c.send(r).await
                })
                .await?;
            let result = reply
                .result
                .ok_or_else(|| Status::internal("server sent no SendResult"))?;
            Ok((result, None))
        };
        let streamed =
            |mux: Arc<SendMux>, timeout| async move { mux.send(message.clone(), timeout).await };
        self.on_send_stream(addr, false, streamed, unary).await
    }

    /// One batch at `addr`, on the node's shared `SendStream` (unary `SendBatch` for a node
    /// whose stream takes no batches). With the results: the leader's address if `addr`
    /// forwarded the batch.
    pub(crate) async fn send_batch_attempt(
        &self,
        addr: &str,
        batch: &Shared<SendBatchRequest>,
    ) -> Result<SentBatch, Status> {
        let unary = || async move {
            let reply = self
                .attempt(
                    addr,
                    batch.clone(),
                    Duration::ZERO,
                    &|mut c: Sender, r| async move { c.send_batch(r).await },
                )
                .await?;
            Ok((reply.results, None))
        };
        let streamed = |mux: Arc<SendMux>, timeout| async move {
            mux.send_batch(batch.clone(), timeout).await
        };
        self.on_send_stream(addr, true, streamed, unary).await
    }

    /// One attempt at `addr` on the node's shared `SendStream` (`streamed`, given the stream
    /// and the answer's timeout), or as a unary call (`unary`) for a node without one, or, for
    /// a `batch`, for a node whose stream takes no batches (older nodes; remembered).
    async fn on_send_stream<T, S, SF, U, UF>(
        &self,
        addr: &str,
        batch: bool,
        streamed: S,
        unary: U,
    ) -> Result<T, Status>
    where
        S: FnOnce(Arc<SendMux>, Duration) -> SF,
        SF: Future<Output = Result<T, Status>>,
        U: FnOnce() -> UF,
        UF: Future<Output = Result<T, Status>>,
    {
        if batch && self.routing().no_stream_batch.contains(addr) {
            return unary().await;
        }
        let Some(mux) = self.send_mux(addr)? else {
            return unary().await;
        };
        let timeout = self.opts.request_timeout + Duration::from_millis(500);
        match streamed(mux, timeout).await {
            Err(s) if s.code() == Code::Unimplemented => {
                tracing::debug!(addr, "node has no SendStream; using unary calls");
                self.routing().no_send_stream.insert(addr.to_string());
                unary().await
            }
            Err(s) if batch && batch_unsupported(&s) => {
                tracing::debug!(addr, "node takes no batches on SendStream; using SendBatch");
                self.routing().no_stream_batch.insert(addr.to_string());
                unary().await
            }
            r => r,
        }
    }

    /// The open `SendStream` to `addr` (opened on first use and after it broke); `None` for a
    /// node without one.
    fn send_mux(&self, addr: &str) -> Result<Option<Arc<SendMux>>, Status> {
        {
            let r = self.routing();
            if r.no_send_stream.contains(addr) {
                return Ok(None);
            }
            if let Some(m) = r.send_streams.get(addr).filter(|m| !m.is_closed()) {
                return Ok(Some(m.clone()));
            }
        }
        let client = self
            .sender(addr)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut r = self.routing();
        if let Some(m) = r.send_streams.get(addr).filter(|m| !m.is_closed()) {
            return Ok(Some(m.clone()));
        }
        let m = Arc::new(SendMux::open(client));
        r.send_streams.insert(addr.to_string(), m.clone());
        Ok(Some(m))
    }
}
