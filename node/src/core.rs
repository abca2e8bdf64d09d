//! [`NodeCore`]: what every service and background task of one node shares: the config, the
//! Raft handle, the store, the metrics, the "shutting down" flag and the check-quorum mark.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::Instant;
use openraft::ServerState;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_store::Raft;
use raftmq_store::Store;
use raftmq_store::StoreWatermarks;
use raftmq_store::TypeConfig;

use crate::check_quorum::QuorumCheck;
use crate::config::NodeConfig;
use crate::metrics::GaugeSource;
use crate::metrics::NodeMetrics;
use crate::network::ReplicationKick;

/// openraft's metrics of this node.
pub type RaftMetrics = openraft::RaftMetrics<TypeConfig>;

/// State shared by the services of one node.
pub struct NodeCore {
    /// This node's id.
    pub node_id: NodeId,
    /// The validated configuration (advertised addresses filled in from the bound ports).
    pub config: NodeConfig,
    /// The Raft handle.
    pub raft: Raft,
    /// The state machine's read handle.
    pub store: Store,
    /// Prometheus metrics.
    pub metrics: Arc<NodeMetrics>,
    /// Set when shutdown starts: new writes are refused (nothing proposed).
    pub shutting_down: AtomicBool,
    /// While a stopping leader hands leadership over: the voter it hands it to (0: none; node
    /// ids start at 1). A refused write waits for the new leader and is told its address.
    pub handover_to: AtomicU64,
    /// Set by the check-quorum watcher while this leader has not heard from a quorum for an
    /// election timeout ([`crate::check_quorum`]): it then does not claim leadership.
    pub quorum: Arc<QuorumCheck>,
    /// Round-robin counters of leader-chosen queues, per topic.
    pub round_robin: Mutex<HashMap<String, u64>>,
    /// Client channels to other members (forwarding, status), by client address, with the
    /// TLS generation each was made with (a reload makes new ones).
    pub channels: Mutex<HashMap<String, (u64, tonic::transport::Channel)>>,
    /// Ends idle replication streams to followers stuck behind (the peer transport's).
    pub replication_kick: Arc<ReplicationKick>,
    /// Disk state: this node's refusal of appends, the other voters' reports (leader).
    pub disk: crate::disk_guard::DiskGuard,
    /// Long polls waiting now, against `max-long-poll-waiters`.
    pub long_polls: crate::long_poll::LongPolls,
    /// Who may call the client and RocketMQ services (`auth-*` settings).
    pub auth: crate::auth::Authenticator,
    /// TLS material of the listeners and outgoing connections (None: plaintext).
    pub tls: Option<Arc<crate::tls::TlsState>>,
    /// Set on this node's connections within this host (`loopback-congestion-control`).
    pub congestion: crate::tls::LoopbackCongestion,
    /// The slots of group proposals, shared by every stream ([`crate::pipeline::coalesce`]).
    pub proposals: crate::pipeline::coalesce::Coalescer,
}

impl NodeCore {
    /// The current Raft metrics.
    pub fn raft_metrics(&self) -> RaftMetrics {
        self.raft.metrics().borrow_watched().clone()
    }

    /// `Err` with the error once openraft's core has stopped (a fatal error, or a shutdown).
    pub fn running_state(&self) -> Result<(), openraft::errors::Fatal<raftmq_store::TypeConfig>> {
        self.with_metrics(|m| m.running_state.clone())
    }

    /// Runs `f` on the current Raft metrics without copying them.
    pub fn with_metrics<T>(&self, f: impl FnOnce(&RaftMetrics) -> T) -> T {
        let rx = self.raft.metrics();
        let m = rx.borrow_watched();
        f(&m)
    }

    /// The leader this node knows, with its client address ("" if unknown). A leader that
    /// lost its quorum ([`QuorumCheck::is_lost`]) knows none.
    pub fn leader(&self) -> (Option<NodeId>, String) {
        self.with_metrics(|m| {
            let leader = self.leader_in(m);
            let addr = leader
                .and_then(|id| m.membership_config.membership().get_node(&id).cloned())
                .map(|n: PeerNode| n.client_addr)
                .unwrap_or_default();
            (leader, addr)
        })
    }

    /// The leader this node names in the metrics snapshot `m` (so that term and leader of one
    /// answer come from the same moment): `m.current_leader`, unless that is this node and it
    /// lost its quorum.
    pub fn leader_in(&self, m: &RaftMetrics) -> Option<NodeId> {
        m.current_leader
            .filter(|&id| !(id == self.node_id && self.quorum.is_lost()))
    }

    /// True if this node is the leader right now (and has not lost its quorum).
    pub fn is_leader(&self) -> bool {
        !self.quorum.is_lost()
            && self.with_metrics(|m| {
                m.state == ServerState::Leader && m.current_leader == Some(self.node_id)
            })
    }

    /// True once shutdown has started.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// How fresh the last quorum ack must be for the leader to propose a write: four
    /// heartbeats, at most the election timeout's lower bound (openraft's own lease, the upper
    /// bound, is longer: this check refuses earlier, before anything is appended).
    pub fn quorum_freshness(&self) -> Duration {
        let hb = self.config.heartbeat_ms.saturating_mul(4);
        Duration::from_millis(hb.min(self.config.election_timeout_min_ms).max(50))
    }

    /// True if this node leads and heard from a quorum within [`Self::quorum_freshness`]
    /// (always true for a single-voter cluster).
    pub fn has_fresh_quorum(&self) -> bool {
        let freshness = self.quorum_freshness();
        self.with_metrics(|m| {
            if m.state != ServerState::Leader {
                return false;
            }
            if m.membership_config.membership().voter_ids().count() <= 1 {
                return true;
            }
            m.last_quorum_acked
                .as_ref()
                .is_some_and(|t| t.elapsed() <= freshness)
        })
    }

    /// A client channel to `addr` (host:port), created lazily and kept.
    pub fn channel(&self, addr: &str) -> Result<tonic::transport::Channel, String> {
        let mut map = self
            .channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = self.tls.as_ref().map_or(0, |t| t.generation());
        if let Some((g, ch)) = map.get(addr) {
            if *g == generation {
                return Ok(ch.clone());
            }
        }
        let endpoint = crate::tls::endpoint(self.tls.as_deref(), addr)
            .map_err(|e| format!("bad client address {addr:?}: {e}"))?
            .connect_timeout(Duration::from_millis(500))
            .max_frame_size(raftmq_proto::MAX_FRAME_BYTES);
        let ch = crate::tls::connect_lazy(&endpoint, &self.congestion);
        map.insert(addr.to_string(), (generation, ch.clone()));
        Ok(ch)
    }

    /// The next round-robin counter value of `topic`. Called once per message without a
    /// queue: the topic's name is copied into the map only the first time.
    pub fn next_round_robin(&self, topic: &str) -> u64 {
        let mut map = self
            .round_robin
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(next) = map.get_mut(topic) {
            let value = *next;
            *next = value.wrapping_add(1);
            return value;
        }
        map.insert(topic.to_owned(), 1);
        0
    }
}

impl GaugeSource for NodeCore {
    fn raft_metrics(&self) -> RaftMetrics {
        NodeCore::raft_metrics(self)
    }

    fn store_watermarks(&self) -> StoreWatermarks {
        self.store.watermarks()
    }

    fn cold_chunk_reads(&self) -> u64 {
        self.store.log().cold_chunk_reads()
    }

    fn node_metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn disk_state(&self) -> Option<(f64, bool)> {
        let usage = self.store.disk_usage().ok()?;
        Some((usage, crate::disk_guard::local_full(self)))
    }
}
