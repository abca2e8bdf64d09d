//! [`TestCluster`]: n raftmq nodes in this process, on 127.0.0.1 ports picked below the
//! kernel's ephemeral range ([`raftmq_cli::ports`]), with crash, restart, join and peer-link
//! faults; the one in-process harness of every multi-node test.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use raftmq_cli::ports::free_addr;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::MemberSpec;
use raftmq_node::config::NodeConfig;
use raftmq_node::network::fault::register_faults;
use raftmq_node::network::fault::unregister_faults;
use raftmq_node::network::fault::PeerFaults;
use raftmq_node::Node;
use raftmq_node::NodeHandle;
use raftmq_node::NodeListeners;
use raftmq_raft_log::Watermarks;
use tokio::time::Instant;

use crate::auth::TestAuth;
pub use crate::node_config::bind;
use crate::node_config::bind_optional;
use crate::node_config::listeners_of;
pub use crate::node_config::test_config;
pub use crate::node_config::unique_cluster_id;
pub use crate::node_config::FLUSH_INTERVAL_MS;
pub use crate::node_config::SEND_TIMEOUT_MS;
use crate::tls::TestTls;
pub use crate::Security;

mod clients;
mod faults;

/// A cluster of nodes `1..=n` in this process.
pub struct TestCluster {
    /// Holds every node's data dir.
    pub dir: tempfile::TempDir,
    /// Each node's config (index = id - 1); restarts reuse it.
    pub configs: Vec<NodeConfig>,
    /// Running nodes (None: down).
    pub nodes: Vec<Option<NodeHandle>>,
    /// Peer-link faults of this cluster.
    pub faults: Arc<PeerFaults>,
    /// Incremented per node on every restart (for [`crate::check::Observation::restarted`]).
    pub generations: Vec<Arc<AtomicU64>>,
    /// The cluster's CA and node certificates when it runs with TLS ([`Self::start_tls`],
    /// [`Security::Secure`]).
    pub tls: Option<TestTls>,
    /// The cluster key and root credential when it authenticates ([`Security::Secure`]);
    /// [`Self::client`] and [`Self::grpc`] sign as root.
    pub auth: Option<TestAuth>,
}

impl TestCluster {
    /// Starts `flush.len()` nodes bootstrapping one cluster, each with its flush policy;
    /// `tweak` may change each config before start (not its listen addresses: the ports are
    /// bound before).
    pub async fn start(
        flush: &[FlushPolicy],
        tweak: impl Fn(&mut NodeConfig),
    ) -> anyhow::Result<Self> {
        Self::start_with(flush, tweak, false, false).await
    }

    /// [`Self::start`] with TLS only: a CA and node certificates in the temp dir, every
    /// listener TLS, mutual TLS between the nodes; [`Self::client`] and [`Self::grpc`] trust
    /// the CA. No authentication.
    pub async fn start_tls(
        flush: &[FlushPolicy],
        tweak: impl Fn(&mut NodeConfig),
    ) -> anyhow::Result<Self> {
        Self::start_with(flush, tweak, true, false).await
    }

    /// [`Self::start`] guarded as `security` says: [`Security::Secure`] is TLS as
    /// [`Self::start_tls`] plus access-key authentication (root credential in the temp dir),
    /// what `raftmq cluster up --secure` deploys.
    pub async fn start_as(
        security: Security,
        flush: &[FlushPolicy],
        tweak: impl Fn(&mut NodeConfig),
    ) -> anyhow::Result<Self> {
        let secure = security == Security::Secure;
        Self::start_with(flush, tweak, secure, secure).await
    }

    async fn start_with(
        flush: &[FlushPolicy],
        tweak: impl Fn(&mut NodeConfig),
        tls: bool,
        auth: bool,
    ) -> anyhow::Result<Self> {
        crate::init_tracing();
        let dir = tempfile::tempdir()?;
        let cluster_id = unique_cluster_id("ct");
        let tls = match tls {
            true => Some(TestTls::new(dir.path(), &cluster_id)?),
            false => None,
        };
        let auth = match auth {
            true => Some(TestAuth::new()?),
            false => None,
        };
        let faults = register_faults(&cluster_id);
        // Ports outside the ephemeral range: a restarted node rebinds its old port, which a
        // peer connection's source port could otherwise have taken meanwhile.
        let mut listeners = Vec::new();
        for _ in flush {
            listeners.push((bind(free_addr()?).await?, bind(free_addr()?).await?));
        }
        let mut members = Vec::new();
        for (i, (r, c)) in listeners.iter().enumerate() {
            members.push(MemberSpec {
                id: i as u64 + 1,
                raft_addr: r.local_addr()?.to_string(),
                client_addr: c.local_addr()?.to_string(),
            });
        }
        let mut cluster = TestCluster {
            dir,
            configs: Vec::new(),
            nodes: Vec::new(),
            faults,
            generations: Vec::new(),
            tls,
            auth,
        };
        for (i, (r, c)) in listeners.into_iter().enumerate() {
            let id = i as u64 + 1;
            let data = cluster.dir.path().join(format!("node-{id}"));
            let mut cfg = test_config(id, &cluster_id, data, flush[i]);
            cfg.raft_listen_addr = r.local_addr()?;
            cfg.client_listen_addr = c.local_addr()?;
            cfg.rocketmq_listen_addr = Some(free_addr()?);
            cfg.initial_members = members.clone();
            if let Some(t) = &cluster.tls {
                t.configure(&mut cfg)?;
            }
            if let Some(a) = &cluster.auth {
                a.apply(&mut cfg);
            }
            tweak(&mut cfg);
            cluster.configs.push(cfg);
            cluster.nodes.push(None);
            cluster.generations.push(Arc::default());
            let cfg = &cluster.configs[i];
            let l = NodeListeners {
                raft: r,
                client: c,
                metrics: bind_optional(cfg.metrics_addr).await?,
                rocketmq: bind_optional(cfg.rocketmq_listen_addr).await?,
            };
            let node = Node::start_with_listeners(cfg.clone(), l).await?;
            cluster.nodes[i] = Some(node);
        }
        Ok(cluster)
    }

