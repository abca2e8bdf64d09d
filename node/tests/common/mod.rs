//! In-process clusters for the node's integration tests: nodes on 127.0.0.1 port 0, 64 KiB
//! segments, short Raft timings, small ConsumeQueue and index files.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use raftmq_client::ports;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::LogConfig;
use raftmq_node::config::MemberSpec;
use raftmq_node::config::NodeConfig;
use raftmq_node::Node;
use raftmq_node::NodeHandle;
use raftmq_node::NodeListeners;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use tokio::net::TcpListener;
use tonic::transport::Channel;

/// Send timeout of test nodes, ms.
pub const SEND_TIMEOUT_MS: u64 = 1500;

/// A test node's config (addresses filled in by the caller).
pub fn test_config(id: u64, dir: &Path, flush: FlushPolicy) -> NodeConfig {
    let mut c = NodeConfig {
        node_id: id,
        cluster_id: "test".into(),
        data_dir: dir.join(format!("node-{id}")),
        metrics_addr: None,
        log: LogConfig {
            flush,
            flush_interval_ms: 20,
            segment_bytes: 64 << 10,
            ..LogConfig::default()
        },
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        heartbeat_ms: 50,
        send_timeout_ms: SEND_TIMEOUT_MS,
        max_message_bytes: 16 << 10,
        max_batch_messages: 64,
        max_batch_bytes: 32 << 10,
        grpc_max_message_bytes: 4 << 20,
        log_level: "warn".into(),
        ..NodeConfig::default()
    };
    c.store.consume_queue.units_per_file = 256;
    c.store.index.slots_per_file = 64;
    c.store.index.max_units_per_file = 256;
    c
}

/// A free address on 127.0.0.1 outside the ephemeral port range.
pub fn free_addr() -> SocketAddr {
    ports::free_addr().expect("a free port")
}

