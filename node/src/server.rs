//! [`Node`]: assembles and runs one raftmq node (CommitLog, state machine, Raft, the peer and
//! client gRPC services, `/metrics`, retention), in-process; [`NodeHandle`] stops it.
//!
//! Start: bind the listeners (port 0 allowed; the bound address is advertised when no
//! advertised address is configured) → load the TLS files, if configured (a bad one stops the
//! start; every gRPC listener then accepts through [`crate::tls::incoming`]) → open the
//! LogStore (recovery) → open the Store (recovery, abort marker) → `Raft::new` → serve (the
//! servers of every listener, `crate::serve`) → bootstrap or join ([`crate::bootstrap`]) →
//! retention driver.
//!
//! Graceful stop ([`NodeHandle::shutdown`]): refuse new writes (UNAVAILABLE, SHUTTING_DOWN,
//! not applied) → if leader, transfer leadership to the most caught-up voter (bounded wait)
//! (meanwhile a write reaching this node waits for the new leader and is answered NOT_LEADER
//! with its address, so the client goes there at once; entries proposed before the stop commit
//! on the new leader or are answered with an unknown outcome) → `raft.shutdown` → stop the
//! servers → `Store::close` (flush, clear the abort marker) →
//! `LogStore::close` (flush) → wait until every task and thread let go of the log, so that a
//! restart in this process finds its files free.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::Watermarks;
use raftmq_store::LogStore;
use raftmq_store::Raft;
use raftmq_store::SnapshotFile;
use raftmq_store::Store;
use raftmq_store::TypeConfig;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::NodeConfig;
use crate::core::NodeCore;
use crate::metrics::NodeMetrics;
use crate::network::PeerNetworkFactory;
use crate::tls::congestion;
use crate::tls::congestion::DEFAULT_LOOPBACK_CONGESTION_CONTROL;
use crate::tls::LoopbackCongestion;
use crate::tls::TlsState;

/// Longest wait of `kill` and `shutdown` for the node's log to be released.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// How often the retention driver runs.
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(10);

/// Where a running node listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddrs {
    /// Peer (Raft) gRPC service.
    pub raft: SocketAddr,
    /// Client gRPC service.
    pub client: SocketAddr,
    /// `/metrics` HTTP endpoint, if enabled.
    pub metrics: Option<SocketAddr>,
    /// RocketMQ 5 gRPC service, if enabled.
    pub rocketmq: Option<SocketAddr>,
}

/// Listeners bound before the node starts (tests bind port 0 first to learn the addresses).
pub struct NodeListeners {
    /// For the peer service.
    pub raft: TcpListener,
    /// For the client service.
    pub client: TcpListener,
    /// For `/metrics` (None: disabled).
    pub metrics: Option<TcpListener>,
    /// For the RocketMQ service (None: disabled).
    pub rocketmq: Option<TcpListener>,
}

impl NodeListeners {
    /// Binds the addresses of `config`.
    pub async fn bind(config: &NodeConfig) -> anyhow::Result<Self> {
        let bind = |a: SocketAddr, what: &'static str| async move {
            TcpListener::bind(a)
                .await
                .with_context(|| format!("cannot bind {what} {a}"))
        };
        Ok(Self {
            raft: bind(config.raft_listen_addr, "raft-listen-addr").await?,
            client: bind(config.client_listen_addr, "client-listen-addr").await?,
            metrics: match config.metrics_addr {
                Some(a) => Some(bind(a, "metrics-addr").await?),
                None => None,
            },
            rocketmq: match config.rocketmq_listen_addr {
                Some(a) => Some(bind(a, "rocketmq-listen-addr").await?),
                None => None,
            },
        })
    }
}

/// Starts nodes.
pub struct Node;

