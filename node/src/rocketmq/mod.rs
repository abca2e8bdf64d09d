//! The RocketMQ 5 protocol (`apache.rocketmq.v2.MessagingService`, what the official RocketMQ
//! clients speak) on every node: a listener of its own (`rocketmq-listen-addr`), and the same
//! service on the client port, where followers forward to the leader ([`mod@forward`]).
//!
//! Every RPC answers gRPC OK with its outcome in the body's `Status` ([`status`]), as the
//! Java proxy does; a gRPC error is left for what the protocol cannot express (a forwarded
//! call that reached a node which is no longer leader). Writes go through the same
//! [`Pipeline`] and quorum semantics as raftmq's own API: [`route`] (QueryRoute,
//! QueryAssignment), [`telemetry`], [`send`] (SendMessage), [`receive`] (ReceiveMessage),
//! [`ack`] (AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue),
//! [`message`] (conversions).
//! Heartbeat and NotifyClientTermination answer OK: a node keeps no per-client state.
//!
//! With `auth-enabled`, every call is authenticated ([`crate::auth`]; the clients sign with
//! `set_access_key`/`set_secret_key`) and authorized for its topic and group
//! ([`crate::auth::policy`]); a refusal is the body status UNAUTHORIZED or FORBIDDEN
//! (codes the 5.0.0 client knows), with the reason as its message.

pub mod ack;
pub mod forward;
mod gate;
pub mod message;
pub mod receive;
pub mod route;
pub mod send;
pub mod status;
pub mod telemetry;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_proto::rocketmq::v2::messaging_service_server::MessagingService;
use raftmq_proto::rocketmq::v2::messaging_service_server::MessagingServiceServer;
use rmq::Code;
use tokio::sync::watch;
use tonic::Request;
use tonic::Response;
use tonic::Status;

use self::gate::actions_of_send;
use self::gate::name;
use crate::auth::policy::Action;
use crate::core::NodeCore;
use crate::error::to_status;
use crate::error::NodeError;
use crate::pipeline::connection_source;
use crate::pipeline::Pipeline;
use crate::service::forward::was_forwarded;

/// A server stream of the protocol.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The MessagingService of one node.
#[derive(Clone)]
pub struct RocketMqService {
    core: Arc<NodeCore>,
    pipeline: Pipeline,
    /// Turns true when the node stops (ends open streams).
    stop: watch::Receiver<bool>,
    /// host:port of this node's RocketMQ listener as clients reach it (route endpoints);
    /// the client address when the listener is off (then only followers reach the service).
    advertised: String,
}

impl RocketMqService {
    /// The service of `core`; `stop` turns true when the node stops.
    pub fn new(core: Arc<NodeCore>, stop: watch::Receiver<bool>) -> Self {
        let advertised = core
            .config
            .rocketmq_addr()
            .unwrap_or_else(|| core.config.client_addr());
        Self {
            pipeline: Pipeline::new(core.clone()),
            core,
            stop,
            advertised,
        }
    }

    /// The tonic server with the configured message limits.
    pub fn into_server(self) -> MessagingServiceServer<Self> {
        let max = usize::try_from(self.core.config.grpc_max_message_bytes).unwrap_or(usize::MAX);
        MessagingServiceServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max)
    }

    /// Refuses a forwarded call when this node no longer leads (the follower retries).
    fn check_forwarded<T>(&self, req: &Request<T>) -> Result<(), Status> {
        if was_forwarded(req) && (!self.core.is_leader() || self.core.is_shutting_down()) {
            let (leader_id, leader_addr) = self.core.leader();
            let e = if self.core.is_shutting_down() {
                NodeError::ShuttingDown
            } else {
                NodeError::NotLeader {
                    leader_id,
                    leader_addr,
                }
            };
            return Err(to_status(e, self.core.node_id));
        }
        Ok(())
    }
}

fn unsupported(what: &str) -> rmq::Status {
    status::status(
        Code::Unsupported,
        format!("{what} is not supported by raftmq yet"),
    )
}

