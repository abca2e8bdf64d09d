//! [`NodeConfig`]: everything one raftmq node is told at start.
//!
//! Sources, later wins: built-in defaults, a TOML file (`--config`, flat kebab-case keys, the
//! flag names of [`NodeArgs`]; see `config/file.rs`), then command-line flags (`raftmq-node --help`
//! lists them). The result is checked by [`NodeConfig::validate`], which names the offending
//! field. The defaults run a single-node cluster on 127.0.0.1 without any file.
//!
//! Composed, not copied: the CommitLog's settings are raft-log's [`LogConfig`] and the
//! store's are [`StoreConfig`] (with its ConsumeQueue and IndexFile parts), embedded flat
//! (`#[serde(flatten)]`), so each is declared, documented, defaulted and validated once, in
//! the crate that uses it. This file adds only the node's own settings: identity, addresses,
//! membership, Raft timings, the send timeout and gRPC limit, logging.
//!
//! Cluster-wide settings (`cluster-id`, `segment-bytes`, the Raft timings,
//! `rocketmq-fifo-groups`) must be equal on
//! all members; `segment-bytes` in particular decides where every entry sits in the
//! CommitLog, so it must never change once a data dir exists.

mod args;
mod auth;
#[cfg(test)]
mod config_tests;
mod file;
mod member;
mod raft;
mod tls;
#[cfg(test)]
mod tls_tests;
mod validate;

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

pub use args::NodeArgs;
pub use auth::AuthArgs;
pub use auth::AuthConfig;
pub use file::file_keys;
pub use member::MemberSpec;
pub use raftmq_raft_log::FlushPolicy;
pub use raftmq_raft_log::LogConfig;
pub use raftmq_store::StoreConfig;
pub use tls::TlsConfig;
pub use tls::TlsFiles;

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
    /// The config file is not valid TOML for [`NodeConfig`] (or has a key it does not know).
    #[error("cannot parse config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error (names the key).
        source: Box<toml::de::Error>,
    },
}

