//! [`Client`]: the raftmq client over the `RaftMq` gRPC service.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_proto::v1::*;
use tonic::transport::Channel;
use tonic::transport::Endpoint;
use tonic::Code;
use tonic::Status;

use crate::error::classify;
use crate::error::ClientError;
use crate::error::Verdict;

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
        }
    }
}

/// How a call may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Served by any node; retried anywhere.
    Read,
    /// Executed by the leader and safe to repeat (sets a value): retried like a read.
    IdempotentWrite,
    /// Executed by the leader, not safe to repeat blindly (send, create, membership).
    Write,
}

/// Known nodes and the leader hint.
///
/// Invariant: `leader`, when set, is one of `nodes`.
#[derive(Default)]
struct Routing {
    nodes: Vec<String>,
    leader: Option<String>,
    /// Next node to try for calls without a leader preference.
    cursor: usize,
    channels: HashMap<String, Channel>,
}

/// A raftmq client: knows the seed nodes, follows leader hints, retries what is safe to retry.
///
/// Cheap to clone; clones share connections and the leader hint.
#[derive(Clone)]
pub struct Client {
    opts: ClientOptions,
    routing: Arc<Mutex<Routing>>,
}

fn normalize(addr: &str) -> String {
    addr.trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string()
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
            opts,
            routing: Arc::new(Mutex::new(Routing {
                nodes,
                ..Default::default()
            })),
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

    fn routing(&self) -> std::sync::MutexGuard<'_, Routing> {
        self.routing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn grpc(&self, addr: &str) -> Result<RaftMqClient<Channel>, ClientError> {
        let mut r = self.routing();
        let ch = match r.channels.get(addr) {
            Some(ch) => ch.clone(),
            None => {
                let ch = Endpoint::from_shared(format!("http://{addr}"))
                    .map_err(|e| {
                        ClientError::InvalidArgument(format!("bad address {addr:?}: {e}"))
                    })?
                    .connect_timeout(self.opts.connect_timeout)
                    .tcp_nodelay(true)
                    .connect_lazy();
                r.channels.insert(addr.to_string(), ch.clone());
                ch
            }
        };
        Ok(RaftMqClient::new(ch)
            .max_decoding_message_size(self.opts.max_message_bytes)
            .max_encoding_message_size(self.opts.max_message_bytes))
    }

    /// Where the next attempt goes: the leader if known (writes always prefer it), else the
    /// node under the cursor.
    fn pick(&self) -> String {
        let r = self.routing();
        if let Some(l) = &r.leader {
            return l.clone();
        }
        r.nodes[r.cursor % r.nodes.len()].clone()
    }

    fn follow(&self, leader: &str) {
        let mut r = self.routing();
        let a = normalize(leader);
        if !r.nodes.contains(&a) {
            r.nodes.push(a.clone());
        }
        r.leader = Some(a);
    }

    /// `addr` failed: forget it as leader and move the cursor past it.
    fn demote(&self, addr: &str) {
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

    /// One attempt at `addr`.
    async fn attempt<Req, Resp, F, Fut>(
        &self,
        addr: &str,
        req: Req,
        extra: Duration,
        rpc: &F,
    ) -> Result<Resp, Status>
    where
        F: Fn(RaftMqClient<Channel>, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        let client = self
            .grpc(addr)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let deadline = self.opts.request_timeout + extra;
        let mut request = tonic::Request::new(req);
        request.set_timeout(deadline);
        match tokio::time::timeout(deadline + Duration::from_millis(500), rpc(client, request))
            .await
        {
            Ok(r) => r.map(|resp| resp.into_inner()),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "no answer within {deadline:?}"
            ))),
        }
    }

    /// Runs `rpc` with the retry rules of `kind` (see [`crate`] docs).
    async fn call<Req, Resp, F, Fut>(
        &self,
        kind: Kind,
        req: Req,
        extra: Duration,
        rpc: F,
    ) -> Result<Resp, ClientError>
    where
        Req: Clone,
        F: Fn(RaftMqClient<Channel>, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        let mut backoff = self.opts.backoff_initial;
        let mut redirect: Option<String> = None;
        let mut uncertain: Option<(String, Code, String)> = None;
        let mut last = String::from("no attempt made");
        let attempts = self.opts.max_attempts.max(1);
        for _ in 0..attempts {
            let addr = redirect.take().unwrap_or_else(|| self.pick());
            let status = match self.attempt(&addr, req.clone(), extra, &rpc).await {
                Ok(resp) => {
                    if kind != Kind::Read {
                        self.follow(&addr);
                    }
                    return Ok(resp);
                }
                Err(s) => s,
            };
            last = format!("{addr}: {:?}: {}", status.code(), status.message());
            tracing::debug!(addr = %addr, code = ?status.code(), message = status.message(), "call failed");
            match classify(&status, kind == Kind::Write) {
                Verdict::Redirect(to) if normalize(&to) != addr => {
                    self.follow(&to);
                    redirect = Some(normalize(&to));
                    continue;
                }
                Verdict::Redirect(_) | Verdict::Retry => {}
                Verdict::Reject => {
                    return Err(ClientError::Rejected {
                        addr,
                        code: status.code(),
                        message: status.message().to_string(),
                        detail: raftmq_proto::error_detail(&status),
                    })
                }
                Verdict::Unknown => {
                    let unknown = (addr.clone(), status.code(), status.message().to_string());
                    if !self.opts.retry_unknown_writes {
                        let (addr, code, message) = unknown;
                        return Err(ClientError::UnknownOutcome {
                            addr,
                            code,
                            message,
                        });
                    }
                    uncertain = Some(unknown);
                }
            }
            self.demote(&addr);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.opts.backoff_max);
        }
        match uncertain {
            Some((addr, code, message)) => Err(ClientError::UnknownOutcome {
                addr,
                code,
                message,
            }),
            None => Err(ClientError::Unavailable { attempts, last }),
        }
    }

    /// Sends one message; returns after the quorum ack. Not resent after an unknown outcome
    /// unless [`ClientOptions::retry_unknown_writes`].
    pub async fn send(&self, message: Message) -> Result<SendResult, ClientError> {
        let reply = self
            .call(
                Kind::Write,
                SendRequest {
                    message: Some(message),
                },
                Duration::ZERO,
                |mut c, r| async move { c.send(r).await },
            )
            .await?;
        reply
            .result
            .ok_or_else(|| ClientError::InvalidArgument("server sent no SendResult".into()))
    }

    /// Sends messages as one Raft entry (all or none); one result per message, in order.
    pub async fn send_batch(&self, messages: Vec<Message>) -> Result<Vec<SendResult>, ClientError> {
        let reply = self
            .call(
                Kind::Write,
                SendBatchRequest { messages },
                Duration::ZERO,
                |mut c, r| async move { c.send_batch(r).await },
            )
            .await?;
        Ok(reply.results)
    }

    /// Pulls from any node (leader preferred), waiting up to `req.long_poll_timeout_ms`.
    pub async fn pull(&self, req: PullRequest) -> Result<PullReply, ClientError> {
        let extra = Duration::from_millis(u64::from(req.long_poll_timeout_ms));
        self.call(
            Kind::Read,
            req,
            extra,
            |mut c, r| async move { c.pull(r).await },
        )
        .await
    }

    /// Pulls from one given node (client address), once, without retries: for checking what
    /// each replica serves.
    pub async fn pull_from(&self, addr: &str, req: PullRequest) -> Result<PullReply, ClientError> {
        let extra = Duration::from_millis(u64::from(req.long_poll_timeout_ms));
        let addr = normalize(addr);
        self.attempt(
            &addr,
            req,
            extra,
            &|mut c: RaftMqClient<Channel>, r| async move { c.pull(r).await },
        )
        .await
        .map_err(|s| ClientError::Rejected {
            addr,
            code: s.code(),
            message: s.message().to_string(),
            detail: raftmq_proto::error_detail(&s),
        })
    }

    /// The message with this id (physical offset), or `None`.
    pub async fn query_by_id(&self, msg_id: u64) -> Result<Option<StoredMessage>, ClientError> {
        match self
            .call(
                Kind::Read,
                QueryByIdRequest { msg_id },
                Duration::ZERO,
                |mut c, r| async move { c.query_by_id(r).await },
            )
            .await
        {
            Ok(reply) => Ok(reply.message),
            Err(e) if e.code() == Some(Code::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Messages of `req.topic` carrying `req.key`, stored within the time range.
    pub async fn query_by_key(
        &self,
        req: QueryByKeyRequest,
    ) -> Result<Vec<StoredMessage>, ClientError> {
        let reply = self
            .call(Kind::Read, req, Duration::ZERO, |mut c, r| async move {
                c.query_by_key(r).await
            })
            .await?;
        Ok(reply.messages)
    }

    /// Stores `group`'s offset for a queue (idempotent: retried).
    pub async fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: u64,
    ) -> Result<(), ClientError> {
        let req = CommitOffsetRequest {
            group: group.into(),
            topic: topic.into(),
            queue_id,
            offset,
        };
        self.call(
            Kind::IdempotentWrite,
            req,
            Duration::ZERO,
            |mut c, r| async move { c.commit_offset(r).await },
        )
        .await?;
        Ok(())
    }

    /// `group`'s stored offset for a queue, if it ever committed one.
    pub async fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<u64>, ClientError> {
        let req = FetchOffsetRequest {
            group: group.into(),
            topic: topic.into(),
            queue_id,
        };
        let reply = self
            .call(Kind::Read, req, Duration::ZERO, |mut c, r| async move {
                c.fetch_offset(r).await
            })
            .await?;
        Ok(reply.offset)
    }

    /// Creates a topic.
    pub async fn create_topic(&self, config: TopicConfig) -> Result<TopicConfig, ClientError> {
        let reply = self
            .call(
                Kind::Write,
                CreateTopicRequest {
                    config: Some(config),
                },
                Duration::ZERO,
                |mut c, r| async move { c.create_topic(r).await },
            )
            .await?;
        reply
            .config
            .ok_or_else(|| ClientError::InvalidArgument("server sent no TopicConfig".into()))
    }

    /// Changes a topic's queue count and/or permission (idempotent: retried).
    pub async fn update_topic(&self, req: UpdateTopicRequest) -> Result<TopicConfig, ClientError> {
        let reply = self
            .call(
                Kind::IdempotentWrite,
                req,
                Duration::ZERO,
                |mut c, r| async move { c.update_topic(r).await },
            )
            .await?;
        reply
            .config
            .ok_or_else(|| ClientError::InvalidArgument("server sent no TopicConfig".into()))
    }

    /// Deletes a topic.
    pub async fn delete_topic(&self, name: &str) -> Result<(), ClientError> {
        self.call(
            Kind::Write,
            DeleteTopicRequest { name: name.into() },
            Duration::ZERO,
            |mut c, r| async move { c.delete_topic(r).await },
        )
        .await?;
        Ok(())
    }

    /// Every topic with its queues' offset ranges.
    pub async fn list_topics(&self) -> Result<Vec<TopicInfo>, ClientError> {
        let reply = self
            .call(
                Kind::Read,
                ListTopicsRequest {},
                Duration::ZERO,
                |mut c, r| async move { c.list_topics(r).await },
            )
            .await?;
        Ok(reply.topics)
    }

    /// Members, roles, term, leader and watermarks, as the answering node sees them.
    pub async fn cluster_status(&self) -> Result<ClusterStatusReply, ClientError> {
        self.call(
            Kind::Read,
            ClusterStatusRequest {},
            Duration::ZERO,
            |mut c, r| async move { c.cluster_status(r).await },
        )
        .await
    }

    /// Cluster status as one given node sees it (once, no retries).
    pub async fn cluster_status_from(&self, addr: &str) -> Result<ClusterStatusReply, ClientError> {
        let addr = normalize(addr);
        self.attempt(
            &addr,
            ClusterStatusRequest {},
            Duration::ZERO,
            &|mut c: RaftMqClient<Channel>, r| async move { c.cluster_status(r).await },
        )
        .await
        .map_err(|s| ClientError::Rejected {
            addr,
            code: s.code(),
            message: s.message().to_string(),
            detail: raftmq_proto::error_detail(&s),
        })
    }

    /// Moves leadership to `to` (or the most caught-up voter); returns the new leader's id.
    pub async fn transfer_leader(&self, to: Option<u64>) -> Result<u64, ClientError> {
        let reply = self
            .call(
                Kind::Write,
                TransferLeaderRequest { to_node_id: to },
                Duration::ZERO,
                |mut c, r| async move { c.transfer_leader(r).await },
            )
            .await?;
        self.routing().leader = None;
        Ok(reply.leader_id)
    }

    /// Adds node `node_id` as a learner; with `wait_caught_up`, returns once it has caught up.
    pub async fn add_learner(
        &self,
        node_id: u64,
        raft_addr: &str,
        client_addr: &str,
        wait_caught_up: bool,
    ) -> Result<Option<LogId>, ClientError> {
        let req = AddLearnerRequest {
            node_id,
            raft_addr: raft_addr.into(),
            client_addr: client_addr.into(),
            wait_caught_up,
        };
        let reply = self
            .call(Kind::Write, req, Duration::ZERO, |mut c, r| async move {
                c.add_learner(r).await
            })
            .await?;
        Ok(reply.log_id)
    }

    /// Adds (learners → voters) and removes voters.
    pub async fn change_membership(
        &self,
        add_voters: Vec<u64>,
        remove_voters: Vec<u64>,
        retain_as_learners: bool,
    ) -> Result<ChangeMembershipReply, ClientError> {
        let req = ChangeMembershipRequest {
            add_voters,
            remove_voters,
            retain_as_learners,
        };
        self.call(Kind::Write, req, Duration::ZERO, |mut c, r| async move {
            c.change_membership(r).await
        })
        .await
    }
}
