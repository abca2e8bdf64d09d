//! [`Material`]: one loaded set of a node's TLS files (certificate chain, key, CA bundle) and
//! the rustls server configs built from it; [`TlsError`] says which file is wrong and why.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use tokio_rustls::rustls::pki_types::UnixTime;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::ServerConfig;

use super::x509;
use super::x509::CertFields;
use crate::config::TlsFiles;

/// ALPN of gRPC (tonic's clients require it).
const ALPN_H2: &[u8] = b"h2";

/// Why TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// Which setting.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's contents are not what the setting needs.
    #[error("{what} {path}: {reason}")]
    Invalid {
        /// Which setting.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// One loaded set of TLS files. Immutable: a reload builds a new one.
pub struct Material {
    /// For the client and RocketMQ ports: this certificate, no client certificate asked.
    pub client_port: Arc<ServerConfig>,
    /// For the peer port: this certificate, a client certificate chained to the CA required.
    pub peer_port: Arc<ServerConfig>,
    /// tls-cert-file as read (PEM), for outgoing connections.
    pub cert_pem: Vec<u8>,
    /// tls-key-file as read (PEM).
    pub key_pem: Vec<u8>,
    /// tls-ca-file as read (PEM).
    pub ca_pem: Vec<u8>,
    /// The leaf certificate's serial, not-after date and names.
    pub leaf: CertFields,
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn certs(
    what: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |reason: String| TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not a PEM certificate list: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("holds no PEM certificate".into()));
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Material {
    /// Reads and checks the three files and builds both server configs.
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let cert_pem = read("tls-cert-file", &files.cert)?;
        let key_pem = read("tls-key-file", &files.key)?;
        let ca_pem = read("tls-ca-file", &files.ca)?;
        let chain = certs("tls-cert-file", &files.cert, &cert_pem)?;
        let cas = certs("tls-ca-file", &files.ca, &ca_pem)?;
        let invalid = |what, path: &Path, reason: String| TlsError::Invalid {
            what,
            path: path.to_path_buf(),
            reason,
        };
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            invalid(
                "tls-key-file",
                &files.key,
                format!("not a PEM private key: {e}"),
            )
        })?;
        let leaf = x509::parse(&chain[0])
            .map_err(|e| invalid("tls-cert-file", &files.cert, e.to_string()))?;
        let mut roots = RootCertStore::empty();
        for ca in cas {
            roots.add(ca).map_err(|e| {
                invalid(
                    "tls-ca-file",
                    &files.ca,
                    format!("not a usable CA certificate: {e}"),
                )
            })?;
        }
        let builder = || {
            ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid("tls-cert-file", &files.cert, e.to_string()))
        };
        let finish = |b: rustls::ConfigBuilder<ServerConfig, rustls::server::WantsServerCert>| {
            let mut c = b
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(|e| {
                    invalid(
                        "tls-key-file",
                        &files.key,
                        format!("does not fit tls-cert-file: {e}"),
                    )
                })?;
            c.alpn_protocols = vec![ALPN_H2.to_vec()];
            Ok::<_, TlsError>(Arc::new(c))
        };
        let client_port = finish(builder()?.with_no_client_auth())?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| invalid("tls-ca-file", &files.ca, e.to_string()))?;
        // The node's certificate is also its client identity towards peers: it must chain to
        // the CA bundle (a rotated certificate of a CA not yet in the bundle is refused).
        verifier
            .verify_client_cert(&chain[0], &chain[1..], UnixTime::now())
            .map_err(|e| {
                invalid(
                    "tls-ca-file",
                    &files.ca,
                    format!(
                        "does not verify tls-cert-file {} as a client certificate: {e}",
                        files.cert.display()
                    ),
                )
            })?;
        let peer_port = finish(builder()?.with_client_cert_verifier(verifier))?;
        Ok(Self {
            client_port,
            peer_port,
            cert_pem,
            key_pem,
            ca_pem,
            leaf,
        })
    }
}
