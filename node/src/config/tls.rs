//! [`TlsConfig`]: the node's TLS files, the plaintext rule, the listeners' connection
//! limits and the congestion control of same-host connections (flattened into
//! [`NodeConfig`](super::NodeConfig) as flat kebab-case keys).
//!
//! One certificate serves every gRPC listener (client, RocketMQ, peer) and is the node's
//! client identity towards peers; the CA verifies peers' client and server certificates. Either
//! all three files are set (TLS everywhere, mutual TLS on the peer port) or none (plaintext,
//! allowed only on loopback listeners unless `allow-plaintext = true`). The `/metrics`
//! endpoint stays plaintext HTTP either way.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

use super::ConfigError;
use crate::tls::congestion;
use crate::tls::congestion::DEFAULT_LOOPBACK_CONGESTION_CONTROL;

/// Default of `tls-reload-interval-ms`.
pub const DEFAULT_TLS_RELOAD_INTERVAL_MS: u64 = 2_000;
/// Default of `max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10_000;
/// Default of `max-concurrent-streams`.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 1_024;

/// TLS and connection settings of one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct TlsConfig {
    /// PEM certificate chain of this node (leaf first), served on the client, RocketMQ and
    /// peer ports and presented to peers as the client certificate. It must carry the URI SAN
    /// `raftmq://<cluster-id>/node/<node-id>` (peers check it) and the IP/DNS names clients
    /// dial. Default unset (plaintext); set together with tls-key-file and tls-ca-file.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of tls-cert-file. Default unset.
    pub tls_key_file: Option<PathBuf>,
    /// PEM bundle of the cluster CA(s): verifies the client certificates of peers and the
    /// server certificates of peers and leaders this node connects to. Several CAs may be
    /// listed (old + new while rotating the CA). Default unset.
    pub tls_ca_file: Option<PathBuf>,
    /// Allow plaintext (no TLS files) on listeners that are not loopback addresses (0.0.0.0
    /// counts as not loopback). Default false.
    pub allow_plaintext: bool,
    /// How often the TLS files' modification times are checked; a change (or SIGHUP) reloads
    /// them for new connections, in ms. Default 2000; 0 (SIGHUP only) or 100..=3600000.
    pub tls_reload_interval_ms: u64,
    /// Most concurrent connections per listener (client, RocketMQ, peer); more are closed at
    /// accept. Default 10000; range 1..=1000000.
    pub max_connections: u32,
    /// Most concurrent gRPC streams (calls) per connection on every listener.
    /// Default 1024; range 1..=65536.
    pub max_concurrent_streams: u32,
    /// TCP congestion control of this node's gRPC connections whose two ends are on this host
    /// (loopback: a local cluster's peers, a client on the same host), which need no pacing;
    /// `system` keeps the host's choice there too. Connections to other hosts always keep
    /// it. Default `reno`.
    pub loopback_congestion_control: String,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_file: None,
            allow_plaintext: false,
            tls_reload_interval_ms: DEFAULT_TLS_RELOAD_INTERVAL_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            loopback_congestion_control: DEFAULT_LOOPBACK_CONGESTION_CONTROL.to_string(),
        }
    }
}

/// The three TLS files of a node that serves TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// tls-cert-file.
    pub cert: PathBuf,
    /// tls-key-file.
    pub key: PathBuf,
    /// tls-ca-file.
    pub ca: PathBuf,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

impl TlsConfig {
    /// The TLS files, if TLS is configured (validated: all three or none).
    pub fn files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.tls_cert_file.clone()?,
            key: self.tls_key_file.clone()?,
            ca: self.tls_ca_file.clone()?,
        })
    }

    /// Checks the TLS settings against the gRPC `listeners` (name, address) this node serves.
    pub fn validate(&self, listeners: &[(&'static str, SocketAddr)]) -> Result<(), ConfigError> {
        let set = [
            ("tls-cert-file", &self.tls_cert_file),
            ("tls-key-file", &self.tls_key_file),
            ("tls-ca-file", &self.tls_ca_file),
        ];
        let given = set.iter().filter(|(_, v)| v.is_some()).count();
        if given != 0 && given != set.len() {
            let (missing, _) = set
                .iter()
                .find(|(_, v)| v.is_none())
                .expect("some but not all of the three are set");
            return Err(invalid(
                missing,
                "tls-cert-file, tls-key-file and tls-ca-file are set together or not at all",
            ));
        }
        for (field, v) in set {
            if v.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err(invalid(field, "must not be empty"));
            }
        }
        if given == 0 && !self.allow_plaintext {
            if let Some((name, addr)) = listeners.iter().find(|(_, a)| !a.ip().is_loopback()) {
                return Err(invalid(
                    "allow-plaintext",
                    format!(
                        "{name} {addr} is not a loopback address and no TLS is configured: set \
                         tls-cert-file, tls-key-file and tls-ca-file, or allow-plaintext = true \
                         to serve plaintext there"
                    ),
                ));
            }
        }
        let reload = self.tls_reload_interval_ms;
        if reload != 0 && !(100..=3_600_000).contains(&reload) {
            return Err(invalid(
                "tls-reload-interval-ms",
                format!("{reload} is outside 100..=3600000 (or 0: SIGHUP only)"),
            ));
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            return Err(invalid(
                "max-connections",
                format!("{} is outside 1..=1000000", self.max_connections),
            ));
        }
        if !(1..=65_536).contains(&self.max_concurrent_streams) {
            return Err(invalid(
                "max-concurrent-streams",
                format!("{} is outside 1..=65536", self.max_concurrent_streams),
            ));
        }
        if let Some(reason) = congestion::name_error(&self.loopback_congestion_control) {
            return Err(invalid("loopback-congestion-control", reason));
        }
        Ok(())
    }
}