/// One node's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
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
    /// Address the RocketMQ 5 gRPC service (`apache.rocketmq.v2.MessagingService`, what the
    /// official RocketMQ clients speak) listens on; "" (empty) disables it.
    /// Default 127.0.0.1:9401; any socket address (port 0 = pick a free port) or "".
    #[serde(with = "optional_addr")]
    pub rocketmq_listen_addr: Option<SocketAddr>,
    /// host:port RocketMQ clients reach this node at (the endpoints of every route it
    /// answers). Default: rocketmq-listen-addr (required when that is a wildcard address);
    /// a non-empty host:port.
    pub rocketmq_advertised_addr: Option<String>,
    /// Consumer groups that consume FIFO (RocketMQ's subscription group setting
    /// `consumeMessageOrderly`): per queue, the next message only after the previous one is
    /// acked or given up, and Telemetry tells their clients `fifo = true`. Cluster-wide: every
    /// node must list the same groups (the leader stamps the flag into each `Receive`).
    /// Default empty; each a valid group name.
    pub rocketmq_fifo_groups: Vec<String>,
    /// Members that bootstrap a new cluster, as "id=raft_host:port/client_host:port". Used only
    /// when the data dir is new; must include this node. Empty and no join-addr: a single-node
    /// cluster of this node. Default empty; ids unique.
    pub initial_members: Vec<MemberSpec>,
    /// Client address of any member of an existing cluster to join as a learner (excludes
    /// initial-members). Default unset; a non-empty host:port.
    pub join_addr: Option<String>,
    /// The CommitLog: `segment-bytes`, `flush-policy`, `flush-interval-ms`,
    /// `repair-truncate-corruption`, `accept-lost-commits` (see [`LogConfig`]). On a node,
    /// segment-bytes is also at least 65536 and at least 2 x max-batch-bytes.
    #[serde(flatten)]
    pub log: LogConfig,
    /// Lower bound of the randomized election timeout, in ms. openraft starts an election only
    /// once the leader lease (= election-timeout-max-ms) *and* this randomized timeout have
    /// passed since the leader was last heard: failover takes max + [min, max).
    /// Default 150 (a LAN); range 50..=60000 and >= 2 x heartbeat-ms.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout, in ms.
    /// Also the leader lease (openraft uses it as such). Default 300; range
    /// election-timeout-min-ms+1..=120000.
    pub election_timeout_max_ms: u64,
    /// Leader heartbeat interval, in ms. Default 50; range 10..=election-timeout-min-ms/2.
    pub heartbeat_ms: u64,
    /// How long a send waits for its quorum ack before failing DEADLINE_EXCEEDED, in ms.
    /// Default 3000; range 100..=600000.
    pub send_timeout_ms: u64,
    /// gRPC message size limit of both services (peer traffic carries whole batches), bytes.
    /// Default 67108864 (64 MiB); range max-batch-bytes + 1 MiB..=2147483647.
    pub grpc_max_message_bytes: u64,
    /// How long the leader waits for a follower's answer to one replication request before
    /// it reopens the stream, in ms, plus 100 ms per MiB the request carries (the follower
    /// writes and fsyncs it first); at least heartbeat-ms. Default 1000; range 100..=600000.
    pub replication_timeout_ms: u64,
    /// Create a topic on its first send (with default-queue-count queues); when off, sends to
    /// unknown topics fail NOT_FOUND. Default true.
    pub topic_auto_create: bool,
    /// Queue count of auto-created topics (RocketMQ's defaultTopicQueueNums).
    /// Default 4; range 1..=1024.
    pub default_queue_count: u32,
    /// Most bytes of one incoming snapshot transfer; past it the transfer is refused
    /// RESOURCE_EXHAUSTED as its bytes arrive, its file removed (the leader sends again).
    /// 0: half the space available on the data dir's file system when a transfer begins
    /// (installing stages the segments a second time). Default 0; 0 or 1048576
    /// (1 MiB)..=1125899906842624 (1 PiB).
    pub max_snapshot_bytes: u64,
    /// Most long polls waiting at once on this node (raftmq Pull and RocketMQ Receive
    /// together); past it a call that would wait answers at once: Pull with
    /// RESOURCE_EXHAUSTED, Receive with TOO_MANY_REQUESTS, both naming this setting.
    /// Default 4096; range 0..=1000000 (0: no call waits).
    pub max_long_poll_waiters: u32,
    /// Most message bytes one SendStream holds taken in and unanswered (requests refused as
    /// invalid count until their answer leaves); further requests wait in the transport and
    /// HTTP/2 flow control pushes back on the client. A stream with nothing in flight always
    /// takes one message. Default 67108864 (64 MiB); range 1048576..=4294967296 (4 GiB).
    pub max_stream_inflight_bytes: u64,
    /// Entries of SendStream groups the leader stores at once before the groups of other
    /// streams wait and merge into one entry (group commit across producers: fewer, bigger
    /// entries when several producers load the node). A stream whose own entries are all
    /// that is being stored waits only behind other streams' waiting groups, and nothing
    /// waits while the entries under way hold fewer than 32 messages; a merged group of 128
    /// messages goes out at once. 0: every group is proposed at once. Default 1; range
    /// 0..=1024.
    pub max_group_proposals: u32,
    /// The store: `file-reserved-hours`, `disk-clean-ratio`, `disk-reject-ratio`,
    /// `cq-units-per-file`, `index-slots-per-file`, `index-units-per-file` and the send limits
    /// `max-message-bytes`, `max-batch-messages`, `max-batch-bytes`, `max-topics`,
    /// `max-queues-per-topic`, `max-groups` (see [`StoreConfig`] and
    /// [`StoreLimits`](raftmq_store::limits::StoreLimits)). Its other fields are not read from
    /// the file and keep their defaults. On a node, max-batch-bytes also bounds the entries a
    /// SendStream groups.
    #[serde(flatten)]
    pub store: StoreConfig,
    /// Log filter (tracing EnvFilter syntax); RUST_LOG overrides it.
    /// Default "info"; e.g. "debug" or "info,raftmq_node=debug".
    pub log_level: String,
    /// Threads of the node's async runtime (network, Raft, apply); 0: one per CPU core the
    /// process may use. Nodes sharing a machine should split its cores (`raftmq cluster up`
    /// gives each of its nodes cores / nodes): with more runnable runtime threads than cores
    /// the threads preempt each other and steal each other's tasks (4 x 64 on 2 cores, three
    /// nodes and the load generator: up to 20% fewer messages/s and a p99 1.3 to 1.5 times
    /// higher at 2 threads each than at 1). With one thread (1, or 0 on a one-core machine)
    /// the node runs tokio's current-thread scheduler (see `main.rs`: unary answers share
    /// socket writes). Default 0; range 0..=1024.
    pub worker_threads: u32,
    /// Authentication: `auth-enabled`, `auth-key-file`, `auth-admin-file`,
    /// `auth-max-skew-ms` (see [`AuthConfig`]).
    #[serde(flatten)]
    pub auth: AuthConfig,
    /// TLS files, `allow-plaintext`, `tls-reload-interval-ms`, `max-connections`,
    /// `max-concurrent-streams` (see [`TlsConfig`]).
    #[serde(flatten)]
    pub tls: TlsConfig,
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
            rocketmq_listen_addr: Some(SocketAddr::from(([127, 0, 0, 1], 9401))),
            rocketmq_advertised_addr: None,
            rocketmq_fifo_groups: Vec::new(),
            initial_members: Vec::new(),
            join_addr: None,
            log: LogConfig::default(),
            election_timeout_min_ms: 150,
            election_timeout_max_ms: 300,
            heartbeat_ms: 50,
            send_timeout_ms: 3000,
            grpc_max_message_bytes: 64 << 20,
            replication_timeout_ms: 1000,
            topic_auto_create: true,
            default_queue_count: 4,
            max_snapshot_bytes: 0,
            max_long_poll_waiters: 4096,
            max_stream_inflight_bytes: 64 << 20,
            max_group_proposals: 1,
            store: StoreConfig::default(),
            log_level: "info".into(),
            worker_threads: 0,
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
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

impl NodeConfig {
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

    /// The RocketMQ address clients use: rocketmq-advertised-addr, else rocketmq-listen-addr
    /// (None: the RocketMQ service is off).
    pub fn rocketmq_addr(&self) -> Option<String> {
        let listen = self.rocketmq_listen_addr?;
        Some(
            self.rocketmq_advertised_addr
                .clone()
                .unwrap_or_else(|| listen.to_string()),
        )
    }

    /// True if `group` consumes FIFO (listed in rocketmq-fifo-groups).
    pub fn is_fifo_group(&self, group: &str) -> bool {
        self.rocketmq_fifo_groups.iter().any(|g| g == group)
    }
}
