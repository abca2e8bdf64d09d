//! [`NodeConfig`]: everything one raftmq node is told at start.
//!
//! Sources, later wins: built-in defaults, a TOML file (`--config`, keys in kebab-case), then
//! command-line flags ([`NodeArgs`]; `raftmq-node --help` lists them). The result is checked by
//! [`NodeConfig::validate`], which names the offending field. The defaults run a single-node
//! cluster on 127.0.0.1 without any file.
//!
//! Cluster-wide settings (`cluster-id`, `segment-bytes`, the Raft timings) must be equal on
//! all members; `segment-bytes` in particular decides where every entry sits in the
//! CommitLog, so it must never change once a data dir exists.

mod args;
#[cfg(test)]
mod config_tests;
mod member;
mod raft;

use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

pub use args::NodeArgs;
pub use member::MemberSpec;

/// When the CommitLog is fsynced relative to acknowledging an append.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FlushPolicy {
    /// Acknowledge an append only after fsync (group commit).
    #[default]
    Sync,
    /// Acknowledge once the bytes are in the mapping; fsync every `flush-interval-ms`.
    Async,
}

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field has an invalid value.
    #[error("invalid config field `{field}`: {reason}")]
    Invalid {
        /// Kebab-case field name, as in the TOML file.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file is not valid TOML for [`NodeConfig`].
    #[error("cannot parse config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error (names the key and line).
        source: Box<toml::de::Error>,
    },
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// One node's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's id, unique in the cluster and stable across restarts.
    /// Default 1; range 1..=2^64-1.
    pub node_id: u64,
    /// Name of the cluster; peers with another id are refused. Must be equal on all members.
    /// Default "raftmq"; 1..=64 chars of [A-Za-z0-9._-].
    pub cluster_id: String,
    /// Directory of this node's CommitLog, ConsumeQueues, index and metadata.
    /// Default "./raftmq-data/node-1"; any non-empty path.
    pub data_dir: PathBuf,
    /// Address the peer (Raft) gRPC service listens on.
    /// Default 127.0.0.1:9101; any socket address (port 0 = pick a free port).
    pub raft_listen_addr: SocketAddr,
    /// host:port peers use to reach the Raft service. Default: raft-listen-addr (required when
    /// that is a wildcard address such as 0.0.0.0); a non-empty host:port.
    pub raft_advertised_addr: Option<String>,
    /// Address the client gRPC service listens on.
    /// Default 127.0.0.1:9201; any socket address (port 0 = pick a free port).
    pub client_listen_addr: SocketAddr,
    /// host:port clients and forwarding followers use to reach the client service. Default:
    /// client-listen-addr (required when that is a wildcard address); a non-empty host:port.
    pub client_advertised_addr: Option<String>,
    /// Address of the Prometheus `/metrics` HTTP endpoint; "" (empty) disables it.
    /// Default 127.0.0.1:9301; any socket address or "".
    #[serde(with = "optional_addr")]
    pub metrics_addr: Option<SocketAddr>,
    /// Members that bootstrap a new cluster, as "id=raft_host:port/client_host:port". Used only
    /// when the data dir is new; must include this node. Empty and no join-addr: a single-node
    /// cluster of this node. Default empty; ids unique.
    pub initial_members: Vec<MemberSpec>,
    /// Client address of any member of an existing cluster to join as a learner (excludes
    /// initial-members). Default unset; a non-empty host:port.
    pub join_addr: Option<String>,
    /// When appends are fsynced: `sync` (before the ack, group commit) or `async` (every
    /// flush-interval-ms). Per node. Default sync; sync | async.
    pub flush_policy: FlushPolicy,
    /// fsync period of the `async` flush policy, in ms. Default 500; range 1..=60000.
    pub flush_interval_ms: u64,
    /// Size of one CommitLog segment file, in bytes; cluster-wide and fixed for the data dir's
    /// life. Default 1073741824 (1 GiB); range 65536..=17179869184 and >= 2 x max-batch-bytes.
    pub segment_bytes: u64,
    /// Lower bound of the randomized election timeout, in ms.
    /// Default 600; range 50..=60000 and > heartbeat-ms.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout, in ms.
    /// Default 1200; range election-timeout-min-ms+1..=120000.
    pub election_timeout_max_ms: u64,
    /// Leader heartbeat interval, in ms. Default 150; range 10..=election-timeout-min-ms-1.
    pub heartbeat_ms: u64,
    /// How long a send waits for its quorum ack before failing DEADLINE_EXCEEDED, in ms.
    /// Default 3000; range 100..=600000.
    pub send_timeout_ms: u64,
    /// Largest message (body + properties + names), in bytes.
    /// Default 4194304 (4 MiB); range 1024..=67108864.
    pub max_message_bytes: u64,
    /// Most messages in one SendBatch. Default 1024; range 1..=65536.
    pub max_batch_messages: u32,
    /// Largest SendBatch (sum of its messages), in bytes.
    /// Default 16777216 (16 MiB); range max-message-bytes..=268435456.
    pub max_batch_bytes: u64,
    /// gRPC message size limit of both services (peer traffic carries whole batches), bytes.
    /// Default 67108864 (64 MiB); range max-batch-bytes + 1 MiB..=2147483647.
    pub grpc_max_message_bytes: u64,
    /// Create a topic on its first send (with default-queue-count queues); when off, sends to
    /// unknown topics fail NOT_FOUND. Default true.
    pub topic_auto_create: bool,
    /// Queue count of auto-created topics (RocketMQ's defaultTopicQueueNums).
    /// Default 4; range 1..=1024.
    pub default_queue_count: u32,
    /// Age after which a whole CommitLog segment is deleted, in hours.
    /// Default 72; range 1..=87600.
    pub file_reserved_hours: u32,
    /// Disk usage ratio above which old segments are deleted before their time.
    /// Default 0.75; range 0.1..=0.99 and < disk-reject-ratio.
    pub disk_clean_ratio: f64,
    /// Disk usage ratio above which sends fail with a "disk full" error.
    /// Default 0.90; range disk-clean-ratio..=0.99 (exclusive lower bound).
    pub disk_reject_ratio: f64,
    /// ConsumeQueue units (20 bytes each) per ConsumeQueue file.
    /// Default 300000; range 1..=50000000.
    pub cq_units_per_file: u64,
    /// Hash slots per IndexFile. Default 5000000; range 1..=100000000.
    pub index_slots_per_file: u64,
    /// Index units (20 bytes each) per IndexFile. Default 20000000; range 1..=100000000.
    pub index_units_per_file: u64,
    /// Log filter (tracing EnvFilter syntax); RUST_LOG overrides it.
    /// Default "info"; e.g. "debug" or "info,raftmq_node=debug".
    pub log_level: String,
    /// Operator repair: on start, truncate the CommitLog at the first corrupted record even if
    /// it was flushed, and catch up from the peers, instead of refusing to start. Use only on a
    /// node whose data a majority still holds. Default false.
    pub repair_truncate_corruption: bool,
    /// Operator override after a whole-cluster power loss with `async` flush: forget which
    /// committed entries this node lost, so it votes as plain Raft would. Without it, a node
    /// that lost committed entries votes only for a candidate that still holds them (so two
    /// such nodes cannot elect each other and overwrite what a third committed); if *no*
    /// member holds them, no leader can be elected until this is set. Those entries are then
    /// gone. Default false.
    pub accept_lost_commits: bool,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            node_id: 1,
            cluster_id: "raftmq".into(),
            data_dir: PathBuf::from("./raftmq-data/node-1"),
            raft_listen_addr: SocketAddr::from(([127, 0, 0, 1], 9101)),
            raft_advertised_addr: None,
            client_listen_addr: SocketAddr::from(([127, 0, 0, 1], 9201)),
            client_advertised_addr: None,
            metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 9301))),
            initial_members: Vec::new(),
            join_addr: None,
            flush_policy: FlushPolicy::Sync,
            flush_interval_ms: 500,
            segment_bytes: 1 << 30,
            election_timeout_min_ms: 600,
            election_timeout_max_ms: 1200,
            heartbeat_ms: 150,
            send_timeout_ms: 3000,
            max_message_bytes: 4 << 20,
            max_batch_messages: 1024,
            max_batch_bytes: 16 << 20,
            grpc_max_message_bytes: 64 << 20,
            topic_auto_create: true,
            default_queue_count: 4,
            file_reserved_hours: 72,
            disk_clean_ratio: 0.75,
            disk_reject_ratio: 0.90,
            cq_units_per_file: 300_000,
            index_slots_per_file: 5_000_000,
            index_units_per_file: 20_000_000,
            log_level: "info".into(),
            repair_truncate_corruption: false,
            accept_lost_commits: false,
        }
    }
}

