//! [`NodeMetrics`]: Prometheus metrics of one node, served as text at `/metrics`.
//!
//! Built on `prometheus-client` (the Prometheus project's own Rust client: typed metrics, no
//! global registry, so several nodes in one test process keep separate registries, and an
//! OpenMetrics text encoder). Counters and histograms are updated on the request path; the
//! gauges (watermarks, lags, role, term, leader) are refreshed at each scrape from a
//! [`GaugeSource`] (the node's openraft metrics and store watermarks; `NodeCore` implements
//! it, so this module depends on no node state). All names start with `raftmq_`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use openraft::ServerState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use raftmq_store::StoreWatermarks;
use raftmq_store::TypeConfig;

/// Where a scrape reads the numbers its gauges show.
pub trait GaugeSource {
    /// openraft's metrics of this node, now.
    fn raft_metrics(&self) -> openraft::RaftMetrics<TypeConfig>;
    /// The store's watermarks, now.
    fn store_watermarks(&self) -> StoreWatermarks;
    /// The metrics the scrape renders.
    fn node_metrics(&self) -> &NodeMetrics;
    /// Disk usage of the data dir (0..1) and whether it is above `disk-reject-ratio`; None
    /// when unknown.
    fn disk_state(&self) -> Option<(f64, bool)> {
        None
    }
    /// CommitLog chunks read around the page cache since start (`LogStore::cold_chunk_reads`).
    fn cold_chunk_reads(&self) -> u64 {
        0
    }
}

impl<T: GaugeSource + ?Sized> GaugeSource for Arc<T> {
    fn raft_metrics(&self) -> openraft::RaftMetrics<TypeConfig> {
        (**self).raft_metrics()
    }

    fn store_watermarks(&self) -> StoreWatermarks {
        (**self).store_watermarks()
    }

    fn node_metrics(&self) -> &NodeMetrics {
        (**self).node_metrics()
    }

    fn disk_state(&self) -> Option<(f64, bool)> {
        (**self).disk_state()
    }

    fn cold_chunk_reads(&self) -> u64 {
        (**self).cold_chunk_reads()
    }
}

/// Watermark and Raft gauges, refreshed at scrape time.
#[derive(Default)]
struct Gauges {
    appended_index: Gauge,
    flushed_index: Gauge,
    committed_index: Gauge,
    applied_index: Gauge,
    purged_index: Gauge,
    min_phys_offset: Gauge,
    max_phys_offset: Gauge,
    dispatched_phys_offset: Gauge,
    flush_lag: Gauge,
    commit_lag: Gauge,
    apply_lag: Gauge,
    role: Gauge,
    term: Gauge,
    leader_id: Gauge,
    disk_usage: Gauge<f64, std::sync::atomic::AtomicU64>,
    disk_full: Gauge,
    /// The log's count ([`GaugeSource::cold_chunk_reads`]), and what of it was counted.
    cold_chunk_reads: Counter,
    cold_chunk_reads_seen: std::sync::atomic::AtomicU64,
}

