//! [`CallClient`]: calls of the generated clients whose requests are types of our own, each
//! encoding as the request the `.proto` names (same fields, same tags).
//!
//! - `SendBatch` and `SendStream` with [`Shared`] messages: a client resends a message
//!   without copying it ([`crate::shared`]).

use tonic::codegen::http;
use tonic::codegen::Body;
use tonic::codegen::Bytes;
use tonic::codegen::GrpcMethod;
use tonic::codegen::StdError;

use crate::codec::StrictProstCodec;
use crate::shared::Shared;
use crate::shared::SharedSendStreamRequest;
use crate::v1::SendBatchReply;
use crate::v1::SendBatchRequest;
use crate::v1::SendStreamReply;

/// A gRPC client for the calls above; every other call is the generated clients'.
#[derive(Debug, Clone)]
pub struct CallClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> CallClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    /// A client over `inner` (a channel, possibly behind an interceptor).
    pub fn new(inner: T) -> Self {
        Self {
            inner: tonic::client::Grpc::new(inner),
        }
    }

    /// Limits the size of a decoded answer (tonic's default: 4 MiB).
    pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
        self.inner = self.inner.max_decoding_message_size(limit);
        self
    }

    /// Limits the size of an encoded request (tonic's default: `usize::MAX`).
    pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
        self.inner = self.inner.max_encoding_message_size(limit);
        self
    }

    /// Waits until the channel can take a call; names the method as the generated code does.
    async fn ready<R>(
        &mut self,
        req: &mut tonic::Request<R>,
        service: &'static str,
        method: &'static str,
    ) -> Result<(), tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| tonic::Status::unknown(format!("Service was not ready: {}", e.into())))?;
        req.extensions_mut()
            .insert(GrpcMethod::new(service, method));
        Ok(())
    }

    /// `raftmq.v1.RaftMq/SendBatch`: the messages as one Raft entry.
    pub async fn send_batch(
        &mut self,
        mut req: tonic::Request<Shared<SendBatchRequest>>,
    ) -> Result<tonic::Response<SendBatchReply>, tonic::Status> {
        self.ready(&mut req, "raftmq.v1.RaftMq", "SendBatch")
            .await?;
        let path = http::uri::PathAndQuery::from_static("/raftmq.v1.RaftMq/SendBatch");
        self.inner
            .unary(req, path, StrictProstCodec::default())
            .await
    }

    /// `raftmq.v1.RaftMq/SendStream`: pipelined single sends, each answered by `seq`.
    pub async fn send_stream(
        &mut self,
        request: impl tonic::IntoStreamingRequest<Message = SharedSendStreamRequest>,
    ) -> Result<tonic::Response<tonic::codec::Streaming<SendStreamReply>>, tonic::Status> {
        let mut req = request.into_streaming_request();
        self.ready(&mut req, "raftmq.v1.RaftMq", "SendStream")
            .await?;
        let path = http::uri::PathAndQuery::from_static("/raftmq.v1.RaftMq/SendStream");
        self.inner
            .streaming(req, path, StrictProstCodec::default())
            .await
    }
}