/// A running node.
pub struct NodeHandle {
    core: Arc<NodeCore>,
    log: LogStore,
    addrs: NodeAddrs,
    stop_tx: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Node {
    /// Binds the configured addresses and starts the node.
    pub async fn start(config: NodeConfig) -> anyhow::Result<NodeHandle> {
        let listeners = NodeListeners::bind(&config).await?;
        Self::start_with_listeners(config, listeners).await
    }

    /// Starts the node on already bound listeners.
    pub async fn start_with_listeners(
        mut config: NodeConfig,
        listeners: NodeListeners,
    ) -> anyhow::Result<NodeHandle> {
        config.validate()?;
        let addrs = NodeAddrs {
            raft: listeners.raft.local_addr()?,
            client: listeners.client.local_addr()?,
            metrics: match &listeners.metrics {
                Some(l) => Some(l.local_addr()?),
                None => None,
            },
            rocketmq: match &listeners.rocketmq {
                Some(l) => Some(l.local_addr()?),
                None => None,
            },
        };
        if config.rocketmq_advertised_addr.is_none() {
            config.rocketmq_advertised_addr = addrs.rocketmq.map(|a| a.to_string());
        }
        config
            .raft_advertised_addr
            .get_or_insert_with(|| addrs.raft.to_string());
        config
            .client_advertised_addr
            .get_or_insert_with(|| addrs.client.to_string());
        let span = tracing::info_span!("node", node_id = config.node_id);
        let tls = match config.tls.files() {
            Some(files) => Some(
                span.in_scope(|| TlsState::load(files))
                    .context("cannot load the TLS files")?,
            ),
            None => None,
        };
        let (core, log) = open(config, tls).instrument(span.clone()).await?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let servers = crate::serve::serve(&core, listeners, stop_rx.clone(), &span);
        let mut tasks = vec![tokio::spawn(
            crate::watchers::log_role_changes(core.clone(), stop_rx.clone())
                .instrument(span.clone()),
        )];
        tasks.push(tokio::spawn(
            crate::watchers::kick_stalled_replication(core.clone(), stop_rx.clone())
                .instrument(span.clone()),
        ));
        tasks.push(tokio::spawn(
            crate::check_quorum::watch(
                core.raft.clone(),
                core.node_id,
                Duration::from_millis(core.config.election_timeout_max_ms),
                Duration::from_millis(core.config.heartbeat_ms),
                core.quorum.clone(),
                stop_rx.clone(),
            )
            .instrument(span.clone()),
        ));
        tasks.push(tokio::spawn(
            crate::retention::run(core.clone(), RETENTION_INTERVAL, stop_rx.clone())
                .instrument(span.clone()),
        ));
        tasks.push(tokio::spawn(
            crate::disk_guard::watch_voters(core.clone(), stop_rx.clone()).instrument(span.clone()),
        ));
        if let Some(tls) = core.tls.clone() {
            let poll = Duration::from_millis(core.config.tls.tls_reload_interval_ms);
            tasks.push(tokio::spawn(
                crate::tls::watch(tls, poll, stop_rx.clone()).instrument(span.clone()),
            ));
        }
        if log.lost_commit_floor().is_some() {
            tasks.push(tokio::spawn(
                crate::watchers::resume_elections_when_caught_up(
                    core.clone(),
                    log.lost_commit_floor_reader(),
                    stop_rx.clone(),
                )
                .instrument(span.clone()),
            ));
        }
        if let Some(t) = crate::bootstrap::bootstrap(&core, stop_rx)
            .instrument(span.clone())
            .await?
        {
            tasks.push(t);
        }
        tracing::info!(
            parent: &span,
            raft_addr = %addrs.raft,
            client_addr = %addrs.client,
            metrics_addr = %addrs.metrics.map_or_else(|| "off".to_string(), |a| a.to_string()),
            rocketmq_addr = %addrs.rocketmq.map_or_else(|| "off".to_string(), |a| a.to_string()),
            "node started"
        );
        Ok(NodeHandle {
            core,
            log,
            addrs,
            stop_tx,
            servers,
            tasks,
        })
    }
}

async fn open(
    config: NodeConfig,
    tls: Option<Arc<TlsState>>,
) -> anyhow::Result<(Arc<NodeCore>, LogStore)> {
    let node_id = config.node_id;
    let auth = crate::auth::Authenticator::from_config(&config.auth)?;
    let congestion = loopback_congestion(&config.tls.loopback_congestion_control)?;
    let dir = config.data_dir.clone();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create data-dir {}", dir.display()))?;
    let log = LogStore::open(&dir, config.log.clone())
        .with_context(|| format!("cannot open the commitlog in {}", dir.display()))?;
    log.set_node_id(node_id);
    let (store, sm) = raftmq_store::open(&dir, config.store.clone(), log.clone())
        .with_context(|| format!("cannot open the store in {}", dir.display()))?;
    let mut raft_config = config.raft_config()?;
    if let Some(floor) = log.lost_commit_floor() {
        // It lacks committed entries: standing for election could let another such node
        // elect it (see `PeerService`'s vote guard). Elections resume once it caught up.
        tracing::warn!(lost_commit_floor = %floor, last_log_id = ?log.watermarks().appended, "this node lost committed entries in a crash; it will not stand for election until it has them again from a peer");
        raft_config.enable_elect = false;
    }
    let raft_config = Arc::new(raft_config);
    let mut peer_opts = config.peer_network_options();
    peer_opts.tls = tls.clone();
    peer_opts.congestion = congestion.clone();
    if config.log.flush == raftmq_raft_log::FlushPolicy::Async {
        // Before Raft starts: this node's commit index leaves it only through the gate.
        peer_opts.commit_gate = Some(log.commit_gate());
    }
    let replication_kick = peer_opts.kick.clone();
    let network = PeerNetworkFactory::<TypeConfig, SnapshotFile>::new(node_id, peer_opts);
    let raft = Raft::new(node_id, raft_config, network, log.clone(), sm)
        .await
        .context("cannot start raft")?;
    let long_polls = crate::long_poll::LongPolls::new(config.max_long_poll_waiters);
    let proposals = crate::pipeline::coalesce::Coalescer::new(
        config.max_group_proposals as usize,
        config.store.limits.max_batch_messages as usize,
        usize::try_from(config.store.limits.max_batch_bytes).unwrap_or(usize::MAX),
    );
    let core = Arc::new(NodeCore {
        node_id,
        config,
        raft,
        store,
        metrics: Arc::new(NodeMetrics::new()),
        shutting_down: Default::default(),
        handover_to: Default::default(),
        quorum: Default::default(),
        round_robin: Default::default(),
        channels: Default::default(),
        replication_kick,
        disk: Default::default(),
        long_polls,
        auth,
        tls,
        congestion,
        proposals,
    });
    Ok((core, log))
}

/// `loopback-congestion-control`, tried once: a name this host lacks or does not allow is an
/// error, except the default's, which only costs the loopback connections their pacing.
fn loopback_congestion(value: &str) -> anyhow::Result<LoopbackCongestion> {
    let congestion = LoopbackCongestion::new(value);
    match congestion.probe() {
        Ok(()) => Ok(congestion),
        Err(e) if value == DEFAULT_LOOPBACK_CONGESTION_CONTROL => {
            tracing::warn!(error = %e, "loopback-congestion-control (default {value:?}) is not available here; connections on this host keep the host's congestion control");
            Ok(LoopbackCongestion::new(congestion::SYSTEM))
        }
        Err(e) => Err(anyhow::anyhow!(
            "loopback-congestion-control = {value:?} cannot be used: {e}; name one of the \
             host's net.ipv4.tcp_allowed_congestion_control, or \"system\""
        )),
    }
}

impl NodeHandle {
    /// Where the node listens.
    pub fn addrs(&self) -> &NodeAddrs {
        &self.addrs
    }

