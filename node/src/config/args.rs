//! [`NodeArgs`]: the command line of `raftmq-node`; every flag overrides the TOML key of the
//! same name.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::builder::PossibleValuesParser;
use clap::builder::TypedValueParser;
use clap::Parser;

use super::ConfigError;
use super::FlushPolicy;
use super::MemberSpec;
use super::NodeConfig;

/// raftmq-node: one node of a Raft-replicated message broker.
///
/// Settings come from built-in defaults, then the TOML file given with --config (keys are the
/// flag names without "--"), then the flags below. Without any of them the node runs a
/// single-node cluster on 127.0.0.1 (Raft 9101, clients 9201, metrics 9301).
///
/// Example: raftmq-node --node-id 2 --data-dir ./data/n2 --raft-listen-addr 127.0.0.1:9102
///   --client-listen-addr 127.0.0.1:9202 --metrics-addr 127.0.0.1:9302
///   --initial-members 1=127.0.0.1:9101/127.0.0.1:9201,2=127.0.0.1:9102/127.0.0.1:9202,3=127.0.0.1:9103/127.0.0.1:9203
#[derive(Clone, Debug, Default, Parser)]
#[command(name = "raftmq-node", version, verbatim_doc_comment)]
pub struct NodeArgs {
    /// TOML config file (kebab-case keys, same names as the flags).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// This node's id, unique and stable. [default 1; 1..]
    #[arg(long)]
    pub node_id: Option<u64>,
    /// Cluster name; peers of other clusters are refused. [default raftmq]
    #[arg(long)]
    pub cluster_id: Option<String>,
    /// Data directory. [default ./raftmq-data/node-1]
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Listen address of the Raft peer service. [default 127.0.0.1:9101]
    #[arg(long)]
    pub raft_listen_addr: Option<SocketAddr>,
    /// host:port peers dial for Raft. [default: raft-listen-addr]
    #[arg(long)]
    pub raft_advertised_addr: Option<String>,
    /// Listen address of the client service. [default 127.0.0.1:9201]
    #[arg(long)]
    pub client_listen_addr: Option<SocketAddr>,
    /// host:port clients dial. [default: client-listen-addr]
    #[arg(long)]
    pub client_advertised_addr: Option<String>,
    /// Prometheus /metrics address. [default 127.0.0.1:9301]
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Disable the metrics endpoint (metrics-addr = "" in the file).
    #[arg(long, conflicts_with = "metrics_addr")]
    pub no_metrics: bool,
    /// Listen address of the RocketMQ 5 gRPC service. [default 127.0.0.1:9401]
    #[arg(long)]
    pub rocketmq_listen_addr: Option<SocketAddr>,
    /// host:port RocketMQ clients dial. [default: rocketmq-listen-addr]
    #[arg(long)]
    pub rocketmq_advertised_addr: Option<String>,
    /// FIFO consumer groups, comma-separated; the same on every node. [default: none]
    #[arg(long, value_delimiter = ',')]
    pub rocketmq_fifo_groups: Option<Vec<String>>,
    /// Disable the RocketMQ service (rocketmq-listen-addr = "" in the file).
    #[arg(long, conflicts_with = "rocketmq_listen_addr")]
    pub no_rocketmq: bool,
    /// Bootstrap members, comma-separated id=raft_host:port/client_host:port. [default: none]
    #[arg(long, value_delimiter = ',')]
    pub initial_members: Option<Vec<MemberSpec>>,
    /// Client address of a member of an existing cluster to join as learner. [default: none]
    #[arg(long)]
    pub join_addr: Option<String>,
    /// fsync before acknowledging (sync) or periodically (async). [default sync]
    #[arg(long, value_parser = flush_policy_parser())]
    pub flush_policy: Option<FlushPolicy>,
    /// fsync period of the async flush policy, ms. [default 500; 1..=60000]
    #[arg(long)]
    pub flush_interval_ms: Option<u64>,
    /// CommitLog segment size, bytes; cluster-wide, fixed. [default 1 GiB]
    #[arg(long)]
    pub segment_bytes: Option<u64>,
    /// Election timeout lower bound, ms. [default 150; 50..=60000]
    #[arg(long)]
    pub election_timeout_min_ms: Option<u64>,
    /// Election timeout upper bound, ms. [default 300; > min, ..=120000]
    #[arg(long)]
    pub election_timeout_max_ms: Option<u64>,
    /// Leader heartbeat interval, ms. [default 50; 10..=election-timeout-min-ms/2]
    #[arg(long)]
    pub heartbeat_ms: Option<u64>,
    /// How long a send waits for its quorum ack, ms. [default 3000; 100..=600000]
    #[arg(long)]
    pub send_timeout_ms: Option<u64>,
    /// Largest message, bytes. [default 4 MiB; 1 KiB..=64 MiB]
    #[arg(long)]
    pub max_message_bytes: Option<u32>,
    /// Most messages per batch. [default 1024; 1..=65536]
    #[arg(long)]
    pub max_batch_messages: Option<u32>,
    /// Largest batch, bytes. [default 16 MiB; max-message-bytes..=256 MiB]
    #[arg(long)]
    pub max_batch_bytes: Option<u32>,
    /// gRPC message limit, bytes. [default 64 MiB; >= max-batch-bytes + 1 MiB]
    #[arg(long)]
    pub grpc_max_message_bytes: Option<u64>,
    /// Wait for a follower's answer to one replication request, ms, plus 100 ms per MiB.
    /// [default 1000; 100..=600000]
    #[arg(long)]
    pub replication_timeout_ms: Option<u64>,
    /// Create unknown topics on first send. [default true]
    #[arg(long)]
    pub topic_auto_create: Option<bool>,
    /// Queues of an auto-created topic. [default 4; 1..=1024]
    #[arg(long)]
    pub default_queue_count: Option<u32>,
    /// Most topics; one more is refused. [default 10000; 1..=1000000]
    #[arg(long)]
    pub max_topics: Option<u32>,
    /// Most consumer groups with offsets or pop state. [default 10000; 1..=1000000]
    #[arg(long)]
    pub max_groups: Option<u32>,
    /// Most queues of one topic. [default 1024; 1..=65535]
    #[arg(long)]
    pub max_queues_per_topic: Option<u32>,
    /// Largest incoming snapshot, bytes; 0 = half the free disk space. [default 0; 0 or
    /// 1 MiB..=1 PiB]
    #[arg(long)]
    pub max_snapshot_bytes: Option<u64>,
    /// Most long polls (Pull, RocketMQ Receive) waiting at once. [default 4096; 0..=1000000]
    #[arg(long)]
    pub max_long_poll_waiters: Option<u32>,
    /// Most unanswered message bytes of one SendStream. [default 64 MiB; 1 MiB..=4 GiB]
    #[arg(long)]
    pub max_stream_inflight_bytes: Option<u64>,
    /// Entries of SendStream groups stored at once before other streams' groups wait and
    /// merge (group commit across producers); 0 = never wait. [default 1; 0..=1024]
    #[arg(long)]
    pub max_group_proposals: Option<u32>,
    /// Segment retention, hours. [default 72; 1..=87600]
    #[arg(long)]
    pub file_reserved_hours: Option<u64>,
    /// Disk usage ratio that triggers early cleaning. [default 0.75; 0.1..=1.0, 1.0 = off]
    #[arg(long)]
    pub disk_clean_ratio: Option<f64>,
    /// Disk usage ratio above which sends are refused. [default 0.90; > clean, ..=1.0, 1.0 =
    /// off]
    #[arg(long)]
    pub disk_reject_ratio: Option<f64>,
    /// ConsumeQueue units per file. [default 300000; 1..=50000000]
    #[arg(long)]
    pub cq_units_per_file: Option<u32>,
    /// Hash slots per IndexFile. [default 5000000; 1..=100000000]
    #[arg(long)]
    pub index_slots_per_file: Option<u32>,
    /// Index units per IndexFile. [default 20000000; 1..=100000000]
    #[arg(long)]
    pub index_units_per_file: Option<u32>,
    /// Log filter (tracing EnvFilter syntax; RUST_LOG wins). [default info]
    #[arg(long)]
    pub log_level: Option<String>,
    /// Async runtime threads; 0 = one per CPU core. Nodes sharing a machine should split its
    /// cores. [default 0; 0..=1024]
    #[arg(long)]
    pub worker_threads: Option<u32>,
    /// Truncate a corrupted CommitLog at the first bad record and catch up from the peers
    /// instead of refusing to start (operator repair). [default false]
    #[arg(long)]
    pub repair_truncate_corruption: Option<bool>,
    /// Write zeros a few MiB ahead of the CommitLog appends while fsyncs come often, so an
    /// fsync does not also write the file system's extent metadata (more disk writes, less
    /// CPU and latency per fsync). [default true]
    #[arg(long)]
    pub zero_ahead: Option<bool>,
    /// CommitLog segments that retention deletes, kept instead (up to this many) and reused as
    /// the next segments, whose fsyncs then write no file-system extent metadata; each holds
    /// segment-bytes of disk after retention (deleted when the disk is full). 0 = delete them.
    /// [default 2; 0..=64]
    #[arg(long)]
    pub recycle_segments: Option<u32>,
    /// Bytes of the CommitLog, back from its flushed end, kept in the OS page cache; older
    /// pages are dropped once durable, so appends reuse warm pages (reads further back go
    /// to the disk). 0 = leave the cache to the kernel. [default 268435456 (256 MiB)]
    #[arg(long)]
    pub log_cache_bytes: Option<u64>,
    /// Bytes of memory the newest CommitLog appends are copied into and written from around
    /// the page cache (`O_DIRECT`) by the flush (on an `async` node a mapping of the file
    /// `write-stage` in the data directory, replayed after a kill -9); 0 = through the page
    /// cache. [default 16777216 (16 MiB); 0 or 1048576..=1073741824, a multiple of 4096]
    #[arg(long)]
    pub write_stage_bytes: Option<u64>,
    /// After a whole-cluster power loss with `async` flush: forget the committed entries this
    /// node lost so a leader can be elected without them (they are gone). [default false]
    #[arg(long)]
    pub accept_lost_commits: Option<bool>,
    /// How long an idempotent send (producer id + sequence, or RocketMQ client message id) is
    /// remembered so a retry is answered, not stored again, ms (leader timestamps; stamped
    /// into each entry by the leader). [default 120000; 0..=86400000, 0 = off]
    #[arg(long)]
    pub dedup_window_ms: Option<u64>,
    /// Most idempotent sends remembered (all producers); the oldest is forgotten first.
    /// [default 100000; 1..=10000000]
    #[arg(long)]
    pub dedup_max_entries: Option<u32>,
    /// Authentication flags.
    #[command(flatten)]
    pub auth: super::AuthArgs,
    /// PEM certificate chain of this node, for every gRPC listener and towards peers (URI SAN
    /// raftmq://<cluster-id>/node/<node-id>). [default: none = plaintext]
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of tls-cert-file. [default: none]
    #[arg(long)]
    pub tls_key_file: Option<PathBuf>,
    /// PEM bundle of the cluster CA(s) that verifies peers. [default: none]
    #[arg(long)]
    pub tls_ca_file: Option<PathBuf>,
    /// Serve plaintext on non-loopback listeners when no TLS files are set. [default false]
    #[arg(long)]
    pub allow_plaintext: Option<bool>,
    /// Check the TLS files for changes every this many ms (0: SIGHUP only).
    /// [default 2000; 0 or 100..=3600000]
    #[arg(long)]
    pub tls_reload_interval_ms: Option<u64>,
    /// Most concurrent connections per listener. [default 10000; 1..=1000000]
    #[arg(long)]
    pub max_connections: Option<u32>,
    /// Most concurrent gRPC streams per connection. [default 1024; 1..=65536]
    #[arg(long)]
    pub max_concurrent_streams: Option<u32>,
    /// TCP congestion control of connections whose two ends are on this host, or `system`
    /// for the host's own. [default reno]
    #[arg(long)]
    pub loopback_congestion_control: Option<String>,
}

