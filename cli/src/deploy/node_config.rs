//! [`NodeToml`]: the `node.toml` that `raftmq cluster up` writes for each node: a
//! `raftmq-node` [`NodeConfig`] (the node's own type, defaults and key names) of which only
//! the keys this module sets are written; the node gives every other key its default.

use std::path::PathBuf;

use anyhow::Context;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::MemberSpec;
use raftmq_node::config::NodeConfig;

/// The keys [`NodeToml::new`] sets (`initial-members` only for a bootstrapping node,
/// `join-addr` only for a joining one).
const KEYS: [&str; 12] = [
    "node-id",
    "cluster-id",
    "data-dir",
    "raft-listen-addr",
    "client-listen-addr",
    "metrics-addr",
    "initial-members",
    "join-addr",
    "flush-policy",
    "segment-bytes",
    "max-batch-bytes",
    "max-message-bytes",
];

/// One node's config file.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeToml {
    config: NodeConfig,
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
    /// The config of `me` in a cluster bootstrapped by `members` (or joining through `join`):
    /// the node's defaults with these addresses, `flush_policy` (`sync` | `async`) and
    /// `segment_bytes`; the batch and message limits are lowered to fit small segments
    /// (a batch at most half a segment, a message at most one batch).
    pub fn new(
        cluster_id: &str,
        me: &NodeAddrs,
        members: &[NodeAddrs],
        join: Option<String>,
        node_dir: PathBuf,
        flush_policy: &str,
        segment_bytes: u64,
    ) -> anyhow::Result<Self> {
        let addr = |a: &str| a.parse().with_context(|| format!("{a:?} is not ip:port"));
        let mut c = NodeConfig {
            node_id: me.id,
            cluster_id: cluster_id.to_string(),
            data_dir: node_dir.join("data"),
            raft_listen_addr: addr(&me.raft)?,
            client_listen_addr: addr(&me.client)?,
            metrics_addr: Some(addr(&me.metrics)?),
            ..NodeConfig::default()
        };
        if join.is_none() {
            c.initial_members = members
                .iter()
                .map(|m| m.member_spec().parse::<MemberSpec>())
                .collect::<Result<_, _>>()
                .map_err(anyhow::Error::msg)?;
        }
        c.join_addr = join;
        c.log.flush = flush_policy
            .parse::<FlushPolicy>()
            .map_err(anyhow::Error::msg)?;
        c.log.segment_bytes = segment_bytes;
        let limits = &mut c.store.limits;
        let half_segment = u32::try_from(segment_bytes / 2).unwrap_or(u32::MAX);
        limits.max_batch_bytes = limits.max_batch_bytes.min(half_segment);
        limits.max_message_bytes = limits.max_message_bytes.min(limits.max_batch_bytes);
        Ok(Self { config: c })
    }

    /// The TOML text: the keys set here (an empty initial-members is left out).
    pub fn to_toml(&self) -> anyhow::Result<String> {
        let keys: Vec<&str> = KEYS
            .into_iter()
            .filter(|k| *k != "initial-members" || !self.config.initial_members.is_empty())
            .collect();
        Ok(self.config.to_toml_keys(&keys))
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
        p.parse::<FlushPolicy>()
            .map_err(|e| anyhow::anyhow!("--flush: {e}"))?;
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
        )
        .unwrap();
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
        let c = &cfg.config;
        assert_eq!(c.store.limits.max_batch_bytes, 512 << 10);
        assert_eq!(c.store.limits.max_message_bytes, 512 << 10);
        assert!(c.log.segment_bytes >= 2 * u64::from(c.store.limits.max_batch_bytes));
        // What raftmq-node reads back is this config, and valid.
        let back = NodeConfig::from_toml_str(&text, std::path::Path::new("node.toml")).unwrap();
        assert_eq!(&back, c);
        back.validate().unwrap();
        assert!(
            !text.contains("log-level"),
            "defaults are left to the node: {text}"
        );
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
        )
        .unwrap();
        let text = cfg.to_toml().unwrap();
        assert!(!text.contains("initial-members"), "{text}");
        assert!(text.contains("join-addr = \"127.0.0.1:9201\""), "{text}");
        assert_eq!(cfg.config.store.limits.max_batch_bytes, 16 << 20);
        let back = NodeConfig::from_toml_str(&text, std::path::Path::new("node.toml")).unwrap();
        assert_eq!(&back, &cfg.config);
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
