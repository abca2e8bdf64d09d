//! The life cycle of a local cluster: initialise a directory (configs + manifest), start,
//! stop, kill and restart node processes, add a node.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::lock::ManifestLock;
use super::manifest::Manifest;
use super::manifest::NodeEntry;
use super::manifest::MANIFEST_FILE;
use super::node_config::addrs_from_base;
use super::node_config::flush_policies;
use super::node_config::free_addrs;
use super::node_config::ClusterSpec;
use super::node_config::NodeAddrs;
use super::node_config::NodeSetting;
use super::node_config::NodeToml;
use super::process;

/// How a new local cluster is laid out.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// Number of nodes.
    pub nodes: usize,
    /// Cluster directory.
    pub dir: PathBuf,
    /// Base port (0 = free ports).
    pub base_port: u16,
    /// `--flush` spec.
    pub flush: String,
    /// Segment size.
    pub segment_bytes: u64,
    /// Cluster id.
    pub cluster_id: String,
    /// `--set KEY=VALUE` node settings.
    pub settings: Vec<NodeSetting>,
    /// `--secure`: a cluster CA and a certificate per node; every node serves TLS.
    pub secure: bool,
}

/// An absolute version of `dir` (created if missing).
pub fn absolute_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))
}

fn node_addrs(base_port: u16, id: u64) -> anyhow::Result<NodeAddrs> {
    if base_port == 0 {
        free_addrs(id)
    } else {
        addrs_from_base(base_port, id)
    }
}

fn write_node(
    dir: &Path,
    cluster: &ClusterSpec,
    me: &NodeAddrs,
    members: &[NodeAddrs],
    join: Option<String>,
    flush: &str,
    ca: Option<&super::certs::ClusterCa>,
) -> anyhow::Result<NodeEntry> {
    let node_dir = dir.join(format!("node-{}", me.id));
    std::fs::create_dir_all(&node_dir)
        .with_context(|| format!("cannot create {}", node_dir.display()))?;
    let cfg = NodeToml::new(cluster, me, members, join, node_dir.clone(), flush)?;
    let config = node_dir.join("node.toml");
    let mut text = cfg.to_toml()?;
    if let Some(ca) = ca {
        let addrs = [me.raft.as_str(), me.client.as_str(), me.rocketmq.as_str()];
        text.push_str(&super::certs::node_tls_settings(dir, ca, me.id, &addrs)?);
    }
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    Ok(NodeEntry {
        id: me.id,
        raft_addr: me.raft.clone(),
        client_addr: me.client.clone(),
        metrics_addr: me.metrics.clone(),
        rocketmq_addr: me.rocketmq.clone(),
        flush_policy: flush.to_string(),
        log: node_dir.join("node.log"),
        config,
        node_dir,
        pid: None,
    })
}

/// `opts.settings`, plus `worker-threads` = the machine's cores / `nodes` (at least 1) unless
/// they set it: the nodes of a local cluster share one machine, and with more runtime threads
/// than cores they preempt each other (see `raftmq-node --worker-threads`). Kept in the
/// manifest with the other settings, so nodes added later get the same.
fn with_worker_threads(settings: &[NodeSetting], nodes: usize) -> anyhow::Result<Vec<NodeSetting>> {
    let mut out = settings.to_vec();
    if !settings.iter().any(|s| s.key == "worker-threads") {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let each = (cores / nodes.max(1)).max(1);
        out.push(
            format!("worker-threads={each}")
                .parse()
                .map_err(anyhow::Error::msg)?,
        );
    }
    Ok(out)
}

