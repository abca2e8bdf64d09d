//! TLS of a node: loading and reloading its certificate, key and cluster CA
//! ([`TlsState`], [`watch`]), the accept loop of every gRPC listener with its connection
//! limit and, on the peer port, mutual TLS plus the member check ([`incoming`],
//! [`MemberAdmission`]), outgoing TLS connections to peers and the leader ([`endpoint`],
//! [`connect_lazy`]), and the congestion control of connections on this host ([`congestion`]).
//!
//! One certificate serves all gRPC listeners; rustls with the ring provider. Without TLS
//! files the same accept loop serves plaintext (config validation allows that only on
//! loopback listeners or with `allow-plaintext`).

mod admission;
pub mod congestion;
mod connector;
mod incoming;
mod material;
mod reload;
#[cfg(test)]
mod reload_tests;
pub mod x509;
#[cfg(test)]
mod x509_tests;

pub use admission::member_uri;
pub use admission::named_member;
pub use admission::parse_member_uri;
pub use admission::Admit;
pub use admission::MemberAdmission;
pub use congestion::LoopbackCongestion;
pub use connector::connect_lazy;
pub use connector::endpoint;
pub use connector::host_of;
pub use incoming::incoming;
pub use incoming::Conn;
pub use incoming::ListenerOpts;
pub use incoming::HANDSHAKE_TIMEOUT;
pub use material::Material;
pub use material::TlsError;
pub use reload::watch;
pub use reload::TlsState;
/// The certificate types of the TLS API (PEM parsing: `pki::pem::PemObject`).
pub use tokio_rustls::rustls::pki_types as pki;
