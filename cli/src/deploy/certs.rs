//! Certificates of a secure local cluster (`raftmq cluster up --secure`, `cluster add`): the
//! cluster CA ([`ClusterCa`], its key kept in the cluster dir for nodes added later) and one
//! certificate + key per node ([`NodeCert`]) with the SANs the node's TLS needs: the URI
//! `raftmq://<cluster-id>/node/<id>` (checked by peers), the hosts it is dialed at (IP or
//! DNS), `localhost` and 127.0.0.1. ECDSA P-256 keys (rcgen, ring); keys are written 0600.

use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use anyhow::Context;
use rcgen::BasicConstraints;
use rcgen::CertificateParams;
use rcgen::DnType;
use rcgen::ExtendedKeyUsagePurpose;
use rcgen::IsCa;
use rcgen::KeyPair;
use rcgen::KeyUsagePurpose;
use rcgen::SanType;
use rcgen::SerialNumber;

/// The sub-directory of a cluster dir that holds the TLS files.
pub const TLS_DIR: &str = "tls";
/// The CA certificate's file name (what clients trust).
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA key's file name (0600; issues certificates of nodes added later).
pub const CA_KEY_FILE: &str = "ca.key";

/// A cluster's certificate authority.
pub struct ClusterCa {
    cluster_id: String,
    key: KeyPair,
    cert: rcgen::Certificate,
}

/// A node's certificate and private key, PEM.
#[derive(Clone, Debug)]
pub struct NodeCert {
    /// The certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
}

/// Where a node's TLS files were written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTlsPaths {
    /// The node certificate.
    pub cert: PathBuf,
    /// Its key (0600).
    pub key: PathBuf,
    /// The cluster CA certificate.
    pub ca: PathBuf,
}

/// Node certificates are valid until January 1st this many years ahead.
const NODE_YEARS: i32 = 2;
/// The CA certificate is valid until January 1st this many years ahead.
const CA_YEARS: i32 = 10;

/// The current year (UTC; within a day of the truth, enough for validity ending on Jan 1st).
fn this_year() -> i32 {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    1970 + i32::try_from(secs / 31_556_952).unwrap_or(0)
}

/// A fresh positive serial number (time, process and a counter: unique per issuer).
fn serial() -> SerialNumber {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut bytes = vec![0x01];
    bytes.extend_from_slice(&nanos.to_be_bytes());
    bytes.extend_from_slice(&std::process::id().to_be_bytes());
    bytes.extend_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    SerialNumber::from(bytes)
}

fn ca_params(cluster_id: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(
        DnType::CommonName,
        format!("raftmq cluster CA {cluster_id}"),
    );
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = rcgen::date_time_ymd(this_year() - 1, 1, 1);
    p.not_after = rcgen::date_time_ymd(this_year() + CA_YEARS, 1, 1);
    p
}

impl ClusterCa {
    /// A new CA for cluster `cluster_id`.
    pub fn generate(cluster_id: &str) -> anyhow::Result<Self> {
        let key = KeyPair::generate().context("cannot generate the CA key")?;
        Self::with_key(cluster_id, key)
    }

    /// The CA of `cluster_id` whose key is `key_pem` (as written by [`write_ca`]). Its
    /// certificate is signed again with the same name and key, so what it issues chains to
    /// the `ca.crt` written at first.
    pub fn from_key_pem(cluster_id: &str, key_pem: &str) -> anyhow::Result<Self> {
        let key = KeyPair::from_pem(key_pem).context("the CA key is not a PEM private key")?;
        Self::with_key(cluster_id, key)
    }

