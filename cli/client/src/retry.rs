//! How one call of a [`Client`] is made: an attempt at one node with its deadline, and the
//! retry rules of the call's [`Kind`] (see the [`crate`] docs) around the attempts.

use std::future::Future;
use std::time::Duration;

use tonic::Code;
use tonic::Status;

use crate::client::normalize;
use crate::client::Client;
use crate::client::Kind;
use crate::credentials::Grpc;
use crate::credentials::Sender;
use crate::error::classify;
use crate::error::ClientError;
use crate::error::Verdict;

impl Client {
    /// One attempt at `addr`, on a [`Grpc`] or a [`Sender`] client of it.
    pub(crate) async fn attempt<G, Req, Resp, F, Fut>(
        &self,
        addr: &str,
        req: Req,
        extra: Duration,
        rpc: &F,
    ) -> Result<Resp, Status>
    where
        G: NodeClient,
        F: Fn(G, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        let client = G::of(self, addr).map_err(|e| Status::invalid_argument(e.to_string()))?;
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
    pub(crate) async fn call<G, Req, Resp, F, Fut>(
        &self,
        kind: Kind,
        req: Req,
        extra: Duration,
        rpc: F,
    ) -> Result<Resp, ClientError>
    where
        G: NodeClient,
        Req: Clone,
        F: Fn(G, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        self.retry(kind, |addr| {
            let req = req.clone();
            let rpc = &rpc;
            async move { self.attempt(&addr, req, extra, rpc).await }
        })
        .await
    }

    /// Runs `attempt` (one try at a node address) with the retry rules of `kind`.
    pub(crate) async fn retry<Resp, F, Fut>(
        &self,
        kind: Kind,
        attempt: F,
    ) -> Result<Resp, ClientError>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<Resp, Status>>,
    {
        let mut backoff = self.opts.backoff_initial;
        let mut redirect: Option<String> = None;
        let mut uncertain: Option<(String, Code, String)> = None;
        // Whether a node that named itself the leader was already tried again at once.
        let mut self_redirected = false;
        let mut last = String::from("no attempt made");
        let attempts = self.opts.max_attempts.max(1);
        for _ in 0..attempts {
            let addr = redirect.take().unwrap_or_else(|| self.pick());
            let status = match attempt(addr.clone()).await {
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
            let write = matches!(kind, Kind::Write | Kind::IdempotentSend);
            match classify(&status, write) {
                Verdict::Redirect(to) if normalize(&to) != addr => {
                    self.follow(&to);
                    redirect = Some(normalize(&to));
                    continue;
                }
                // The node names itself: it was elected while the call waited there for a new
                // leader. Once, try it again at once.
                Verdict::Redirect(_) if !self_redirected => {
                    self_redirected = true;
                    self.follow(&addr);
                    redirect = Some(addr);
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
                    if !self.opts.retry_unknown_writes && kind != Kind::IdempotentSend {
                        // The node may be a frozen or deposed leader: the next call must not go
                        // straight back to it, so forget it as leader before returning.
                        self.demote(&addr);
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
}

/// A gRPC client of one node, made from the [`Client`]'s channel to it.
pub(crate) trait NodeClient: Sized {
    /// The client of `addr`.
    fn of(client: &Client, addr: &str) -> Result<Self, ClientError>;
}

impl NodeClient for Grpc {
    fn of(client: &Client, addr: &str) -> Result<Self, ClientError> {
        client.grpc(addr)
    }
}

impl NodeClient for Sender {
    fn of(client: &Client, addr: &str) -> Result<Self, ClientError> {
        client.sender(addr)
    }
}
