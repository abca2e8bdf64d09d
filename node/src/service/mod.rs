//! The client gRPC service (`raftmq.v1.RaftMq`) of one node.
//!
//! Reads are served locally from committed data ([`read`], [`status`]). Writes run on the
//! leader: messages through the [`Pipeline`] ([`send`], [`stream`] only translate the wire
//! types), other writes through [`crate::pipeline::propose`] ([`admin`]); a follower forwards
//! them once ([`mod@forward`]). Every call is authenticated first ([`ClientService::principal`],
//! which puts the [`Principal`] into the request's extensions for forwarding) and authorized
//! with [`authorize`] once its topic and group are known (see [`crate::auth::policy`]). Every
//! failure becomes a status through [`crate::error::to_status`].

pub mod admin;
pub mod convert;
pub mod forward;
pub mod read;
pub mod send;
pub mod status;
pub mod stream;
pub mod users;

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
use crate::auth::policy::authorize;
use crate::auth::policy::Action;
use crate::auth::Principal;
use crate::core::NodeCore;
use crate::error::client_status;
use crate::error::NodeError;
use crate::pipeline::connection_source;
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

    /// Authenticates `req` (see [`crate::auth`]) and files the principal in its extensions,
    /// where forwarding finds it.
    async fn principal<T>(&self, req: &mut Request<T>) -> Result<Principal, Status> {
        let p = self
            .core
            .auth
            .authenticate_applied(&self.core.store, || self.core.is_leader(), req.metadata())
            .await
            .map_err(|e| self.status(e))?;
        req.extensions_mut().insert(p.clone());
        Ok(p)
    }

    /// Authenticates `req` and authorizes `action`.
    async fn allow<T>(
        &self,
        req: &mut Request<T>,
        action: Action<'_>,
    ) -> Result<Principal, Status> {
        let p = self.principal(req).await?;
        authorize(&p, action).map_err(|e| self.status(e))?;
        Ok(p)
    }
}