    /// Node ids `1..=n`.
    pub fn ids(&self) -> Vec<u64> {
        (1..=self.configs.len() as u64).collect()
    }

    /// Running node `id` (panics if it is down: a test bug).
    pub fn node(&self, id: u64) -> &NodeHandle {
        self.nodes[id as usize - 1]
            .as_ref()
            .expect("node is running")
    }

    /// Every message of `topic` stored on running node `id`, queue by queue in offset order,
    /// read from its store directly.
    pub fn stored_messages(&self, id: u64, topic: &str) -> Vec<raftmq_store::StoredMessage> {
        let store = self.node(id).store();
        let queues = store.topic(topic).expect("topic exists").read_queue_count;
        let mut out = Vec::new();
        for q in 0..queues {
            let mut offset = raftmq_store::types::QueueOffset::ZERO;
            loop {
                let r = store
                    .pull(&raftmq_store::PullRequest {
                        topic: topic.into(),
                        queue_id: raftmq_store::types::QueueId::new(q),
                        offset,
                        max_count: 64,
                        max_bytes: 1 << 20,
                        tag_expr: "*".into(),
                    })
                    .expect("pull");
                if r.messages.is_empty() {
                    break;
                }
                out.extend(r.messages);
                offset = r.next_offset;
            }
        }
        out
    }

    /// Whether node `id` is running.
    pub fn is_up(&self, id: u64) -> bool {
        self.nodes[id as usize - 1].is_some()
    }

