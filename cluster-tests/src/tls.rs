//! [`TestTls`]: a cluster CA and node certificates in a test's temp dir, so a harness runs its
//! nodes with TLS (mutual TLS on the peer port) and its clients trust the CA; plus the odd
//! certificates the refusal tests present (another CA's, a non-member's) and certificate
//! rotation ([`TestTls::rotate_node`]).

use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use raftmq_cli::certs;
use raftmq_cli::certs::ClusterCa;
use raftmq_cli::certs::NodeCert;
use raftmq_client::ClientTls;
use raftmq_node::config::NodeConfig;
use tonic::transport::Certificate;
use tonic::transport::Channel;
use tonic::transport::ClientTlsConfig;
use tonic::transport::Endpoint;
use tonic::transport::Identity;

/// The TLS files of one test cluster.
pub struct TestTls {
    /// The cluster dir the files live under (`<dir>/tls/`).
    pub dir: PathBuf,
    /// The cluster CA.
    pub ca: ClusterCa,
    /// The CA certificate file every node and client trusts.
    pub ca_file: PathBuf,
    /// The cluster id the node certificates name.
    pub cluster_id: String,
}

impl TestTls {
    /// A new CA for `cluster_id`, written under `dir/tls/`.
    pub fn new(dir: &Path, cluster_id: &str) -> anyhow::Result<Self> {
        let ca = ClusterCa::generate(cluster_id)?;
        let ca_file = certs::write_ca(dir, &ca)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            ca,
            ca_file,
            cluster_id: cluster_id.to_string(),
        })
    }

    /// Issues `cfg`'s node a certificate (for its listen hosts) and sets its TLS files.
    pub fn configure(&self, cfg: &mut NodeConfig) -> anyhow::Result<()> {
        let hosts = [
            cfg.raft_listen_addr.ip().to_string(),
            cfg.client_listen_addr.ip().to_string(),
        ];
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let p = certs::write_node_cert(&self.dir, &self.ca, cfg.node_id, &hosts)?;
        cfg.tls.tls_cert_file = Some(p.cert);
        cfg.tls.tls_key_file = Some(p.key);
        cfg.tls.tls_ca_file = Some(p.ca);
        // Rotation tests wait for the reload: poll often.
        cfg.tls.tls_reload_interval_ms = 200;
        Ok(())
    }

    /// Replaces node `id`'s certificate and key on disk by a new pair from `ca` (the running
    /// node picks it up on its next poll or SIGHUP); the key is renamed into place first, so
    /// the node may briefly see a mismatched pair (it must keep its old one then). Returns
    /// the new certificate's fields.
    pub fn rotate_node(
        &self,
        ca: &ClusterCa,
        id: u64,
    ) -> anyhow::Result<raftmq_node::tls::x509::CertFields> {
        let nc = ca.issue_node(id, &["127.0.0.1"])?;
        let tls = self.dir.join(certs::TLS_DIR);
        let (cert, key) = (
            tls.join(format!("node-{id}.crt")),
            tls.join(format!("node-{id}.key")),
        );
        let (cert_tmp, key_tmp) = (
            tls.join(format!("node-{id}.crt.new")),
            tls.join(format!("node-{id}.key.new")),
        );
        certs::write_private(&key_tmp, &nc.key_pem)?;
        std::fs::write(&cert_tmp, &nc.cert_pem)?;
        std::fs::rename(&key_tmp, &key).context("rename key")?;
        std::fs::rename(&cert_tmp, &cert).context("rename cert")?;
        cert_fields(&nc.cert_pem)
    }

    /// Writes `pems` (concatenated) as the CA bundle every node trusts (old + new CA while
    /// rotating the CA).
    pub fn write_ca_bundle(&self, pems: &[String]) -> anyhow::Result<()> {
        let tmp = self.ca_file.with_extension("new");
        std::fs::write(&tmp, pems.concat())?;
        std::fs::rename(&tmp, &self.ca_file)?;
        Ok(())
    }

    /// What a `raftmq_client` needs to trust the nodes.
    pub fn client_tls(&self) -> ClientTls {
        ClientTls::from_ca_file(&self.ca_file).expect("the test CA file is readable PEM")
    }

    /// A TLS channel to `addr` trusting this CA, presenting `identity` if given.
    pub fn channel(&self, addr: &str, identity: Option<&NodeCert>) -> anyhow::Result<Channel> {
        let ca = std::fs::read(&self.ca_file)?;
        tls_channel(addr, &ca, identity)
    }

    /// A raw `RaftMq` client of `addr` over TLS, signing with `credentials` if given.
    pub fn grpc(
        &self,
        addr: &str,
        credentials: Option<raftmq_client::Credentials>,
    ) -> anyhow::Result<crate::raw::GrpcClient> {
        Ok(crate::raw::grpc_client(
            self.channel(addr, None)?,
            credentials,
        ))
    }
}

/// A lazily connecting TLS channel to `addr` (host:port) trusting `ca_pem`.
pub fn tls_channel(
    addr: &str,
    ca_pem: &[u8],
    identity: Option<&NodeCert>,
) -> anyhow::Result<Channel> {
    let host = raftmq_node::tls::host_of(addr).to_string();
    let mut cfg = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name(host);
    if let Some(id) = identity {
        cfg = cfg.identity(Identity::from_pem(&id.cert_pem, &id.key_pem));
    }
    Ok(Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(cfg)?
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect_lazy())
}

/// The serial, not-after date and names of a PEM certificate.
pub fn cert_fields(pem: &str) -> anyhow::Result<raftmq_node::tls::x509::CertFields> {
    use raftmq_node::tls::pki::pem::PemObject;
    let der = raftmq_node::tls::pki::CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("not a PEM certificate: {e}"))?;
    Ok(raftmq_node::tls::x509::parse(&der)?)
}
