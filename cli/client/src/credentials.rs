//! [`Credentials`] and the [`Signer`] interceptor that signs every call of a [`crate::Client`]
//! the RocketMQ 5 way (`MQv2-HMAC-SHA1`, see `raftmq_proto::signature`): each unary call, and
//! each stream when it opens.

use std::fmt;
use std::sync::Arc;

use raftmq_proto::call_client::CallClient;
use raftmq_proto::header_cut::CutResponses;
use raftmq_proto::signature;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::Request;
use tonic::Status;

/// An access key and its secret key. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key (`Credential=` of the signature).
    pub access_key: String,
    /// The secret key (HMAC key).
    pub secret_key: String,
}

impl Credentials {
    /// Credentials of an access key and secret key.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish()
    }
}

/// Adds `x-mq-date-time` and `authorization` to every call (nothing without credentials).
#[derive(Clone, Debug, Default)]
pub struct Signer(Option<Arc<Credentials>>);

impl Signer {
    /// A signer with `credentials` (None: calls go unsigned).
    pub fn new(credentials: Option<Credentials>) -> Self {
        Self(credentials.map(Arc::new))
    }
}

impl Interceptor for Signer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(c) = &self.0 {
            let (date_time, authorization) = signature::sign_now(&c.access_key, &c.secret_key);
            let md = req.metadata_mut();
            md.insert(
                signature::DATE_TIME_KEY,
                date_time
                    .parse()
                    .map_err(|_| Status::internal("date-time is not a header value"))?,
            );
            md.insert(
                signature::AUTHORIZATION_KEY,
                authorization.parse().map_err(|_| {
                    Status::invalid_argument("the access key is not a valid header value")
                })?,
            );
        }
        Ok(req)
    }
}

/// The gRPC client of one node, signing its calls; its answers are cut after each large
/// message's prefix ([`CutResponses`]), which spares tonic's decoder a copy of them.
pub type Grpc = RaftMqClient<InterceptedService<CutResponses<Channel>, Signer>>;

/// `SendBatch` and `SendStream` with shared messages (no copy per attempt), over the same
/// channel and signer as [`Grpc`].
pub type Sender = CallClient<InterceptedService<CutResponses<Channel>, Signer>>;
