//! Outgoing connections of a node (to peers' Raft ports, to the leader's client port when
//! forwarding): an [`Endpoint`] that dials plaintext or TLS, presenting the node certificate
//! and verifying the server's against the cluster CA, for the server name = the address's host
//! (an IP address is checked against the certificate's IP SANs). [`connect_lazy`] makes the
//! channel with tonic's own TCP connector, wrapped to set `loopback-congestion-control`.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::Certificate;
use tonic::transport::Channel;
use tonic::transport::ClientTlsConfig;
use tonic::transport::Endpoint;
use tonic::transport::Identity;

use super::congestion::LoopbackCongestion;
use super::reload::TlsState;

/// The host part of `host:port` (`[::1]:9` -> `::1`).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// An endpoint for `addr` (host:port): `https` with the current material when `tls` is set.
pub fn endpoint(tls: Option<&TlsState>, addr: &str) -> Result<Endpoint, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let ep = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| format!("invalid address {addr:?}: {e}"))?;
    let Some(tls) = tls else {
        return Ok(ep);
    };
    let m = tls.current();
    let config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&m.ca_pem))
        .identity(Identity::from_pem(&m.cert_pem, &m.key_pem))
        .domain_name(host_of(addr));
    ep.tls_config(config)
        .map_err(|e| format!("TLS setup for {addr:?} failed: {e}"))
}

/// A channel of `ep` that connects when first used, with `TCP_NODELAY` and `congestion` set
/// on its connections (TLS, if `ep` has it, and the connect timeout stay tonic's; `ep`'s own
/// TCP options, such as `tcp_nodelay`, apply only to tonic's connector and are not read).
pub fn connect_lazy(ep: &Endpoint, congestion: &LoopbackCongestion) -> Channel {
    ep.connect_with_connector_lazy(Tuned::new(congestion))
}

/// hyper-util's connector, then the socket options tonic's has no setting for.
#[derive(Clone)]
struct Tuned {
    http: HttpConnector,
    congestion: LoopbackCongestion,
}

impl Tuned {
    fn new(congestion: &LoopbackCongestion) -> Self {
        let mut http = HttpConnector::new();
        // As tonic's own connector: the scheme (http or https) is tonic's business.
        http.enforce_http(false);
        http.set_nodelay(true);
        Self {
            http,
            congestion: congestion.clone(),
        }
    }
}

type Connecting<E> = Pin<Box<dyn Future<Output = Result<TokioIo<TcpStream>, E>> + Send>>;

impl tower_service::Service<tonic::codegen::http::Uri> for Tuned {
    type Response = TokioIo<TcpStream>;
    type Error = <HttpConnector as tower_service::Service<tonic::codegen::http::Uri>>::Error;
    type Future = Connecting<Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.http.poll_ready(cx)
    }

    fn call(&mut self, uri: tonic::codegen::http::Uri) -> Self::Future {
        let connecting = self.http.call(uri);
        let congestion = self.congestion.clone();
        Box::pin(async move {
            let io = connecting.await?;
            congestion.apply(io.inner());
            Ok(io)
        })
    }
}

#[cfg(test)]
mod tests {
    use tower_service::Service as _;

    use super::*;

    /// The connector a node's channels use sets the algorithm on a same-host connection.
    #[tokio::test]
    async fn outgoing_connection_on_this_host_gets_the_algorithm() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: tonic::codegen::http::Uri = format!("http://{}", l.local_addr().unwrap())
            .parse()
            .unwrap();
        let mut tuned = Tuned::new(&LoopbackCongestion::new("reno"));
        std::future::poll_fn(|cx| tuned.poll_ready(cx))
            .await
            .unwrap();
        let io = tuned.call(uri).await.expect("connects");
        let name = socket2::SockRef::from(io.inner()).tcp_congestion().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&name).trim_end_matches('\0'),
            "reno"
        );
    }
}