/// Binds `addr` (port 0 = any), retrying briefly (a restarted node rebinds its old port).
pub async fn bind(addr: SocketAddr) -> TcpListener {
    for _ in 0..50 {
        if let Ok(l) = TcpListener::bind(addr).await {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cannot bind {addr}");
}

/// A cluster of nodes 1..=n in one process.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub configs: Vec<NodeConfig>,
    pub nodes: Vec<Option<NodeHandle>>,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

impl Cluster {
    /// Starts `flush.len()` nodes bootstrapping one cluster, each with its flush policy.
    pub async fn start(flush: &[FlushPolicy], tweak: impl Fn(&mut NodeConfig)) -> Cluster {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        // Ports outside the ephemeral range: a restarted node rebinds its old port, which a
        // peer connection's source port could otherwise have taken meanwhile.
        let mut listeners = Vec::new();
        for _ in flush {
            listeners.push((bind(free_addr()).await, bind(free_addr()).await));
        }
        let members: Vec<MemberSpec> = listeners
            .iter()
            .enumerate()
            .map(|(i, (r, c))| MemberSpec {
                id: i as u64 + 1,
                raft_addr: r.local_addr().expect("addr").to_string(),
                client_addr: c.local_addr().expect("addr").to_string(),
            })
            .collect();
        let mut configs = Vec::new();
        let mut nodes = Vec::new();
        for (i, (r, c)) in listeners.into_iter().enumerate() {
            let mut cfg = test_config(i as u64 + 1, dir.path(), flush[i]);
            cfg.raft_listen_addr = r.local_addr().expect("addr");
            cfg.client_listen_addr = c.local_addr().expect("addr");
            cfg.initial_members = members.clone();
            tweak(&mut cfg);
            let l = NodeListeners {
                raft: r,
                client: c,
                metrics: None,
            };
            let node = Node::start_with_listeners(cfg.clone(), l)
                .await
                .expect("node starts");
            configs.push(cfg);
            nodes.push(Some(node));
        }
        Cluster {
            dir,
            configs,
            nodes,
        }
    }

    pub fn node(&self, id: u64) -> &NodeHandle {
        self.nodes[id as usize - 1]
            .as_ref()
            .expect("node is running")
    }

    pub fn client_addr(&self, id: u64) -> String {
        self.configs[id as usize - 1].client_listen_addr.to_string()
    }

    pub fn seeds(&self) -> Vec<String> {
        (1..=self.configs.len() as u64)
            .map(|i| self.client_addr(i))
            .collect()
    }

    /// A raw gRPC client of node `id`.
    pub async fn grpc(&self, id: u64) -> RaftMqClient<Channel> {
        RaftMqClient::connect(format!("http://{}", self.client_addr(id)))
            .await
            .expect("connect")
    }

    /// Waits until the running nodes agree on a leader; returns it.
    pub async fn wait_leader(&self) -> u64 {
        let end = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let leaders: Vec<Option<u64>> = self
                .nodes
                .iter()
                .flatten()
                .map(|n| n.core().leader().0)
                .collect();
            if let Some(Some(l)) = leaders.first() {
                let agreed = leaders.iter().all(|x| *x == Some(*l));
                let running = self.nodes[*l as usize - 1].is_some();
                if agreed && running && self.node(*l).core().is_leader() {
                    return *l;
                }
            }
            assert!(tokio::time::Instant::now() < end, "no leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every running node applied at least `index`.
    pub async fn wait_applied(&self, index: u64) {
        let end = tokio::time::Instant::now() + Duration::from_secs(10);
        for n in self.nodes.iter().flatten() {
            loop {
                let applied = n.store().watermarks().applied.map(|l| l.index);
                if applied >= Some(index) {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < end,
                    "node {} applied {applied:?} < {index}",
                    n.node_id()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Stops node `id` gracefully.
    pub async fn stop(&mut self, id: u64) {
        let n = self.nodes[id as usize - 1].take().expect("running");
        n.shutdown().await.expect("clean shutdown");
    }

    /// Stops node `id` like a crash.
    pub async fn kill(&mut self, id: u64) {
        let n = self.nodes[id as usize - 1].take().expect("running");
        n.kill().await;
    }

    /// Restarts node `id` on its data dir and addresses.
    pub async fn restart(&mut self, id: u64) {
        let cfg = self.configs[id as usize - 1].clone();
        let l = NodeListeners {
            raft: bind(cfg.raft_listen_addr).await,
            client: bind(cfg.client_listen_addr).await,
            metrics: None,
        };
        let node = Node::start_with_listeners(cfg, l)
            .await
            .expect("node restarts");
        self.nodes[id as usize - 1] = Some(node);
    }

    pub async fn shutdown_all(mut self) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].is_some() {
                self.stop(i as u64 + 1).await;
            }
        }
    }
}

/// A message of `topic` with `body`.
pub fn msg(topic: &str, body: &[u8]) -> pb::Message {
    pb::Message {
        topic: topic.into(),
        body: body.to_vec(),
        ..Default::default()
    }
}

/// Every message of every queue of `topic` on the node at `addr`: (queue, offset, id, body).
pub async fn read_all(
    client: &mut RaftMqClient<Channel>,
    topic: &str,
    queues: u32,
) -> Vec<(i32, u64, u64, Vec<u8>)> {
    let mut out = Vec::new();
    for q in 0..queues as i32 {
        let mut offset = 0;
        loop {
            let r = client
                .pull(pb::PullRequest {
                    topic: topic.into(),
                    queue_id: q,
                    offset,
                    max_count: 32,
                    ..Default::default()
                })
                .await
                .expect("pull")
                .into_inner();
            if r.status == pb::PullStatus::OffsetTooSmall as i32 {
                offset = r.min_offset;
                continue;
            }
            if r.messages.is_empty() {
                break;
            }
            for m in r.messages {
                let body = m.message.map(|m| m.body).unwrap_or_default();
                out.push((m.queue_id, m.queue_offset, m.msg_id, body));
            }
            offset = r.next_offset;
        }
    }
    out
}
