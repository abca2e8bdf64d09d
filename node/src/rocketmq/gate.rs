//! Authentication and authorization of RocketMQ calls ([`RocketMqService::admit`]): a refusal
//! is the call's own response with only its body status set (UNAUTHORIZED or FORBIDDEN, codes
//! the 5.0.0 client knows), since the protocol answers gRPC OK.

use raftmq_proto::rocketmq::v2 as rmq;
use tonic::Request;
use tonic::Response;

use super::status;
use super::RocketMqService;
use crate::auth::policy::authorize;
use crate::auth::policy::Action;

/// The name of a resource ("" if absent).
pub(super) fn name(r: &Option<rmq::Resource>) -> &str {
    r.as_ref().map_or("", |r| r.name.as_str())
}

/// One [`Action::Send`] per message of a SendMessage call.
pub(super) fn actions_of_send(req: &rmq::SendMessageRequest) -> Vec<Action<'_>> {
    req.messages
        .iter()
        .map(|m| Action::Send {
            topic: name(&m.topic),
        })
        .collect()
}

/// A response that is all defaults but its status.
pub(super) trait WithStatus: Default {
    /// Sets the body status.
    fn set(&mut self, s: rmq::Status);
}

macro_rules! with_status {
    ($($t:ty),*) => {
        $(impl WithStatus for $t {
            fn set(&mut self, s: rmq::Status) {
                self.status = Some(s);
            }
        })*
    };
}

with_status!(
    rmq::QueryRouteResponse,
    rmq::HeartbeatResponse,
    rmq::SendMessageResponse,
    rmq::QueryAssignmentResponse,
    rmq::AckMessageResponse,
    rmq::ForwardMessageToDeadLetterQueueResponse,
    rmq::ChangeInvisibleDurationResponse
);

impl RocketMqService {
    /// Authenticates `req` and authorizes each of `actions`; the refusal as a body status.
    pub(super) async fn gate<T: Sync>(
        &self,
        req: &Request<T>,
        actions: &[Action<'_>],
    ) -> Result<(), rmq::Status> {
        let node_id = self.core.node_id;
        let p = self
            .core
            .auth
            .authenticate_applied(&self.core.store, || self.core.is_leader(), req.metadata())
            .await
            .map_err(|e| status::from_error(&e, node_id))?;
        for a in actions {
            authorize(&p, *a).map_err(|e| status::from_error(&e, node_id))?;
        }
        Ok(())
    }

    /// [`Self::gate`], a refusal as the response `R` to answer with.
    pub(super) async fn admit<R: WithStatus, T: Sync>(
        &self,
        req: &Request<T>,
        actions: &[Action<'_>],
    ) -> Result<(), Response<R>> {
        self.gate(req, actions).await.map_err(|s| {
            let mut r = R::default();
            r.set(s);
            Response::new(r)
        })
    }
}