/// Writes one config per node and the manifest into a new cluster directory.
pub fn init(opts: &InitOptions) -> anyhow::Result<Manifest> {
    anyhow::ensure!(
        (1..=9).contains(&opts.nodes),
        "--nodes must be 1..=9, got {}",
        opts.nodes
    );
    let dir = absolute_dir(&opts.dir)?;
    let taken = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("node-"));
    anyhow::ensure!(
        !taken,
        "{} holds node directories but no {MANIFEST_FILE}; remove it or pick another --dir",
        dir.display()
    );
    let flush = flush_policies(&opts.flush, opts.nodes)?;
    let ids: Vec<u64> = (1..=opts.nodes as u64).collect();
    let members = ids
        .iter()
        .map(|&id| node_addrs(opts.base_port, id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings = with_worker_threads(&opts.settings, opts.nodes)?;
    let cluster = ClusterSpec {
        cluster_id: opts.cluster_id.clone(),
        segment_bytes: opts.segment_bytes,
        settings: settings.clone(),
    };
    let ca = match opts.secure {
        true => Some(super::certs::ClusterCa::generate(&opts.cluster_id)?),
        false => None,
    };
    let tls_ca = match &ca {
        Some(ca) => Some(super::certs::write_ca(&dir, ca)?),
        None => None,
    };
    let mut nodes = Vec::new();
    for (me, flush) in members.iter().zip(&flush) {
        nodes.push(write_node(
            &dir,
            &cluster,
            me,
            &members,
            None,
            flush,
            ca.as_ref(),
        )?);
    }
    let m = Manifest {
        cluster_id: opts.cluster_id.clone(),
        dir,
        base_port: opts.base_port,
        segment_bytes: opts.segment_bytes,
        node_settings: settings.iter().map(|s| s.text.clone()).collect(),
        nodes,
        access_key: None,
        secret_file: None,
        tls_ca,
    };
    m.save()?;
    Ok(m)
}

/// Starts node `id` unless it runs already; records its pid. Returns whether it was started.
/// The manifest stays locked from the check to the recorded pid, so two commands never
/// start the same node twice nor lose each other's pids.
pub fn start(m: &mut Manifest, id: u64, bin: &Path) -> anyhow::Result<bool> {
    m.update(|m| {
        let node = m.node_mut(id)?;
        if node.pid.is_some_and(process::is_running) {
            return Ok(false);
        }
        wait_ports_free(node, Duration::from_secs(15));
        let pid = process::spawn_node(bin, &node.config, &node.log)?;
        node.pid = Some(pid);
        Ok(true)
    })
}

/// Waits until nothing listens on the node's addresses any more. A SIGKILLed process is
/// reported gone (zombie) while its other threads may still hold its sockets, so a restart
/// right after a kill could fail with "address in use".
fn wait_ports_free(node: &NodeEntry, timeout: Duration) {
    let addrs: Vec<std::net::SocketAddr> = [
        &node.raft_addr,
        &node.client_addr,
        &node.metrics_addr,
        &node.rocketmq_addr,
    ]
    .iter()
    .filter_map(|a| a.parse().ok())
    .collect();
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if addrs.iter().all(|a| std::net::TcpListener::bind(a).is_ok()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts every stopped node, then checks none exited at once (bad config, port taken).
pub fn start_all(m: &mut Manifest, bin: &Path) -> anyhow::Result<Vec<u64>> {
    let mut started = Vec::new();
    for id in m.ids() {
        if start(m, id, bin)? {
            started.push(id);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for &id in &started {
        let n = m.node(id)?;
        if !n.pid.is_some_and(process::is_running) {
            anyhow::bail!(
                "node {id} exited at start; last lines of {}:\n{}",
                n.log.display(),
                process::log_tail(&n.log, 5)
            );
        }
    }
    Ok(started)
}

/// How to stop a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL, no cleanup (a crash).
    Kill,
    /// SIGTERM (graceful), SIGKILL after the grace period.
    Term,
}

/// Stops node `id` and clears its pid. Returns false when it was not running. The manifest is
/// locked only to read the pid and to clear it (if no other command recorded a new one
/// meanwhile), not while the node shuts down.
pub fn stop(m: &mut Manifest, id: u64, how: Stop) -> anyhow::Result<bool> {
    let pid = m.update(|m| {
        let node = m.node_mut(id)?;
        node.pid = node.pid.filter(|&p| process::is_running(p));
        Ok(node.pid)
    })?;
    let Some(pid) = pid else {
        return Ok(false);
    };
    match how {
        Stop::Kill => {
            process::signal(pid, libc::SIGKILL)?;
            anyhow::ensure!(
                process::wait_exit(pid, Duration::from_secs(10)),
                "node {id} (pid {pid}) survived SIGKILL"
            );
        }
        Stop::Term => {
            if process::terminate(pid, Duration::from_secs(15))? {
                eprintln!("node {id} did not stop within 15 s of SIGTERM; killed it");
            }
        }
    }
    m.update(|m| {
        let node = m.node_mut(id)?;
        if node.pid == Some(pid) {
            node.pid = None;
        }
        Ok(())
    })?;
    Ok(true)
}

/// The nodes of `m` that run right now, with their pids: the manifest's pid when it is alive,
/// and any `raftmq-node` process started with the node's config file (found in `/proc`, so a
/// node whose pid the manifest lost is found too).
pub fn running_nodes(m: &Manifest) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    for n in &m.nodes {
        let mut pids: Vec<u32> = n
            .pid
            .filter(|&p| process::is_running(p))
            .into_iter()
            .collect();
        for p in process::node_pids_with_config(&n.config) {
            if !pids.contains(&p) {
                pids.push(p);
            }
        }
        out.extend(pids.into_iter().map(|p| (n.id, p)));
    }
    out
}

/// Deletes the cluster directory, unless a node of it still runs (see [`running_nodes`]):
/// then it refuses, naming the node and its pid, and deletes nothing.
pub fn purge(m: &Manifest) -> anyhow::Result<()> {
    let _lock = ManifestLock::acquire(&m.dir)?;
    let path = m.path();
    let fresh = if path.exists() {
        Manifest::load(&path)?
    } else {
        m.clone()
    };
    {
        let m = &fresh;
        let running = running_nodes(m);
        if !running.is_empty() {
            let list: Vec<String> = running
                .iter()
                .map(|(id, pid)| format!("node {id} (pid {pid})"))
                .collect();
            anyhow::bail!(
                "not purging {}: {} still running; stop {} (e.g. `kill {}`) and run `raftmq \
                 cluster down --purge` again",
                m.dir.display(),
                list.join(", "),
                if running.len() == 1 { "it" } else { "them" },
                running
                    .iter()
                    .map(|(_, p)| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    // The lock file goes with the directory; the lock is released when `_lock` drops.
    std::fs::remove_dir_all(&fresh.dir)
        .with_context(|| format!("cannot delete {}", fresh.dir.display()))
}

/// Configures a node with a new id (above every id and every `node-N` directory) to join through `leader_client_addr`, and starts it.
pub fn add_node(
    m: &mut Manifest,
    bin: &Path,
    leader_client_addr: &str,
    flush: &str,
) -> anyhow::Result<NodeEntry> {
    // A removed node's directory keeps its old Raft state: never reuse its id.
    let mut id = m.ids().into_iter().max().unwrap_or(0) + 1;
    while m.dir.join(format!("node-{id}")).exists() {
        id += 1;
    }
    let me = node_addrs(m.base_port, id)?;
    let settings = m
        .node_settings
        .iter()
        .map(|s| s.parse::<NodeSetting>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("node-settings in {}: {e}", m.path().display()))?;
    let cluster = ClusterSpec {
        cluster_id: m.cluster_id.clone(),
        segment_bytes: m.segment_bytes,
        settings,
    };
    // A secure cluster's new node gets its certificate from the same CA.
    let ca = match m.tls_ca {
        Some(_) => Some(super::certs::load_ca(&m.dir, &m.cluster_id)?),
        None => None,
    };
    let entry = write_node(
        &m.dir.clone(),
        &cluster,
        &me,
        &[],
        Some(leader_client_addr.to_string()),
        flush,
        ca.as_ref(),
    )?;
    m.update(|m| {
        anyhow::ensure!(
            m.node(id).is_err(),
            "node {id} was added by another command meanwhile; try again"
        );
        m.nodes.push(entry.clone());
        Ok(())
    })?;
    start(m, id, bin)?;
    Ok(m.node(id)?.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_writes_configs_and_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = InitOptions {
            nodes: 3,
            dir: tmp.path().join("c"),
            base_port: 0,
            flush: "sync,async,async".into(),
            segment_bytes: 1 << 20,
            cluster_id: "t".into(),
            settings: vec!["disk-reject-ratio=1.0".parse().unwrap()],
            secure: false,
        };
        let m = init(&opts).unwrap();
        assert_eq!(m.ids(), vec![1, 2, 3]);
        assert_eq!(m.nodes[2].flush_policy, "async");
        let cfg = std::fs::read_to_string(&m.nodes[0].config).unwrap();
        assert!(cfg.contains("node-id = 1"), "{cfg}");
        assert!(cfg.contains(&m.nodes[2].client_addr), "{cfg}");
        assert!(cfg.contains("disk-reject-ratio = 1.0"), "{cfg}");
        // The machine's cores split between the three nodes, unless --set gives the count.
        let cores = std::thread::available_parallelism().unwrap().get();
        let each = format!("worker-threads = {}", (cores / 3).max(1));
        assert!(cfg.contains(&each), "{cfg}");
        assert!(m
            .node_settings
            .iter()
            .any(|s| s.starts_with("worker-threads=")));
        let set = vec!["worker-threads=5".parse().unwrap()];
        assert_eq!(with_worker_threads(&set, 3).unwrap(), set);
        assert_eq!(Manifest::load(&m.path()).unwrap(), m);
        // A second init on the same directory refuses instead of overwriting.
        std::fs::remove_file(m.path()).unwrap();
        assert!(init(&opts).is_err());
    }
}
