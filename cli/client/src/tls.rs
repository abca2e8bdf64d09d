//! [`ClientTls`]: how a [`Client`](crate::Client) speaks TLS to the nodes' client ports: the
//! CA bundle that verifies the nodes' certificates (server name = the host of the address
//! dialed; an IP address is checked against the certificate's IP SANs) and, optionally, a
//! client certificate.

use std::path::Path;

use tonic::transport::Certificate;
use tonic::transport::ClientTlsConfig;
use tonic::transport::Endpoint;
use tonic::transport::Identity;

use crate::error::ClientError;

/// TLS settings of a client.
#[derive(Clone, Debug)]
pub struct ClientTls {
    /// PEM bundle of the CA(s) that signed the nodes' certificates.
    pub ca_pem: Vec<u8>,
    /// Optional client certificate and key (PEM), if the servers ask for one.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl ClientTls {
    /// Trusts the CA certificate(s) in the PEM file `path`.
    pub fn from_ca_file(path: &Path) -> Result<Self, ClientError> {
        let ca_pem = std::fs::read(path).map_err(|e| {
            ClientError::InvalidArgument(format!("cannot read TLS CA file {}: {e}", path.display()))
        })?;
        if !String::from_utf8_lossy(&ca_pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(ClientError::InvalidArgument(format!(
                "TLS CA file {} holds no PEM certificate",
                path.display()
            )));
        }
        Ok(Self {
            ca_pem,
            identity: None,
        })
    }
}

/// The host part of `host:port` (`[::1]:9` -> `::1`).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// An endpoint for `addr` (host:port): `https` verified with `tls` when set, else `http`.
pub(crate) fn endpoint(tls: Option<&ClientTls>, addr: &str) -> Result<Endpoint, ClientError> {
    let bad = |e: String| ClientError::InvalidArgument(format!("bad address {addr:?}: {e}"));
    let Some(tls) = tls else {
        return Endpoint::from_shared(format!("http://{addr}")).map_err(|e| bad(e.to_string()));
    };
    let mut config = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&tls.ca_pem))
        .domain_name(host_of(addr));
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(Identity::from_pem(cert, key));
    }
    Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| bad(e.to_string()))?
        .tls_config(config)
        .map_err(|e| bad(format!("TLS setup: {e}")))
}
