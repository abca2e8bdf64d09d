//! The one config of a test node ([`test_config`]: small segments and files, short Raft
//! timings) and the listeners it binds; shared by in-process ([`crate::cluster`]) and process
//! ([`crate::process`]) clusters.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_node::config::FlushPolicy;
use raftmq_node::config::LogConfig;
use raftmq_node::config::NodeConfig;
use raftmq_node::NodeListeners;
use tokio::net::TcpListener;

/// Send timeout of test nodes, ms.
pub const SEND_TIMEOUT_MS: u64 = 1500;
/// Flush interval of `async` test nodes, ms.
pub const FLUSH_INTERVAL_MS: u64 = 50;

/// A test node's config: 64 KiB segments, 300..600 ms election timeouts, small files.
pub fn test_config(id: u64, cluster_id: &str, dir: PathBuf, flush: FlushPolicy) -> NodeConfig {
    let mut c = NodeConfig {
        node_id: id,
        cluster_id: cluster_id.into(),
        data_dir: dir,
        metrics_addr: None,
        // Off here (its default port would collide); the harnesses give each node a free one.
        rocketmq_listen_addr: None,
        log: LogConfig {
            flush,
            flush_interval_ms: FLUSH_INTERVAL_MS,
            segment_bytes: 64 << 10,
            ..LogConfig::default()
        },
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        heartbeat_ms: 50,
        send_timeout_ms: SEND_TIMEOUT_MS,
        grpc_max_message_bytes: 4 << 20,
        log_level: "warn".into(),
        ..NodeConfig::default()
    };
    // The host's disk fill must not decide a test (CI disks run above 90%): both disk ratios
    // off. Tests of the guard set the ratios and pretend a usage (`set_disk_usage_override`).
    c.store.disk_clean_ratio = 1.0;
    c.store.disk_reject_ratio = 1.0;
    c.store.limits.max_message_bytes = 16 << 10;
    c.store.limits.max_batch_messages = 64;
    c.store.limits.max_batch_bytes = 32 << 10;
    c.store.consume_queue.units_per_file = 256;
    c.store.index.slots_per_file = 64;
    c.store.index.max_units_per_file = 256;
    c
}

/// Binds `addr` (port 0 = any), retrying briefly (a restarted node rebinds its old port).
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let mut last = None;
    for _ in 0..50 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(anyhow::anyhow!("cannot bind {addr}: {last:?}"))
}

/// Listeners on `cfg`'s addresses (and its metrics and RocketMQ addresses, if any), retrying
/// briefly.
pub(crate) async fn listeners_of(cfg: &NodeConfig) -> anyhow::Result<NodeListeners> {
    Ok(NodeListeners {
        raft: bind(cfg.raft_listen_addr).await?,
        client: bind(cfg.client_listen_addr).await?,
        metrics: bind_optional(cfg.metrics_addr).await?,
        rocketmq: bind_optional(cfg.rocketmq_listen_addr).await?,
    })
}

/// The listener of an optional address (`/metrics`, RocketMQ), if set.
pub(crate) async fn bind_optional(addr: Option<SocketAddr>) -> anyhow::Result<Option<TcpListener>> {
    match addr {
        Some(a) => Ok(Some(bind(a).await?)),
        None => Ok(None),
    }
}

/// A unique cluster id per test cluster in this process (fault tables are keyed by it).
pub fn unique_cluster_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