/// The metrics of one node.
pub struct NodeMetrics {
    registry: Registry,
    gauges: Gauges,
    send_latency: Histogram,
    pull_latency: Histogram,
    send_failures: Counter,
    messages_in: Counter,
    bytes_in: Counter,
    messages_out: Counter,
    bytes_out: Counter,
    /// Writes this node forwarded to the leader.
    pub forwarded: Counter,
    /// Pre-votes this node started because its leader's replication stream broke (before
    /// its election timer would have, see `network::LeaderContact`).
    pub leader_lost_pre_votes: Counter,
    /// Idle replication streams the catch-up watcher ended because their follower's matched
    /// index stayed below the leader's last log index (see `network::ReplicationKick`).
    pub replication_kicks: Counter,
    /// Messages answered from the dedup window: a retried idempotent send that was already
    /// stored (`raftmq_dedup_hits_total`).
    pub dedup_hits: Counter,
    /// AppendEntries with entries (and snapshots) this node refused because its disk is full.
    pub appends_refused_disk_full: Counter,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms .. ~8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

impl Default for NodeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeMetrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let mut m = NodeMetrics {
            registry: Registry::with_prefix("raftmq"),
            gauges: Gauges::default(),
            send_latency: latency_histogram(),
            pull_latency: latency_histogram(),
            send_failures: Counter::default(),
            messages_in: Counter::default(),
            bytes_in: Counter::default(),
            messages_out: Counter::default(),
            bytes_out: Counter::default(),
            forwarded: Counter::default(),
            leader_lost_pre_votes: Counter::default(),
            replication_kicks: Counter::default(),
            dedup_hits: Counter::default(),
            appends_refused_disk_full: Counter::default(),
        };
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        let g = &self.gauges;
        r.register(
            "appended_index",
            "Last Raft log index appended",
            g.appended_index.clone(),
        );
        r.register(
            "flushed_index",
            "Last Raft log index flushed to disk",
            g.flushed_index.clone(),
        );
        r.register(
            "committed_index",
            "Commit index (= confirm offset)",
            g.committed_index.clone(),
        );
        r.register(
            "applied_index",
            "Last index applied and dispatched",
            g.applied_index.clone(),
        );
        r.register(
            "purged_index",
            "Last purged log index",
            g.purged_index.clone(),
        );
        r.register(
            "min_phys_offset",
            "Lowest retained CommitLog offset",
            g.min_phys_offset.clone(),
        );
        r.register(
            "max_phys_offset",
            "CommitLog append position",
            g.max_phys_offset.clone(),
        );
        r.register(
            "log_cold_chunk_reads",
            "CommitLog chunks (2 MiB) read from the disk around the page cache for readers more than log-cache-bytes behind",
            g.cold_chunk_reads.clone(),
        );
        r.register(
            "dispatched_phys_offset",
            "CommitLog offset dispatched",
            g.dispatched_phys_offset.clone(),
        );
        r.register(
            "flush_lag_entries",
            "appended - flushed",
            g.flush_lag.clone(),
        );
        r.register(
            "commit_lag_entries",
            "appended - committed",
            g.commit_lag.clone(),
        );
        r.register(
            "apply_lag_entries",
            "committed - applied",
            g.apply_lag.clone(),
        );
        r.register(
            "raft_role",
            "0 learner, 1 follower, 2 candidate, 3 leader, 4 shutdown",
            g.role.clone(),
        );
        r.register("raft_term", "Current Raft term", g.term.clone());
        r.register(
            "raft_leader_id",
            "Known leader id (0 = none)",
            g.leader_id.clone(),
        );
        r.register(
            "send_latency_seconds",
            "Send/SendBatch latency on the leader",
            self.send_latency.clone(),
        );
        r.register(
            "pull_latency_seconds",
            "Pull latency including long polling",
            self.pull_latency.clone(),
        );
        r.register(
            "send_failures",
            "Sends answered with an error",
            self.send_failures.clone(),
        );
        r.register(
            "dedup_hits",
            "Retried idempotent sends answered with the original result, not stored again",
            self.dedup_hits.clone(),
        );
        r.register(
            "messages_in",
            "Messages acknowledged to producers",
            self.messages_in.clone(),
        );
        r.register(
            "bytes_in",
            "Body bytes acknowledged to producers",
            self.bytes_in.clone(),
        );
        r.register(
            "messages_out",
            "Messages returned by pulls",
            self.messages_out.clone(),
        );
        r.register(
            "bytes_out",
            "Body bytes returned by pulls",
            self.bytes_out.clone(),
        );
        r.register(
            "forwarded_writes",
            "Writes forwarded to the leader",
            self.forwarded.clone(),
        );
        r.register(
            "leader_lost_pre_votes",
            "Pre-votes started at once because the leader's replication stream broke",
            self.leader_lost_pre_votes.clone(),
        );
        r.register(
            "replication_kicks",
            "Idle replication streams ended so a follower stuck behind the leader's log resumes",
            self.replication_kicks.clone(),
        );
        r.register(
            "disk_usage_ratio",
            "Used share of the data dir's file system, 0..1 (as df computes it)",
            g.disk_usage.clone(),
        );
        r.register(
            "disk_full",
            "1 while the disk is above disk-reject-ratio (no entries taken, no sends)",
            g.disk_full.clone(),
        );
        r.register(
            "appends_refused_disk_full",
            "Appends and snapshots refused because the disk is above disk-reject-ratio",
            self.appends_refused_disk_full.clone(),
        );
    }

    /// One send finished after `elapsed`.
    pub fn record_send(&self, elapsed: Duration, ok: bool) {
        self.send_latency.observe(elapsed.as_secs_f64());
        if !ok {
            self.send_failures.inc();
        }
    }

    /// One pull finished after `elapsed`.
    pub fn record_pull(&self, elapsed: Duration) {
        self.pull_latency.observe(elapsed.as_secs_f64());
    }

    /// Messages and body bytes acknowledged.
    pub fn record_in(&self, messages: usize, bytes: usize) {
        self.messages_in.inc_by(messages as u64);
        self.bytes_in.inc_by(bytes as u64);
    }

    /// Messages and body bytes served.
    pub fn record_out(&self, messages: usize, bytes: usize) {
        self.messages_out.inc_by(messages as u64);
        self.bytes_out.inc_by(bytes as u64);
    }

    fn refresh(&self, source: &(impl GaugeSource + ?Sized)) {
        let m = source.raft_metrics();
        let sw = source.store_watermarks();
        let idx = |l: Option<raftmq_raft_log::types::LogId>| l.map_or(-1, |l| as_i64(l.index));
        let g = &self.gauges;
        let appended = idx(sw.log.appended);
        let flushed = idx(sw.log.flushed);
        let committed = idx(m.local_committed);
        let applied = idx(sw.applied);
        g.appended_index.set(appended);
        g.flushed_index.set(flushed);
        g.committed_index.set(committed);
        g.applied_index.set(applied);
        g.purged_index.set(idx(sw.log.last_purged));
        g.min_phys_offset.set(as_i64(sw.log.min_phys_offset.get()));
        g.max_phys_offset
            .set(as_i64(sw.log.appended_phys_end.get()));
        g.dispatched_phys_offset
            .set(as_i64(sw.dispatched_phys_end.get()));
        let cold = source.cold_chunk_reads();
        let seen = g
            .cold_chunk_reads_seen
            .swap(cold, std::sync::atomic::Ordering::Relaxed);
        g.cold_chunk_reads.inc_by(cold.saturating_sub(seen));
        g.flush_lag.set((appended - flushed).max(0));
        g.commit_lag.set((appended - committed).max(0));
        g.apply_lag.set((committed - applied).max(0));
        g.role.set(match m.state {
            ServerState::Learner => 0,
            ServerState::Follower => 1,
            ServerState::Candidate => 2,
            ServerState::Leader => 3,
            ServerState::Shutdown => 4,
        });
        g.term.set(as_i64(m.current_term));
        g.leader_id.set(m.current_leader.map_or(0, as_i64));
        if let Some((usage, full)) = source.disk_state() {
            g.disk_usage.set(usage);
            g.disk_full.set(i64::from(full));
        }
    }

    /// The Prometheus text of these metrics, the gauges refreshed now from `source`.
    pub fn render(&self, source: &(impl GaugeSource + ?Sized)) -> String {
        self.refresh(source);
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        out
    }
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

async fn metrics_handler<S>(State(source): State<Arc<S>>) -> impl IntoResponse
where
    S: GaugeSource + Send + Sync + 'static,
{
    let body = source.node_metrics().render(&*source);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
}

/// The `/metrics` HTTP app of `source` (a node's `NodeCore`).
pub fn router<S>(source: Arc<S>) -> axum::Router
where
    S: GaugeSource + Send + Sync + 'static,
{
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics_handler::<S>))
        .with_state(source)
}
