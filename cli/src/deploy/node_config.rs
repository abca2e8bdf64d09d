//! [`NodeToml`]: the `node.toml` that `raftmq cluster up` writes for each node. Its keys are the
//! kebab-case keys of `raftmq-node`'s `NodeConfig` (see `node/src/config.rs`); keys left out
//! take the node's defaults.

use std::path::PathBuf;

use serde::Serialize;

/// Largest batch the node accepts by default (16 MiB); smaller segments lower it.
const DEFAULT_MAX_BATCH_BYTES: u64 = 16 << 20;
/// Largest message the node accepts by default (4 MiB).
const DEFAULT_MAX_MESSAGE_BYTES: u64 = 4 << 20;

/// One node's config file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeToml {
    /// Node id.
    pub node_id: u64,
    /// Cluster id, equal on all members.
    pub cluster_id: String,
    /// Data directory (`<node_dir>/data`).
    pub data_dir: PathBuf,
    /// Raft listen address.
    pub raft_listen_addr: String,
    /// Client listen address.
    pub client_listen_addr: String,
    /// Metrics address.
    pub metrics_addr: String,
    /// Bootstrap members (`id=raft/client`); empty for a node that joins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub initial_members: Vec<String>,
    /// Client address of a member to join through (add-node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join_addr: Option<String>,
    /// `sync` or `async`.
    pub flush_policy: String,
    /// CommitLog segment size, bytes.
    pub segment_bytes: u64,
    /// Largest batch, bytes (at most half a segment).
    pub max_batch_bytes: u64,
    /// Largest message, bytes (at most one batch).
    pub max_message_bytes: u64,
}

/// Where one node listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddrs {
    /// Node id.
    pub id: u64,
    /// Raft address.
    pub raft: String,
    /// Client address.
    pub client: String,
    /// Metrics address.
    pub metrics: String,
}

impl NodeAddrs {
    /// The `initial-members` entry of this node.
    pub fn member_spec(&self) -> String {
        format!("{}={}/{}", self.id, self.raft, self.client)
    }
}

impl NodeToml {
    /// The config of `me` in a cluster bootstrapped by `members` (or joining through `join`).
    pub fn new(
        cluster_id: &str,
        me: &NodeAddrs,
        members: &[NodeAddrs],
        join: Option<String>,
        node_dir: PathBuf,
        flush_policy: &str,
        segment_bytes: u64,
    ) -> Self {
        let max_batch_bytes = DEFAULT_MAX_BATCH_BYTES.min(segment_bytes / 2);
        Self {
            node_id: me.id,
            cluster_id: cluster_id.to_string(),
            data_dir: node_dir.join("data"),
            raft_listen_addr: me.raft.clone(),
            client_listen_addr: me.client.clone(),
            metrics_addr: me.metrics.clone(),
            initial_members: if join.is_some() {
                Vec::new()
            } else {
                members.iter().map(NodeAddrs::member_spec).collect()
            },
            join_addr: join,
            flush_policy: flush_policy.to_string(),
            segment_bytes,
            max_batch_bytes,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES.min(max_batch_bytes),
        }
    }

    /// The TOML text.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string(self)?)
    }
}

/// Addresses of node `id` under the base-port scheme (Raft base+id, client base+100+id,
/// metrics base+200+id).
pub fn addrs_from_base(base: u16, id: u64) -> anyhow::Result<NodeAddrs> {
    let port = |offset: u64| -> anyhow::Result<u16> {
        u16::try_from(u64::from(base) + offset + id)
            .map_err(|_| anyhow::anyhow!("--base-port {base} leaves no port for node {id}"))
    };
    Ok(NodeAddrs {
        id,
        raft: format!("127.0.0.1:{}", port(0)?),
        client: format!("127.0.0.1:{}", port(100)?),
        metrics: format!("127.0.0.1:{}", port(200)?),
    })
}

/// Three free ports on 127.0.0.1 for node `id`, picked outside the kernel's ephemeral range
/// and never twice in one process (see [`crate::ports`]).
pub fn free_addrs(id: u64) -> anyhow::Result<NodeAddrs> {
    let ports = crate::ports::free_ports(3)?;
    Ok(NodeAddrs {
        id,
        raft: format!("127.0.0.1:{}", ports[0]),
        client: format!("127.0.0.1:{}", ports[1]),
        metrics: format!("127.0.0.1:{}", ports[2]),
    })
}

/// Parses `--flush`: one policy for all, or a comma-separated list with one per node.
pub fn flush_policies(spec: &str, nodes: usize) -> anyhow::Result<Vec<String>> {
    let parts: Vec<String> = spec.split(',').map(|s| s.trim().to_lowercase()).collect();
    for p in &parts {
        anyhow::ensure!(
            p == "sync" || p == "async",
            "--flush: {p:?} is not sync or async"
        );
    }
    match parts.len() {
        1 => Ok(vec![parts[0].clone(); nodes]),
        n if n == nodes => Ok(parts),
        n => anyhow::bail!("--flush lists {n} policies for {nodes} nodes; give 1 or {nodes}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_node_configs() {
        let members: Vec<NodeAddrs> = (1..=3).map(|i| addrs_from_base(9100, i).unwrap()).collect();
        let cfg = NodeToml::new(
            "raftmq",
            &members[1],
            &members,
            None,
            PathBuf::from("/d/node-2"),
            "async",
            1 << 20,
        );
        let text = cfg.to_toml().unwrap();
        assert!(text.contains("node-id = 2"), "{text}");
        assert!(
            text.contains("raft-listen-addr = \"127.0.0.1:9102\""),
            "{text}"
        );
        assert!(
            text.contains("client-listen-addr = \"127.0.0.1:9202\""),
            "{text}"
        );
        assert!(text.contains("metrics-addr = \"127.0.0.1:9302\""), "{text}");
        assert!(text.contains("data-dir = \"/d/node-2/data\""), "{text}");
        assert!(text.contains("flush-policy = \"async\""), "{text}");
        assert!(
            text.contains("\"3=127.0.0.1:9103/127.0.0.1:9203\""),
            "{text}"
        );
        assert!(!text.contains("join-addr"), "{text}");
        // Small segments lower the batch and message limits so the node accepts them.
        assert_eq!(cfg.max_batch_bytes, 512 << 10);
        assert_eq!(cfg.max_message_bytes, 512 << 10);
        assert!(cfg.segment_bytes >= 2 * cfg.max_batch_bytes);
    }

    #[test]
    fn joining_node_has_no_initial_members() {
        let a = addrs_from_base(9100, 4).unwrap();
        let cfg = NodeToml::new(
            "c",
            &a,
            &[],
            Some("127.0.0.1:9201".into()),
            PathBuf::from("n4"),
            "sync",
            1 << 30,
        );
        let text = cfg.to_toml().unwrap();
        assert!(!text.contains("initial-members"), "{text}");
        assert!(text.contains("join-addr = \"127.0.0.1:9201\""), "{text}");
        assert_eq!(cfg.max_batch_bytes, 16 << 20);
    }

    #[test]
    fn flush_specs() {
        assert_eq!(flush_policies("sync", 3).unwrap(), vec!["sync"; 3]);
        assert_eq!(
            flush_policies("sync,async,async", 3).unwrap(),
            vec!["sync", "async", "async"]
        );
        assert!(flush_policies("sync,async", 3).is_err());
        assert!(flush_policies("fast", 1).is_err());
        assert!(addrs_from_base(65500, 1).is_err());
        let f = free_addrs(1).unwrap();
        assert_ne!(f.raft, f.client);
    }
}
