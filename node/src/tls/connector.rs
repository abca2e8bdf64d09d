//! Outgoing connections of a node (to peers' Raft ports, to the leader's client port when
//! forwarding): an [`Endpoint`] that dials plaintext or TLS, presenting the node certificate
//! and verifying the server's against the cluster CA, for the server name = the address's host
//! (an IP address is checked against the certificate's IP SANs).

use tonic::transport::Certificate;
use tonic::transport::ClientTlsConfig;
use tonic::transport::Endpoint;
use tonic::transport::Identity;

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
