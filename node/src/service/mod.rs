//! The client gRPC service (`raftmq.v1.RaftMq`) of one node.
//!
//! Reads are served locally from committed data ([`read`], [`status`]). Writes run on the
//! leader: messages through the [`Pipeline`] ([`send`], [`stream`] only translate the wire
//! types), other writes through [`crate::pipeline::propose`] ([`admin`]); a follower forwards
//! them once ([`mod@forward`]). Every failure becomes a status through
//! [`crate::error::to_status`].

pub mod admin;
pub mod convert;
pub mod forward;
pub mod read;
pub mod send;
pub mod status;
pub mod stream;

use std::sync::Arc;

use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_server::RaftMq;
use raftmq_proto::v1::raft_mq_server::RaftMqServer;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::Request;
use tonic::Response;
use tonic::Status;

use self::forward::forward;
use crate::core::NodeCore;
use crate::error::client_status;
use crate::error::NodeError;
use crate::pipeline::Pipeline;

/// The `RaftMq` service over one node's [`NodeCore`].
#[derive(Clone)]
pub struct ClientService {
    core: Arc<NodeCore>,
    /// The write pipeline of `core`.
    pipeline: Pipeline,
    /// Turns true when the node stops (ends open `SendStream`s).
    stop: watch::Receiver<bool>,
}

/// Runs a write on this node if it leads, else forwards the request to the leader; a
/// follower elected while the request waited for a new leader runs it itself.
macro_rules! leader_or_forward {
    ($self:ident, $req:ident, $method:ident) => {
        let $req = if $self.core.is_leader() {
            $req
        } else {
            let kept = $req.get_ref().clone();
            let relayed = forward::was_forwarded(&$req);
            match forward(
                &$self.core,
                $req,
                |mut c, r| async move { c.$method(r).await },
            )
            .await
            {
                Err(s) if !relayed && $self.core.is_leader() && forward::not_leader_unsent(&s) => {
                    Request::new(kept)
                }
                other => return other,
            }
        };
    };
}

impl ClientService {
    /// The service of `core`; `stop` turns true when the node stops.
    pub fn new(core: Arc<NodeCore>, stop: watch::Receiver<bool>) -> Self {
        let pipeline = Pipeline::new(core.clone());
        Self {
            core,
            pipeline,
            stop,
        }
    }

    /// The tonic server with the configured message limits.
    pub fn into_server(self) -> RaftMqServer<Self> {
        let max = usize::try_from(self.core.config.grpc_max_message_bytes).unwrap_or(usize::MAX);
        RaftMqServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max)
    }

    fn status(&self, e: NodeError) -> Status {
        client_status(e, self.core.node_id)
    }
}

#[tonic::async_trait]
impl RaftMq for ClientService {
    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendReply>, Status> {
        leader_or_forward!(self, request, send);
        let msg = request
            .into_inner()
            .message
            .ok_or_else(|| self.status(NodeError::InvalidArgument("message is missing".into())))?;
        let mut results = send::send_messages(&self.pipeline, std::iter::once(msg))
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::SendReply {
            result: results.pop(),
        }))
    }

    type SendStreamStream = stream::SendStreamDriver;

    async fn send_stream(
        &self,
        request: Request<tonic::Streaming<pb::SendStreamRequest>>,
    ) -> Result<Response<Self::SendStreamStream>, Status> {
        if self.core.is_shutting_down() {
            return Err(self.status(NodeError::ShuttingDown));
        }
        Ok(Response::new(stream::SendStreamDriver::new(
            self.pipeline.clone(),
            request.into_inner(),
            self.stop.clone(),
        )))
    }

    async fn send_batch(
        &self,
        request: Request<pb::SendBatchRequest>,
    ) -> Result<Response<pb::SendBatchReply>, Status> {
        leader_or_forward!(self, request, send_batch);
        let results = send::send_messages(&self.pipeline, request.into_inner().messages)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::SendBatchReply { results }))
    }

    async fn pull(
        &self,
        request: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullReply>, Status> {
        let start = Instant::now();
        let res = read::pull(&self.core, request.into_inner()).await;
        self.core.metrics.record_pull(start.elapsed());
        res.map(Response::new).map_err(|e| self.status(e))
    }

    async fn query_by_id(
        &self,
        request: Request<pb::QueryByIdRequest>,
    ) -> Result<Response<pb::QueryByIdReply>, Status> {
        read::query_by_id(&self.core, request.into_inner().msg_id)
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn query_by_key(
        &self,
        request: Request<pb::QueryByKeyRequest>,
    ) -> Result<Response<pb::QueryByKeyReply>, Status> {
        read::query_by_key(&self.core, request.into_inner())
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn commit_offset(
        &self,
        request: Request<pb::CommitOffsetRequest>,
    ) -> Result<Response<pb::CommitOffsetReply>, Status> {
        leader_or_forward!(self, request, commit_offset);
        admin::commit_offset(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn fetch_offset(
        &self,
        request: Request<pb::FetchOffsetRequest>,
    ) -> Result<Response<pb::FetchOffsetReply>, Status> {
        read::fetch_offset(&self.core, request.into_inner())
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn create_topic(
        &self,
        request: Request<pb::CreateTopicRequest>,
    ) -> Result<Response<pb::CreateTopicReply>, Status> {
        leader_or_forward!(self, request, create_topic);
        let cfg = request
            .into_inner()
            .config
            .ok_or_else(|| self.status(NodeError::InvalidArgument("config is missing".into())))?;
        let config = admin::create_topic(&self.core, cfg)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::CreateTopicReply {
            config: Some(config),
        }))
    }

    async fn update_topic(
        &self,
        request: Request<pb::UpdateTopicRequest>,
    ) -> Result<Response<pb::UpdateTopicReply>, Status> {
        leader_or_forward!(self, request, update_topic);
        let config = admin::update_topic(&self.core, request.into_inner())
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::UpdateTopicReply {
            config: Some(config),
        }))
    }

    async fn delete_topic(
        &self,
        request: Request<pb::DeleteTopicRequest>,
    ) -> Result<Response<pb::DeleteTopicReply>, Status> {
        leader_or_forward!(self, request, delete_topic);
        admin::delete_topic(&self.core, request.into_inner().name)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::DeleteTopicReply {}))
    }

    async fn list_topics(
        &self,
        _request: Request<pb::ListTopicsRequest>,
    ) -> Result<Response<pb::ListTopicsReply>, Status> {
        Ok(Response::new(read::list_topics(&self.core)))
    }

    async fn cluster_status(
        &self,
        request: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusReply>, Status> {
        let local_only = request.metadata().get(status::STATUS_SCOPE_KEY).is_some();
        Ok(Response::new(
            status::cluster_status(&self.core, local_only).await,
        ))
    }

    async fn transfer_leader(
        &self,
        request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        leader_or_forward!(self, request, transfer_leader);
        let leader_id = admin::transfer_leader(&self.core, request.into_inner().to_node_id)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::TransferLeaderReply { leader_id }))
    }

    async fn add_learner(
        &self,
        request: Request<pb::AddLearnerRequest>,
    ) -> Result<Response<pb::AddLearnerReply>, Status> {
        leader_or_forward!(self, request, add_learner);
        admin::add_learner(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn change_membership(
        &self,
        request: Request<pb::ChangeMembershipRequest>,
    ) -> Result<Response<pb::ChangeMembershipReply>, Status> {
        leader_or_forward!(self, request, change_membership);
        admin::change_membership(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }
}