    fn with_key(cluster_id: &str, key: KeyPair) -> anyhow::Result<Self> {
        let mut p = ca_params(cluster_id);
        p.serial_number = Some(serial());
        let cert = p
            .self_signed(&key)
            .context("cannot sign the CA certificate")?;
        Ok(Self {
            cluster_id: cluster_id.to_string(),
            key,
            cert,
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA key, PEM.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A certificate for node `id` of this CA's cluster, dialed at `hosts` (IP addresses or
    /// DNS names; `localhost` and 127.0.0.1 are always added).
    pub fn issue_node(&self, id: u64, hosts: &[&str]) -> anyhow::Result<NodeCert> {
        self.issue(&raftmq_node::tls::member_uri(&self.cluster_id, id), hosts)
    }

    /// A certificate naming `uri` (URI SAN) and `hosts` (see [`Self::issue_node`]).
    pub fn issue(&self, uri: &str, hosts: &[&str]) -> anyhow::Result<NodeCert> {
        let key = KeyPair::generate().context("cannot generate a node key")?;
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, uri);
        p.serial_number = Some(serial());
        p.not_before = rcgen::date_time_ymd(this_year() - 1, 1, 1);
        p.not_after = rcgen::date_time_ymd(this_year() + NODE_YEARS, 1, 1);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let uri = rcgen::Ia5String::try_from(uri.to_string())
            .with_context(|| format!("{uri:?} is not an ASCII URI"))?;
        p.subject_alt_names.push(SanType::URI(uri));
        let mut names: Vec<&str> = vec!["localhost", "127.0.0.1"];
        names.extend(hosts.iter().copied().filter(|h| !h.is_empty()));
        names.sort_unstable();
        names.dedup();
        for h in names {
            let san = match h.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(
                    rcgen::Ia5String::try_from(h.to_string())
                        .with_context(|| format!("{h:?} is not a DNS name"))?,
                ),
            };
            p.subject_alt_names.push(san);
        }
        let cert = p
            .signed_by(&key, &self.cert, &self.key)
            .context("cannot sign a node certificate")?;
        Ok(NodeCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `contents` to `path`, readable only by its owner.
pub fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // An existing file keeps its mode on open: set it.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot chmod {}", path.display()))?;
    f.write_all(contents.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `<cluster dir>/tls`, created.
fn tls_dir(cluster_dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = cluster_dir.join(TLS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Writes the CA certificate and key into `<cluster dir>/tls/`; returns the certificate's path.
pub fn write_ca(cluster_dir: &Path, ca: &ClusterCa) -> anyhow::Result<PathBuf> {
    let dir = tls_dir(cluster_dir)?;
    write_private(&dir.join(CA_KEY_FILE), &ca.key_pem())?;
    let cert = dir.join(CA_CERT_FILE);
    std::fs::write(&cert, ca.cert_pem())
        .with_context(|| format!("cannot write {}", cert.display()))?;
    Ok(cert)
}

/// The CA written into `cluster_dir` by [`write_ca`].
pub fn load_ca(cluster_dir: &Path, cluster_id: &str) -> anyhow::Result<ClusterCa> {
    let path = cluster_dir.join(TLS_DIR).join(CA_KEY_FILE);
    let pem = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the cluster CA key {}", path.display()))?;
    ClusterCa::from_key_pem(cluster_id, &pem).with_context(|| format!("in {}", path.display()))
}

/// Issues node `id`'s certificate for `hosts` and writes it into `<cluster dir>/tls/`.
pub fn write_node_cert(
    cluster_dir: &Path,
    ca: &ClusterCa,
    id: u64,
    hosts: &[&str],
) -> anyhow::Result<NodeTlsPaths> {
    let dir = tls_dir(cluster_dir)?;
    let nc = ca.issue_node(id, hosts)?;
    let paths = NodeTlsPaths {
        cert: dir.join(format!("node-{id}.crt")),
        key: dir.join(format!("node-{id}.key")),
        ca: dir.join(CA_CERT_FILE),
    };
    write_private(&paths.key, &nc.key_pem)?;
    std::fs::write(&paths.cert, &nc.cert_pem)
        .with_context(|| format!("cannot write {}", paths.cert.display()))?;
    Ok(paths)
}

/// Issues node `id`'s certificate (for the hosts of `addrs`, host:port) and returns the TOML
/// lines of its TLS settings, to append to its `node.toml`.
pub fn node_tls_settings(
    cluster_dir: &Path,
    ca: &ClusterCa,
    id: u64,
    addrs: &[&str],
) -> anyhow::Result<String> {
    let hosts: Vec<&str> = addrs.iter().map(|a| raftmq_node::tls::host_of(a)).collect();
    let p = write_node_cert(cluster_dir, ca, id, &hosts)?;
    let line =
        |k: &str, v: &Path| format!("{k} = {}\n", toml::Value::String(v.display().to_string()));
    Ok([
        line("tls-cert-file", &p.cert),
        line("tls-key-file", &p.key),
        line("tls-ca-file", &p.ca),
    ]
    .concat())
}

#[cfg(test)]
#[path = "certs_tests.rs"]
mod tests;
