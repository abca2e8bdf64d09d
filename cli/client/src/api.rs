//! The public calls of [`Client`]: messaging, queries, consumer offsets, topic and cluster
//! admin, each with its retry kind.

use crate::credentials::Grpc;
use crate::error::ClientError;
use raftmq_proto::shared::Shared;
use raftmq_proto::v1::*;
use std::time::Duration;
use tonic::Code;

use crate::client::normalize;
use crate::client::Client;
use crate::client::Kind;

impl Client {
    /// This client's producer id (random; shared by its clones).
    pub fn producer_id(&self) -> &str {
        self.producer.id()
    }

    /// `message` with this producer's identity and the next sequence number, unless it has an
    /// identity already (kept). Resending the returned message is answered with the result
    /// of its first store while the broker's dedup window remembers it. Sends call this
    /// themselves when [`ClientOptions::idempotent`] is on; call it first to resend after
    /// [`ClientError::UnknownOutcome`].
    pub fn identify(&self, message: Message) -> Message {
        self.producer.identify(message)
    }

    /// The retry kind of a send: identified messages (on by default) may be resent.
    pub(crate) fn send_kind(&self) -> Kind {
        match self.opts.idempotent {
            true => Kind::IdempotentSend,
            false => Kind::Write,
        }
    }

    /// The message as it is sent: identified when [`ClientOptions::idempotent`] is on.
    pub(crate) fn outgoing(&self, message: Message) -> Message {
        match self.opts.idempotent {
            true => self.identify(message),
            false => message,
        }
    }

    /// Sends one message; returns after the quorum ack. With
    /// [`ClientOptions::idempotent`](crate::ClientOptions::idempotent) (the default) the
    /// message gets this producer's identity ([`Client::identify`]) and is resent after an
    /// unknown outcome (the broker answers a stored one with its original result); otherwise
    /// it is not resent unless
    /// [`ClientOptions::retry_unknown_writes`](crate::ClientOptions::retry_unknown_writes).
    ///
    /// Concurrent sends to one node share one `SendStream` call: one
    /// HTTP/2 stream, one frame per message, each answered on its own.
    pub async fn send(&self, message: Message) -> Result<SendResult, ClientError> {
        let message = Shared::new(self.outgoing(message));
        let (result, leader) = self
            .retry(self.send_kind(), |addr| {
                let m = &message;
                async move { self.send_attempt(&addr, m).await }
            })
            .await?;
        // A follower forwarded it: send to the leader from now on.
        if let Some(l) = leader {
            self.follow(&l);
        }
        Ok(result)
    }

    /// Sends messages as one Raft entry (all or none); one result per message, in order.
    /// Identified and resent like [`send`](Self::send); a resent batch whose first copy was
    /// stored is answered with the original results (`duplicate` set).
    ///
    /// Batches to one node share the `SendStream` that single sends use (a frame each).
    pub async fn send_batch(&self, messages: Vec<Message>) -> Result<Vec<SendResult>, ClientError> {
        let messages = messages.into_iter().map(|m| self.outgoing(m)).collect();
        // Shared by every attempt (the body of each message already was).
        let req = Shared::new(SendBatchRequest { messages });
        let (results, leader) = self
            .retry(self.send_kind(), |addr| {
                let r = &req;
                async move { self.send_batch_attempt(&addr, r).await }
            })
            .await?;
        // A follower forwarded it: send to the leader from now on.
        if let Some(l) = leader {
            self.follow(&l);
        }
        Ok(results)
    }

    /// Pulls from any node (leader preferred), waiting up to `req.long_poll_timeout_ms`.
    pub async fn pull(&self, req: PullRequest) -> Result<PullReply, ClientError> {
        let extra = Duration::from_millis(u64::from(req.long_poll_timeout_ms));
        self.call(Kind::Read, req, extra, |mut c: Grpc, r| async move {
            c.pull(r).await
        })
        .await
    }

    /// Pulls from one given node (client address), once, without retries: for checking what
    /// each replica serves.
    pub async fn pull_from(&self, addr: &str, req: PullRequest) -> Result<PullReply, ClientError> {
        let extra = Duration::from_millis(u64::from(req.long_poll_timeout_ms));
        let addr = normalize(addr);
        self.attempt(&addr, req, extra, &|mut c: Grpc, r| async move {
            c.pull(r).await
        })
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
                |mut c: Grpc, r| async move { c.query_by_id(r).await },
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
            .call(
                Kind::Read,
                req,
                Duration::ZERO,
                |mut c: Grpc, r| async move { c.query_by_key(r).await },
            )
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
            |mut c: Grpc, r| async move { c.commit_offset(r).await },
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
            .call(
                Kind::Read,
                req,
                Duration::ZERO,
                |mut c: Grpc, r| async move { c.fetch_offset(r).await },
            )
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
                |mut c: Grpc, r| async move { c.create_topic(r).await },
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
                |mut c: Grpc, r| async move { c.update_topic(r).await },
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
            |mut c: Grpc, r| async move { c.delete_topic(r).await },
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
                |mut c: Grpc, r| async move { c.list_topics(r).await },
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
            |mut c: Grpc, r| async move { c.cluster_status(r).await },
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
            &|mut c: Grpc, r| async move { c.cluster_status(r).await },
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
                |mut c: Grpc, r| async move { c.transfer_leader(r).await },
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
            .call(
                Kind::Write,
                req,
                Duration::ZERO,
                |mut c: Grpc, r| async move { c.add_learner(r).await },
            )
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
        self.call(
            Kind::Write,
            req,
            Duration::ZERO,
            |mut c: Grpc, r| async move { c.change_membership(r).await },
        )
        .await
    }
}