/// `--flush-policy`: the names and meanings of raft-log's [`FlushPolicy`].
fn flush_policy_parser() -> impl TypedValueParser<Value = FlushPolicy> {
    let values = FlushPolicy::ALL.map(|(_, name, help)| PossibleValue::new(name).help(help));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<FlushPolicy>())
}

/// For each named flag that was given, `cfg.<path>.<flag> = value` (`Some(value)` after `?`).
macro_rules! override_fields {
    ($args:expr => $cfg:expr; $($f:ident),*) => {
        $( if let Some(v) = $args.$f { $cfg.$f = v; } )*
    };
    ($args:expr => $cfg:expr; ? $($o:ident),*) => {
        $( if let Some(v) = $args.$o { $cfg.$o = Some(v); } )*
    };
}

impl NodeArgs {
    /// Defaults, then the file (if any), then the flags; validated.
    pub fn resolve(self) -> Result<NodeConfig, ConfigError> {
        let mut cfg = match &self.config {
            Some(path) => NodeConfig::load(path)?,
            None => NodeConfig::default(),
        };
        self.apply(&mut cfg);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Writes every flag that was given over `cfg`.
    pub fn apply(self, cfg: &mut NodeConfig) {
        override_fields!(self => cfg;
            node_id, cluster_id, data_dir, raft_listen_addr, client_listen_addr,
            initial_members, rocketmq_fifo_groups, election_timeout_min_ms, election_timeout_max_ms, heartbeat_ms,
            send_timeout_ms, grpc_max_message_bytes, replication_timeout_ms, topic_auto_create, default_queue_count,
            log_level, worker_threads);
        override_fields!(self => cfg; ?
            raft_advertised_addr, client_advertised_addr, metrics_addr, join_addr,
            rocketmq_listen_addr, rocketmq_advertised_addr);
        override_fields!(self => cfg.log;
            segment_bytes, flush_interval_ms, repair_truncate_corruption, accept_lost_commits,
            zero_ahead, recycle_segments, log_cache_bytes, write_stage_bytes);
        override_fields!(self => cfg.store;
            file_reserved_hours, disk_clean_ratio, disk_reject_ratio);
        override_fields!(self => cfg.store; dedup_window_ms, dedup_max_entries);
        override_fields!(self => cfg.store.limits;
            max_message_bytes, max_batch_messages, max_batch_bytes);
        override_fields!(self => cfg.store.limits; max_topics, max_queues_per_topic, max_groups);
        override_fields!(self => cfg;
            max_snapshot_bytes, max_long_poll_waiters, max_stream_inflight_bytes,
            max_group_proposals);
        override_fields!(self => cfg.tls; allow_plaintext, tls_reload_interval_ms,
            max_connections, max_concurrent_streams, loopback_congestion_control);
        override_fields!(self => cfg.tls; ? tls_cert_file, tls_key_file, tls_ca_file);
        if let Some(v) = self.flush_policy {
            cfg.log.flush = v;
        }
        if let Some(v) = self.cq_units_per_file {
            cfg.store.consume_queue.units_per_file = v;
        }
        if let Some(v) = self.index_slots_per_file {
            cfg.store.index.slots_per_file = v;
        }
        if let Some(v) = self.index_units_per_file {
            cfg.store.index.max_units_per_file = v;
        }
        if self.no_metrics {
            cfg.metrics_addr = None;
        }
        if self.no_rocketmq {
            cfg.rocketmq_listen_addr = None;
        }
        self.auth.apply(&mut cfg.auth);
    }
}