    /// The leader the running nodes (all of `among`, or all running) agree on, waiting up to
    /// `timeout`.
    pub async fn wait_leader_among(&self, among: &[u64], timeout: Duration) -> anyhow::Result<u64> {
        let end = Instant::now() + timeout;
        loop {
            let views: Vec<Option<u64>> = among
                .iter()
                .filter(|&&i| self.is_up(i))
                .map(|&i| self.node(i).core().leader().0)
                .collect();
            if let Some(Some(l)) = views.first() {
                let agreed = views.iter().all(|x| *x == Some(*l));
                if agreed && among.contains(l) && self.is_up(*l) && self.node(*l).core().is_leader()
                {
                    return Ok(*l);
                }
            }
            if Instant::now() > end {
                anyhow::bail!("no agreed leader among {among:?} within {timeout:?}: {views:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The leader every running node agrees on (10 s).
    pub async fn wait_leader(&self) -> anyhow::Result<u64> {
        let up: Vec<u64> = self.ids().into_iter().filter(|&i| self.is_up(i)).collect();
        self.wait_leader_among(&up, Duration::from_secs(10)).await
    }

    /// Waits for a leader; returns it and a follower (the lowest other running id).
    pub async fn leader_and_follower(&self) -> anyhow::Result<(u64, u64)> {
        let leader = self.wait_leader().await?;
        let follower = (self.ids().into_iter())
            .find(|&i| i != leader && self.is_up(i))
            .ok_or_else(|| anyhow::anyhow!("no running follower"))?;
        Ok((leader, follower))
    }

    /// Waits until every running node applied everything the leader holds (converged).
    ///
    /// The target is the leader's last log index, not its committed index: a leader elected
    /// after a restart starts from the committed id it recovered, which a `sync` node writes
    /// behind (up to 100 ms), so until it commits an entry of its own term its committed
    /// index can lie below what the cluster had committed before the crash.
    pub async fn wait_converged(&self, timeout: Duration) -> anyhow::Result<()> {
        let leader = self.wait_leader().await?;
        let end = Instant::now() + timeout;
        // The leader's log as the wait starts: under load its end moves on with every send,
        // so a target read again each round might never be caught at one instant.
        let target = self.node(leader).core().raft_metrics().last_log_index;
        loop {
            let mut behind = Vec::new();
            for n in self.nodes.iter().flatten() {
                let applied = n.store().watermarks().applied.map(|l| l.index);
                if applied < target {
                    behind.push((n.node_id(), applied));
                }
            }
            if behind.is_empty() {
                return Ok(());
            }
            if Instant::now() > end {
                anyhow::bail!("not converged to {target:?} within {timeout:?}: {behind:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (up to 10 s) until every running node applied at least log index `index`.
    pub async fn wait_applied(&self, index: u64) -> anyhow::Result<()> {
        let end = Instant::now() + Duration::from_secs(10);
        for n in self.nodes.iter().flatten() {
            loop {
                let applied = n.store().watermarks().applied.map(|l| l.index);
                if applied >= Some(index) {
                    break;
                }
                anyhow::ensure!(
                    Instant::now() < end,
                    "node {} applied {applied:?} < {index}",
                    n.node_id()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }

    /// Stops node `id` gracefully.
    pub async fn stop(&mut self, id: u64) -> anyhow::Result<()> {
        let n = self.nodes[id as usize - 1].take().expect("node is running");
        n.shutdown().await
    }

    /// Crashes node `id` (no hand-over, no close, no final flush; like kill -9 of the process:
    /// written bytes stay in the page cache) and returns its CommitLog's positions at the
    /// moment of the crash (read after the log stopped).
    pub async fn kill(&mut self, id: u64) -> Watermarks {
        let n = self.nodes[id as usize - 1].take().expect("node is running");
        n.kill().await
    }

    /// Crashes node `id` and returns its CommitLog's durable end at the moment of the crash
    /// (`flushed_phys_end`, read after the log stopped so nothing flushed later is missed), as
    /// the bare byte position the power-loss helpers cut the segment files at.
    pub async fn kill_reporting_flushed(&mut self, id: u64) -> u64 {
        self.kill(id).await.flushed_phys_end.get()
    }

    /// Opens the CommitLog of the stopped node `id` as the node would (recovery included),
    /// closes it again and returns its positions.
    pub fn reopen_log(&self, id: u64) -> anyhow::Result<Watermarks> {
        let config = &self.configs[id as usize - 1];
        let log = raftmq_store::LogStore::open(&config.data_dir, config.log.clone())?;
        let wm = log.watermarks();
        log.close()?;
        Ok(wm)
    }

    /// Restarts node `id` on its data dir and addresses.
    pub async fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        // Before it serves: a status answer from the new incarnation then sees the bump.
        self.generations[id as usize - 1].fetch_add(1, Ordering::Release);
        let node = self.try_start(id).await?;
        self.nodes[id as usize - 1] = Some(node);
        Ok(())
    }

    /// Starts node `id` from its config and returns the handle or the start error (a test of
    /// a refused start inspects the error).
    pub async fn try_start(&self, id: u64) -> anyhow::Result<NodeHandle> {
        assert!(!self.is_up(id), "node {id} is already running");
        let cfg = self.configs[id as usize - 1].clone();
        let l = listeners_of(&cfg).await?;
        Node::start_with_listeners(cfg, l).await
    }

    /// Starts a new node (id `n + 1`) that joins the cluster through node `via`'s client
    /// address (it becomes a learner; promote it with `change_membership`). Returns its id.
    pub async fn add_node(&mut self, flush: FlushPolicy, via: u64) -> anyhow::Result<u64> {
        self.add_node_with(flush, via, |_| {}).await
    }

    /// [`Self::add_node`], with `tweak` changing the new node's config before it starts.
    pub async fn add_node_with(
        &mut self,
        flush: FlushPolicy,
        via: u64,
        tweak: impl FnOnce(&mut NodeConfig),
    ) -> anyhow::Result<u64> {
        let id = self.configs.len() as u64 + 1;
        let data = self.dir.path().join(format!("node-{id}"));
        let mut cfg = test_config(id, &self.configs[0].cluster_id, data, flush);
        cfg.raft_listen_addr = free_addr()?;
        cfg.client_listen_addr = free_addr()?;
        cfg.join_addr = Some(self.client_addr(via));
        if let Some(t) = &self.tls {
            t.configure(&mut cfg)?;
        }
        if let Some(a) = &self.auth {
            a.apply(&mut cfg);
        }
        tweak(&mut cfg);
        let l = listeners_of(&cfg).await?;
        let node = Node::start_with_listeners(cfg.clone(), l).await?;
        self.configs.push(cfg);
        self.nodes.push(Some(node));
        self.generations.push(Arc::default());
        Ok(id)
    }

    /// Data dir of node `id`.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.configs[id as usize - 1].data_dir.clone()
    }

    /// Stops every running node gracefully and forgets the fault table.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.heal();
        for id in self.ids() {
            if self.is_up(id) {
                self.stop(id).await?;
            }
        }
        unregister_faults(&self.configs[0].cluster_id);
        Ok(())
    }
}

/// Small helpers on a node handle.
pub trait NodeHandleExt {
    /// The committed index Raft reports on this node.
    fn raft_metrics_committed(&self) -> Option<u64>;
}

impl NodeHandleExt for NodeHandle {
    fn raft_metrics_committed(&self) -> Option<u64> {
        let m = self.core().raft_metrics();
        m.cluster_committed.or(m.local_committed).map(|l| l.index)
    }
}
