//! [`NodeToml`]: the `node.toml` that `raftmq cluster up` writes for each node: a
//! `raftmq-node` [`NodeConfig`] (the node's own type, defaults and key names) of which only
//! the keys this module sets, and the operator's `--set KEY=VALUE` ones ([`NodeSetting`]), are
//! written; the node gives every other key its default.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::Context;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::MemberSpec;
use raftmq_node::config::NodeConfig;

/// The keys [`NodeToml::new`] sets (`initial-members` only for a bootstrapping node,
/// `join-addr` only for a joining one).
const KEYS: [&str; 13] = [
    "node-id",
    "cluster-id",
    "data-dir",
    "raft-listen-addr",
    "client-listen-addr",
    "metrics-addr",
    "rocketmq-listen-addr",
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
    /// Keys of the `--set` settings, written after [`KEYS`].
    extra_keys: Vec<String>,
}

/// One `--set KEY=VALUE` of `raftmq cluster up`: any `raftmq-node` config key except the ones
/// `cluster up` sets itself, with a TOML value (`1.0`, `true`, `"x"`; a bare word is taken as
/// a string). Applied to every node, and kept in `cluster.toml` for nodes added later.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSetting {
    /// The config key (a `raftmq-node` long flag).
    pub key: String,
    /// Its value.
    pub value: toml::Value,
    /// `KEY=VALUE` as given.
    pub text: String,
}

impl FromStr for NodeSetting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (key, raw) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
        let (key, raw) = (key.trim(), raw.trim());
        if KEYS.contains(&key) {
            return Err(format!(
                "`{key}` is set by `cluster up` itself (see its --flush, --segment-bytes and \
                 --cluster-id options)"
            ));
        }
        let keys = raftmq_node::config::file_keys();
        if !keys.iter().any(|k| k == key) {
            return Err(format!(
                "unknown node setting `{key}`; the keys are: {}",
                keys.join(", ")
            ));
        }
        let value = format!("v = {raw}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        Ok(NodeSetting {
            key: key.to_string(),
            value,
            text: s.to_string(),
        })
    }
}

/// What every node of one local cluster shares.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSpec {
    /// The cluster id.
    pub cluster_id: String,
    /// CommitLog segment size.
    pub segment_bytes: u64,
    /// The `--set` settings.
    pub settings: Vec<NodeSetting>,
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
    /// RocketMQ 5 protocol address.
    pub rocketmq: String,
}

impl NodeAddrs {
    /// The `initial-members` entry of this node.
    pub fn member_spec(&self) -> String {
        format!("{}={}/{}", self.id, self.raft, self.client)
    }
}

impl NodeToml {
    /// The config of `me` in a cluster bootstrapped by `members` (or joining through `join`):
    /// the node's defaults with these addresses, `flush_policy` (`sync` | `async`) and the
    /// cluster's segment size; the batch and message limits are lowered to fit small segments
    /// (a batch at most half a segment, a message at most one batch); then the cluster's
    /// `--set` settings, the whole checked as `raftmq-node` checks its config.
    pub fn new(
        cluster: &ClusterSpec,
        me: &NodeAddrs,
        members: &[NodeAddrs],
        join: Option<String>,
        node_dir: PathBuf,
        flush_policy: &str,
    ) -> anyhow::Result<Self> {
        let segment_bytes = cluster.segment_bytes;
        let addr = |a: &str| a.parse().with_context(|| format!("{a:?} is not ip:port"));
        let mut c = NodeConfig {
            node_id: me.id,
            cluster_id: cluster.cluster_id.clone(),
            data_dir: node_dir.join("data"),
            raft_listen_addr: addr(&me.raft)?,
            client_listen_addr: addr(&me.client)?,
            metrics_addr: Some(addr(&me.metrics)?),
            rocketmq_listen_addr: Some(addr(&me.rocketmq)?),
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
        let mut extra_keys = Vec::new();
        if !cluster.settings.is_empty() {
            let mut table = toml::Table::try_from(&c).context("a node config as TOML")?;
            for s in &cluster.settings {
                table.insert(s.key.clone(), s.value.clone());
                extra_keys.push(s.key.clone());
            }
            c = toml::Value::Table(table)
                .try_into()
                .map_err(|e| anyhow::anyhow!("--set {}: {e}", cluster.settings_text()))?;
        }
        c.validate()
            .map_err(|e| anyhow::anyhow!("node {} config: {e}", me.id))?;
        Ok(Self {
            config: c,
            extra_keys,
        })
    }

    /// The TOML text: the keys set here (an empty initial-members is left out).
    pub fn to_toml(&self) -> anyhow::Result<String> {
        let keys: Vec<&str> = KEYS
            .into_iter()
            .filter(|k| *k != "initial-members" || !self.config.initial_members.is_empty())
            .chain(self.extra_keys.iter().map(String::as_str))
            .collect();
        Ok(self.config.to_toml_keys(&keys))
    }
}

impl ClusterSpec {
    /// The settings as given, space-separated (for messages).
    fn settings_text(&self) -> String {
        let texts: Vec<&str> = self.settings.iter().map(|s| s.text.as_str()).collect();
        texts.join(" ")
    }
}

/// Addresses of node `id` under the base-port scheme (Raft base+id, client base+100+id,
/// metrics base+200+id, RocketMQ base+300+id).
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
        rocketmq: format!("127.0.0.1:{}", port(300)?),
    })
}