#[tonic::async_trait]
impl MessagingService for RocketMqService {
    async fn query_route(
        &self,
        request: Request<rmq::QueryRouteRequest>,
    ) -> Result<Response<rmq::QueryRouteResponse>, Status> {
        self.check_forwarded(&request)?;
        if let Err(r) = self
            .admit::<rmq::QueryRouteResponse, _>(
                &request,
                &[Action::Route {
                    topic: name(&request.get_ref().topic),
                }],
            )
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(self.query_route(request.into_inner()).await))
    }

    async fn heartbeat(
        &self,
        request: Request<rmq::HeartbeatRequest>,
    ) -> Result<Response<rmq::HeartbeatResponse>, Status> {
        if let Err(r) = self
            .admit::<rmq::HeartbeatResponse, _>(&request, &[Action::Describe])
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(rmq::HeartbeatResponse {
            status: Some(status::ok()),
        }))
    }

    async fn send_message(
        &self,
        request: Request<rmq::SendMessageRequest>,
    ) -> Result<Response<rmq::SendMessageResponse>, Status> {
        self.check_forwarded(&request)?;
        if let Err(r) = self
            .admit::<rmq::SendMessageResponse, _>(&request, &actions_of_send(request.get_ref()))
            .await
        {
            return Ok(r);
        }
        let source = connection_source(request.remote_addr());
        Ok(Response::new(
            self.send_message(request.into_inner(), source).await,
        ))
    }

    async fn query_assignment(
        &self,
        request: Request<rmq::QueryAssignmentRequest>,
    ) -> Result<Response<rmq::QueryAssignmentResponse>, Status> {
        self.check_forwarded(&request)?;
        let r = request.get_ref();
        if let Err(r) = self
            .admit::<rmq::QueryAssignmentResponse, _>(
                &request,
                &[Action::Consume {
                    group: name(&r.group),
                    topic: name(&r.topic),
                }],
            )
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(
            self.query_assignment(request.into_inner()).await,
        ))
    }

    type ReceiveMessageStream = BoxStream<rmq::ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<rmq::ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        self.check_forwarded(&request)?;
        let r = request.get_ref();
        let topic = r.message_queue.as_ref().map_or("", |q| name(&q.topic));
        let consume = Action::Consume {
            group: name(&r.group),
            topic,
        };
        if let Err(s) = self.gate(&request, &[consume]).await {
            let answer = rmq::ReceiveMessageResponse {
                content: Some(rmq::receive_message_response::Content::Status(s)),
            };
            return Ok(Response::new(Box::pin(futures::stream::iter([Ok(answer)]))));
        }
        let md = request.metadata().clone();
        let answers = self.receive_message(&md, request.into_inner()).await;
        Ok(Response::new(Box::pin(futures::stream::iter(
            answers.into_iter().map(Ok),
        ))))
    }

    async fn ack_message(
        &self,
        request: Request<rmq::AckMessageRequest>,
    ) -> Result<Response<rmq::AckMessageResponse>, Status> {
        self.check_forwarded(&request)?;
        let r = request.get_ref();
        if let Err(r) = self
            .admit::<rmq::AckMessageResponse, _>(
                &request,
                &[Action::Consume {
                    group: name(&r.group),
                    topic: name(&r.topic),
                }],
            )
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(self.ack_message(request.into_inner()).await))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<rmq::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<rmq::ForwardMessageToDeadLetterQueueResponse>, Status> {
        self.check_forwarded(&request)?;
        let r = request.get_ref();
        if let Err(r) = self
            .admit::<rmq::ForwardMessageToDeadLetterQueueResponse, _>(
                &request,
                &[Action::Consume {
                    group: name(&r.group),
                    topic: name(&r.topic),
                }],
            )
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(
            self.forward_to_dlq(request.into_inner()).await,
        ))
    }

    type PullMessageStream = BoxStream<rmq::PullMessageResponse>;

    async fn pull_message(
        &self,
        _request: Request<rmq::PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, Status> {
        let answer = rmq::PullMessageResponse {
            content: Some(rmq::pull_message_response::Content::Status(unsupported(
                "PullMessage (lite pull consumers)",
            ))),
        };
        Ok(Response::new(Box::pin(futures::stream::iter([Ok(answer)]))))
    }

    async fn update_offset(
        &self,
        _request: Request<rmq::UpdateOffsetRequest>,
    ) -> Result<Response<rmq::UpdateOffsetResponse>, Status> {
        Ok(Response::new(rmq::UpdateOffsetResponse {
            status: Some(unsupported("UpdateOffset (lite pull consumers)")),
        }))
    }

    async fn get_offset(
        &self,
        _request: Request<rmq::GetOffsetRequest>,
    ) -> Result<Response<rmq::GetOffsetResponse>, Status> {
        Ok(Response::new(rmq::GetOffsetResponse {
            status: Some(unsupported("GetOffset (lite pull consumers)")),
            offset: 0,
        }))
    }

    async fn query_offset(
        &self,
        _request: Request<rmq::QueryOffsetRequest>,
    ) -> Result<Response<rmq::QueryOffsetResponse>, Status> {
        Ok(Response::new(rmq::QueryOffsetResponse {
            status: Some(unsupported("QueryOffset (lite pull consumers)")),
            offset: 0,
        }))
    }

    async fn end_transaction(
        &self,
        _request: Request<rmq::EndTransactionRequest>,
    ) -> Result<Response<rmq::EndTransactionResponse>, Status> {
        Ok(Response::new(rmq::EndTransactionResponse {
            status: Some(unsupported("EndTransaction (transactional messages)")),
        }))
    }

    type TelemetryStream = telemetry::TelemetryStream;

    async fn telemetry(
        &self,
        request: Request<tonic::Streaming<rmq::TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, Status> {
        // Checked once, at the stream's start; a refusal ends the stream (the client's
        // session reports it).
        if let Err(s) = self.gate(&request, &[Action::Describe]).await {
            return Err(Status::unauthenticated(s.message));
        }
        Ok(Response::new(self.telemetry(request.into_inner())))
    }

    async fn notify_client_termination(
        &self,
        _request: Request<rmq::NotifyClientTerminationRequest>,
    ) -> Result<Response<rmq::NotifyClientTerminationResponse>, Status> {
        Ok(Response::new(rmq::NotifyClientTerminationResponse {
            status: Some(status::ok()),
        }))
    }

    async fn change_invisible_duration(
        &self,
        request: Request<rmq::ChangeInvisibleDurationRequest>,
    ) -> Result<Response<rmq::ChangeInvisibleDurationResponse>, Status> {
        self.check_forwarded(&request)?;
        let r = request.get_ref();
        if let Err(r) = self
            .admit::<rmq::ChangeInvisibleDurationResponse, _>(
                &request,
                &[Action::Consume {
                    group: name(&r.group),
                    topic: name(&r.topic),
                }],
            )
            .await
        {
            return Ok(r);
        }
        Ok(Response::new(
            self.change_invisible_duration(request.into_inner()).await,
        ))
    }

    async fn recall_message(
        &self,
        _request: Request<rmq::RecallMessageRequest>,
    ) -> Result<Response<rmq::RecallMessageResponse>, Status> {
        Ok(Response::new(rmq::RecallMessageResponse {
            status: Some(unsupported("RecallMessage")),
            message_id: String::new(),
        }))
    }

    async fn sync_lite_subscription(
        &self,
        _request: Request<rmq::SyncLiteSubscriptionRequest>,
    ) -> Result<Response<rmq::SyncLiteSubscriptionResponse>, Status> {
        Ok(Response::new(rmq::SyncLiteSubscriptionResponse {
            status: Some(unsupported("SyncLiteSubscription (lite topics)")),
        }))
    }
}