    /// The node id.
    pub fn node_id(&self) -> NodeId {
        self.core.node_id
    }

    /// The Raft handle.
    pub fn raft(&self) -> &Raft {
        &self.core.raft
    }

    /// The store's read handle.
    pub fn store(&self) -> &Store {
        &self.core.store
    }

    /// The CommitLog.
    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// The shared node state (config, metrics, ...).
    pub fn core(&self) -> &Arc<NodeCore> {
        &self.core
    }

    /// The effective config (advertised addresses filled in).
    pub fn config(&self) -> &NodeConfig {
        &self.core.config
    }

    /// Resolves when Raft stopped on a fatal error (storage I/O error, panic), with the error.
    /// The node then refuses writes; the caller should shut it down.
    ///
    /// Waits on the server metrics, which change with the role, the leader or the membership,
    /// not on the full metrics, which openraft sends on every turn of its core loop (several
    /// per message): they woke this waiter, the runtime's main thread, that often. The core
    /// sets its running state to the error and then drops its senders, which ends the wait.
    pub async fn failed(&self) -> String {
        use openraft::async_runtime::WatchReceiver;
        let mut rx = self.core.raft.server_metrics();
        loop {
            let state = self.core.running_state();
            if let Err(e) = state {
                return e.to_string();
            }
            if rx.changed().await.is_err() {
                let state = self.core.running_state();
                return state.map_or_else(|e| e.to_string(), |()| "raft stopped".into());
            }
        }
    }

    /// Graceful shutdown (see the module docs).
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let core = self.core.clone();
        let node_id = core.node_id;
        let leading = core.is_leader();
        tracing::info!(node_id, leading, "shutting down");
        if leading {
            crate::handover::hand_over_leadership(&core).await;
        } else {
            core.shutting_down.store(true, Ordering::Release);
        }
        self.stop_tasks().await;
        core.store.close().context("closing the store")?;
        self.log.close().context("closing the commitlog")?;
        drop(core);
        self.release().await;
        tracing::info!(node_id, "shut down cleanly");
        Ok(())
    }

    /// Stops the node like a crash: no leader hand-over, no store close (the abort marker
    /// stays) and no final flush of the log; what an `async` node had not flushed is still in
    /// the page cache, as after `kill -9`. Returns the log's positions at the crash (read after
    /// the log stopped).
    pub async fn kill(mut self) -> Watermarks {
        self.core.shutting_down.store(true, Ordering::Release);
        self.log.halt_without_flush();
        self.stop_tasks().await;
        let at_crash = self.log.watermarks();
        self.release().await;
        at_crash
    }

    /// Drops the handle and waits (up to [`RELEASE_WAIT`]) until the tasks and threads that
    /// held the node's log are gone too, so that the node can start again in this process: a
    /// restart on a current-thread runtime would otherwise block in the meta db's lock retry
    /// while the tasks that still hold it (requests' handlers and tonic's connection tasks,
    /// ending) cannot run.
    async fn release(self) {
        let released = self.log.released_probe();
        let node_id = self.core.node_id;
        drop(self);
        let until = tokio::time::Instant::now() + RELEASE_WAIT;
        while !released() {
            if tokio::time::Instant::now() >= until {
                tracing::warn!(node_id, "the node's log is still held after it stopped");
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn stop_tasks(&mut self) {
        if let Err(e) = self.core.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown failed");
        }
        let _ = self.stop_tx.send(true);
        for t in self.tasks.drain(..) {
            t.abort();
        }
        for mut s in self.servers.drain(..) {
            if tokio::time::timeout(Duration::from_secs(1), &mut s)
                .await
                .is_err()
            {
                s.abort();
            }
        }
    }
}
