//! Who may talk to the peer port: a client certificate (already chained to the cluster CA by
//! rustls) whose URI SAN `raftmq://<cluster-id>/node/<id>` names this cluster and a current
//! voter or learner. Checked after the handshake, before any byte reaches tonic or openraft.

use openraft::async_runtime::WatchReceiver;
use raftmq_raft_log::types::NodeId;
use raftmq_store::Raft;
use tokio_rustls::rustls::pki_types::CertificateDer;

use super::x509;

/// The URI SAN that names node `id` of cluster `cluster_id` in its certificate.
pub fn member_uri(cluster_id: &str, id: NodeId) -> String {
    format!("raftmq://{cluster_id}/node/{id}")
}

/// The (cluster id, node id) a member URI names, if it is one.
pub fn parse_member_uri(uri: &str) -> Option<(&str, NodeId)> {
    let rest = uri.strip_prefix("raftmq://")?;
    let (cluster, id) = rest.split_once("/node/")?;
    Some((cluster, id.parse().ok()?))
}

/// Decides whether a peer's certificate may use the peer port.
pub trait Admit: Send + Sync {
    /// The node id the certificate names, or why it is refused.
    fn admit(&self, leaf: &CertificateDer<'_>) -> Result<NodeId, String>;
}

/// The node's own rule: this cluster id, a member of the current membership (any node id of
/// this cluster while the node is not yet initialized, so a leader can add it as a learner).
pub struct MemberAdmission {
    /// This node's cluster id.
    pub cluster_id: String,
    /// Where the membership comes from.
    pub raft: Raft,
}

/// The node id `leaf` names for `cluster_id`, or why not.
pub fn named_member(cluster_id: &str, leaf: &CertificateDer<'_>) -> Result<NodeId, String> {
    let fields = x509::parse(leaf).map_err(|e| e.to_string())?;
    let mut others = Vec::new();
    for uri in &fields.uris {
        match parse_member_uri(uri) {
            Some((c, id)) if c == cluster_id => return Ok(id),
            Some(_) => others.push(uri.as_str()),
            None => {}
        }
    }
    if others.is_empty() {
        Err(format!(
            "certificate (serial {}) names no raftmq node (URI SAN raftmq://{cluster_id}/node/<id>)",
            fields.serial_hex
        ))
    } else {
        Err(format!(
            "certificate (serial {}) names another cluster: {others:?}",
            fields.serial_hex
        ))
    }
}

impl Admit for MemberAdmission {
    fn admit(&self, leaf: &CertificateDer<'_>) -> Result<NodeId, String> {
        let id = named_member(&self.cluster_id, leaf)?;
        let rx = self.raft.metrics();
        let m = rx.borrow_watched();
        let membership = m.membership_config.membership();
        let mut nodes = membership.nodes().peekable();
        if nodes.peek().is_none() {
            return Ok(id);
        }
        if nodes.any(|(n, _)| *n == id) {
            Ok(id)
        } else {
            Err(format!(
                "node {id} is not a voter or learner of this cluster"
            ))
        }
    }
}