#[tonic::async_trait]
impl RaftMq for ClientService {
    async fn send(
        &self,
        mut request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendReply>, Status> {
        let p = self.principal(&mut request).await?;
        if let Some(m) = &request.get_ref().message {
            authorize(&p, Action::Send { topic: &m.topic }).map_err(|e| self.status(e))?;
        }
        leader_or_forward!(self, request, send);
        let source = connection_source(request.remote_addr());
        let msg = request
            .into_inner()
            .message
            .ok_or_else(|| self.status(NodeError::InvalidArgument("message is missing".into())))?;
        let mut results = send::send_messages(&self.pipeline, source, std::iter::once(msg))
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::SendReply {
            result: results.pop(),
        }))
    }

    type SendStreamStream = stream::SendStreamDriver;

    async fn send_stream(
        &self,
        mut request: Request<tonic::Streaming<pb::SendStreamRequest>>,
    ) -> Result<Response<Self::SendStreamStream>, Status> {
        let principal = self.principal(&mut request).await?;
        if self.core.is_shutting_down() {
            return Err(self.status(NodeError::ShuttingDown));
        }
        Ok(Response::new(stream::SendStreamDriver::new(
            self.pipeline.clone(),
            request.into_inner(),
            self.stop.clone(),
            principal,
        )))
    }

    async fn send_batch(
        &self,
        mut request: Request<pb::SendBatchRequest>,
    ) -> Result<Response<pb::SendBatchReply>, Status> {
        let p = self.principal(&mut request).await?;
        for m in &request.get_ref().messages {
            authorize(&p, Action::Send { topic: &m.topic }).map_err(|e| self.status(e))?;
        }
        leader_or_forward!(self, request, send_batch);
        let source = connection_source(request.remote_addr());
        let results = send::send_messages(&self.pipeline, source, request.into_inner().messages)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::SendBatchReply { results }))
    }

    async fn pull(
        &self,
        mut request: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullReply>, Status> {
        let topic = request.get_ref().topic.clone();
        self.allow(&mut request, Action::Read { topic: &topic })
            .await?;
        let start = Instant::now();
        let res = read::pull(&self.core, request.into_inner()).await;
        self.core.metrics.record_pull(start.elapsed());
        res.map(Response::new).map_err(|e| self.status(e))
    }

    async fn query_by_id(
        &self,
        mut request: Request<pb::QueryByIdRequest>,
    ) -> Result<Response<pb::QueryByIdReply>, Status> {
        let p = self.principal(&mut request).await?;
        let reply = read::query_by_id(&self.core, request.into_inner().msg_id)
            .map_err(|e| self.status(e))?;
        if let Some(m) = &reply.message {
            authorize(
                &p,
                Action::Read {
                    topic: m.message.as_ref().map_or("", |x| x.topic.as_str()),
                },
            )
            .map_err(|e| self.status(e))?;
        }
        Ok(Response::new(reply))
    }

    async fn query_by_key(
        &self,
        mut request: Request<pb::QueryByKeyRequest>,
    ) -> Result<Response<pb::QueryByKeyReply>, Status> {
        let topic = request.get_ref().topic.clone();
        self.allow(&mut request, Action::Read { topic: &topic })
            .await?;
        read::query_by_key(&self.core, request.into_inner())
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn commit_offset(
        &self,
        mut request: Request<pb::CommitOffsetRequest>,
    ) -> Result<Response<pb::CommitOffsetReply>, Status> {
        let (group, topic) = (
            request.get_ref().group.clone(),
            request.get_ref().topic.clone(),
        );
        self.allow(
            &mut request,
            Action::Consume {
                group: &group,
                topic: &topic,
            },
        )
        .await?;
        leader_or_forward!(self, request, commit_offset);
        admin::commit_offset(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn fetch_offset(
        &self,
        mut request: Request<pb::FetchOffsetRequest>,
    ) -> Result<Response<pb::FetchOffsetReply>, Status> {
        let (group, topic) = (
            request.get_ref().group.clone(),
            request.get_ref().topic.clone(),
        );
        self.allow(
            &mut request,
            Action::Consume {
                group: &group,
                topic: &topic,
            },
        )
        .await?;
        read::fetch_offset(&self.core, request.into_inner())
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn create_topic(
        &self,
        mut request: Request<pb::CreateTopicRequest>,
    ) -> Result<Response<pb::CreateTopicReply>, Status> {
        self.allow(&mut request, Action::Admin("CreateTopic"))
            .await?;
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
        mut request: Request<pb::UpdateTopicRequest>,
    ) -> Result<Response<pb::UpdateTopicReply>, Status> {
        self.allow(&mut request, Action::Admin("UpdateTopic"))
            .await?;
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
        mut request: Request<pb::DeleteTopicRequest>,
    ) -> Result<Response<pb::DeleteTopicReply>, Status> {
        self.allow(&mut request, Action::Admin("DeleteTopic"))
            .await?;
        leader_or_forward!(self, request, delete_topic);
        admin::delete_topic(&self.core, request.into_inner().name)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::DeleteTopicReply {}))
    }

    async fn list_topics(
        &self,
        mut request: Request<pb::ListTopicsRequest>,
    ) -> Result<Response<pb::ListTopicsReply>, Status> {
        self.allow(&mut request, Action::Describe).await?;
        Ok(Response::new(read::list_topics(&self.core)))
    }

    async fn cluster_status(
        &self,
        mut request: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusReply>, Status> {
        self.allow(&mut request, Action::Describe).await?;
        let local_only = request.metadata().get(status::STATUS_SCOPE_KEY).is_some();
        Ok(Response::new(
            status::cluster_status(&self.core, local_only).await,
        ))
    }

    async fn transfer_leader(
        &self,
        mut request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        self.allow(&mut request, Action::Admin("TransferLeader"))
            .await?;
        leader_or_forward!(self, request, transfer_leader);
        let leader_id = admin::transfer_leader(&self.core, request.into_inner().to_node_id)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::TransferLeaderReply { leader_id }))
    }

    async fn add_learner(
        &self,
        mut request: Request<pb::AddLearnerRequest>,
    ) -> Result<Response<pb::AddLearnerReply>, Status> {
        self.allow(&mut request, Action::Admin("AddLearner"))
            .await?;
        leader_or_forward!(self, request, add_learner);
        admin::add_learner(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn change_membership(
        &self,
        mut request: Request<pb::ChangeMembershipRequest>,
    ) -> Result<Response<pb::ChangeMembershipReply>, Status> {
        self.allow(&mut request, Action::Admin("ChangeMembership"))
            .await?;
        leader_or_forward!(self, request, change_membership);
        admin::change_membership(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn create_user(
        &self,
        mut request: Request<pb::CreateUserRequest>,
    ) -> Result<Response<pb::CreateUserReply>, Status> {
        self.allow(&mut request, Action::Admin("CreateUser"))
            .await?;
        leader_or_forward!(self, request, create_user);
        users::create_user(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }

    async fn list_users(
        &self,
        mut request: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersReply>, Status> {
        self.allow(&mut request, Action::Admin("ListUsers")).await?;
        // The leader answers (a follower forwards): it has applied every user change it
        // acknowledged, so an admin sees the user it just created or deleted.
        leader_or_forward!(self, request, list_users);
        drop(request);
        Ok(Response::new(users::list_users(&self.core)))
    }

    async fn delete_user(
        &self,
        mut request: Request<pb::DeleteUserRequest>,
    ) -> Result<Response<pb::DeleteUserReply>, Status> {
        self.allow(&mut request, Action::Admin("DeleteUser"))
            .await?;
        leader_or_forward!(self, request, delete_user);
        users::delete_user(&self.core, request.into_inner().name)
            .await
            .map(Response::new)
            .map_err(|e| self.status(e))
    }
}