/// `Option<SocketAddr>` as a TOML string, `""` meaning `None` (TOML has no null).
mod optional_addr {
    use std::net::SocketAddr;

    use serde::Deserialize;
    use serde::Deserializer;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.collect_str(a),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

fn check_range<T: PartialOrd + std::fmt::Display>(
    field: &'static str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(invalid(field, format!("{value} is outside {min}..={max}")));
    }
    Ok(())
}

fn check_host_port(field: &'static str, value: &str) -> Result<(), ConfigError> {
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err(invalid(field, format!("{value:?} is not host:port")));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(invalid(field, format!("{value:?} is not host:port")));
    }
    Ok(())
}

impl NodeConfig {
    /// Parses a TOML document (missing keys take their defaults; unknown keys are errors).
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Reads and parses a TOML file (not yet validated).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// This config as a TOML document.
    pub fn to_toml_string(&self) -> String {
        toml::to_string(self).expect("NodeConfig has only TOML-representable fields")
    }

    /// The Raft address peers use: raft-advertised-addr, else raft-listen-addr.
    pub fn raft_addr(&self) -> String {
        self.raft_advertised_addr
            .clone()
            .unwrap_or_else(|| self.raft_listen_addr.to_string())
    }

    /// The client address clients use: client-advertised-addr, else client-listen-addr.
    pub fn client_addr(&self) -> String {
        self.client_advertised_addr
            .clone()
            .unwrap_or_else(|| self.client_listen_addr.to_string())
    }

    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("node-id", self.node_id, 1, u64::MAX)?;
        let id_ok = !self.cluster_id.is_empty()
            && self.cluster_id.len() <= 64
            && self
                .cluster_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !id_ok {
            return Err(invalid(
                "cluster-id",
                format!("{:?}: use 1..=64 chars of [A-Za-z0-9._-]", self.cluster_id),
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(invalid("data-dir", "must not be empty"));
        }
        self.validate_addrs()?;
        self.validate_members()?;
        check_range("flush-interval-ms", self.flush_interval_ms, 1, 60_000)?;
        self.validate_sizes()?;
        check_range(
            "election-timeout-min-ms",
            self.election_timeout_min_ms,
            50,
            60_000,
        )?;
        check_range(
            "election-timeout-max-ms",
            self.election_timeout_max_ms,
            self.election_timeout_min_ms + 1,
            120_000,
        )?;
        check_range(
            "heartbeat-ms",
            self.heartbeat_ms,
            10,
            self.election_timeout_min_ms - 1,
        )?;
        check_range("send-timeout-ms", self.send_timeout_ms, 100, 600_000)?;
        check_range("default-queue-count", self.default_queue_count, 1, 1024)?;
        check_range("file-reserved-hours", self.file_reserved_hours, 1, 87_600)?;
        check_range("cq-units-per-file", self.cq_units_per_file, 1, 50_000_000)?;
        check_range(
            "index-slots-per-file",
            self.index_slots_per_file,
            1,
            100_000_000,
        )?;
        check_range(
            "index-units-per-file",
            self.index_units_per_file,
            1,
            100_000_000,
        )?;
        check_range("disk-clean-ratio", self.disk_clean_ratio, 0.1, 0.99)?;
        if !(self.disk_reject_ratio > self.disk_clean_ratio && self.disk_reject_ratio <= 0.99) {
            return Err(invalid(
                "disk-reject-ratio",
                format!(
                    "{} must be above disk-clean-ratio {} and at most 0.99",
                    self.disk_reject_ratio, self.disk_clean_ratio
                ),
            ));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log_level).is_err() {
            return Err(invalid(
                "log-level",
                format!(
                    "{:?} is not a tracing filter (e.g. \"info\")",
                    self.log_level
                ),
            ));
        }
        Ok(())
    }

    fn validate_addrs(&self) -> Result<(), ConfigError> {
        match &self.raft_advertised_addr {
            Some(a) => check_host_port("raft-advertised-addr", a)?,
            None if self.raft_listen_addr.ip().is_unspecified() => {
                return Err(invalid(
                    "raft-advertised-addr",
                    "required when raft-listen-addr is a wildcard address",
                ))
            }
            None => {}
        }
        match &self.client_advertised_addr {
            Some(a) => check_host_port("client-advertised-addr", a)?,
            None if self.client_listen_addr.ip().is_unspecified() => {
                return Err(invalid(
                    "client-advertised-addr",
                    "required when client-listen-addr is a wildcard address",
                ))
            }
            None => {}
        }
        if self.raft_listen_addr == self.client_listen_addr && self.raft_listen_addr.port() != 0 {
            return Err(invalid(
                "client-listen-addr",
                "must differ from raft-listen-addr",
            ));
        }
        if let Some(j) = &self.join_addr {
            check_host_port("join-addr", j)?;
        }
        Ok(())
    }

    fn validate_members(&self) -> Result<(), ConfigError> {
        if self.initial_members.is_empty() {
            return Ok(());
        }
        if self.join_addr.is_some() {
            return Err(invalid(
                "initial-members",
                "a node either bootstraps (initial-members) or joins (join-addr), not both",
            ));
        }
        let mut ids = std::collections::BTreeSet::new();
        for m in &self.initial_members {
            if !ids.insert(m.id) {
                return Err(invalid(
                    "initial-members",
                    format!("node id {} appears twice", m.id),
                ));
            }
        }
        if !ids.contains(&self.node_id) {
            return Err(invalid(
                "initial-members",
                format!("must include this node (node-id {})", self.node_id),
            ));
        }
        Ok(())
    }

    fn validate_sizes(&self) -> Result<(), ConfigError> {
        check_range("max-message-bytes", self.max_message_bytes, 1024, 64 << 20)?;
        check_range("max-batch-messages", self.max_batch_messages, 1, 65_536)?;
        check_range(
            "max-batch-bytes",
            self.max_batch_bytes,
            self.max_message_bytes,
            256 << 20,
        )?;
        check_range(
            "grpc-max-message-bytes",
            self.grpc_max_message_bytes,
            self.max_batch_bytes + (1 << 20),
            i32::MAX as u64,
        )?;
        check_range("segment-bytes", self.segment_bytes, 65_536, 16 << 30)?;
        if self.segment_bytes < 2 * self.max_batch_bytes {
            return Err(invalid(
                "segment-bytes",
                format!(
                    "{} must be at least 2 x max-batch-bytes ({})",
                    self.segment_bytes,
                    2 * self.max_batch_bytes
                ),
            ));
        }
        Ok(())
    }
}