/// Four free ports on 127.0.0.1 for node `id`, picked outside the kernel's ephemeral range
/// and never twice in one process (see [`crate::ports`]).
pub fn free_addrs(id: u64) -> anyhow::Result<NodeAddrs> {
    let ports = crate::ports::free_ports(4)?;
    Ok(NodeAddrs {
        id,
        raft: format!("127.0.0.1:{}", ports[0]),
        client: format!("127.0.0.1:{}", ports[1]),
        metrics: format!("127.0.0.1:{}", ports[2]),
        rocketmq: format!("127.0.0.1:{}", ports[3]),
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

    fn spec(cluster_id: &str, segment_bytes: u64, settings: &[&str]) -> ClusterSpec {
        ClusterSpec {
            cluster_id: cluster_id.into(),
            segment_bytes,
            settings: settings.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn settings_are_written_typed_and_checked() {
        let a = addrs_from_base(9100, 1).unwrap();
        let new = |settings: &[&str]| {
            NodeToml::new(
                &spec("c", 1 << 30, settings),
                &a,
                std::slice::from_ref(&a),
                None,
                PathBuf::from("n1"),
                "sync",
            )
        };
        let cfg = new(&[
            "disk-reject-ratio=1.0",
            "disk-clean-ratio = 1",
            "log-level=debug",
        ])
        .unwrap();
        let text = cfg.to_toml().unwrap();
        assert!(text.contains("disk-reject-ratio = 1.0"), "{text}");
        assert!(text.contains("log-level = \"debug\""), "{text}");
        let back = NodeConfig::from_toml_str(&text, std::path::Path::new("node.toml")).unwrap();
        assert_eq!(back.store.disk_clean_ratio, 1.0);
        assert_eq!(back, cfg.config);

        let err = |s: &str| s.parse::<NodeSetting>().unwrap_err();
        assert!(err("disk-reject-ratio").contains("KEY=VALUE"));
        assert!(err("no-such-key=1").contains("unknown node setting `no-such-key`"));
        assert!(err("node-id=4").contains("set by `cluster up` itself"));
        let e = new(&["disk-reject-ratio=fast"]).unwrap_err().to_string();
        assert!(e.contains("disk-reject-ratio=fast"), "{e}");
        let e = new(&["disk-reject-ratio=0.5"]).unwrap_err().to_string();
        assert!(e.contains("disk-reject-ratio"), "{e}");
    }

    #[test]
    fn three_node_configs() {
        let members: Vec<NodeAddrs> = (1..=3).map(|i| addrs_from_base(9100, i).unwrap()).collect();
        let cfg = NodeToml::new(
            &spec("raftmq", 1 << 20, &[]),
            &members[1],
            &members,
            None,
            PathBuf::from("/d/node-2"),
            "async",
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
        assert!(
            text.contains("rocketmq-listen-addr = \"127.0.0.1:9402\""),
            "{text}"
        );
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
            &spec("c", 1 << 30, &[]),
            &a,
            &[],
            Some("127.0.0.1:9201".into()),
            PathBuf::from("n4"),
            "sync",
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
