//! `raftmq cluster ...`: deploy a local cluster and administer any cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::Subcommand;
use serde::Serialize;

use super::Global;
use crate::clock::parse_duration;
use crate::deploy::local;
use crate::deploy::manifest::Manifest;
use crate::deploy::manifest::MANIFEST_FILE;
use crate::deploy::node_config::NodeSetting;
use crate::locate::node_binary;
use crate::output::print_json;
use crate::status;

/// Cluster commands.
#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Start a local cluster in the background (or restart the stopped nodes of an existing one).
    #[command(after_help = "Examples:
  raftmq cluster up
  raftmq cluster up --nodes 5 --dir /tmp/mq --base-port 19100
  raftmq cluster up --flush sync,async,async
Node N listens on 127.0.0.1: Raft base+N, client base+100+N, metrics base+200+N (base 0 =
free ports). Node logs: <dir>/node-N/node.log. Manifest: <dir>/cluster.toml.")]
    Up(UpArgs),
    /// Show every node: role, term, watermarks, lag.
    #[command(after_help = "Examples:
  raftmq cluster status --json
  raftmq cluster status --watch 1s      redraw every second (Ctrl-C to stop)")]
    Status {
        /// Redraw the table at this interval until interrupted.
        #[arg(long, value_parser = parse_duration)]
        watch: Option<Duration>,
    },
    /// Stop every node of the local cluster (SIGTERM; data is kept unless --purge).
    #[command(after_help = "Example: raftmq cluster down --purge")]
    Down {
        /// Also delete the cluster directory.
        #[arg(long)]
        purge: bool,
    },
    /// SIGKILL a node (a crash).
    #[command(after_help = "Example: raftmq cluster kill 1")]
    Kill {
        /// Node id.
        id: u64,
    },
    /// SIGTERM a node (graceful stop).
    #[command(after_help = "Example: raftmq cluster stop 2")]
    Stop {
        /// Node id.
        id: u64,
    },
    /// Start a stopped node of the local cluster.
    #[command(after_help = "Example: raftmq cluster start 2")]
    Start {
        /// Node id.
        id: u64,
    },
    /// Move leadership to a node (default: the most caught-up follower).
    #[command(after_help = "Example: raftmq cluster transfer-leader --to 3")]
    TransferLeader {
        /// Target node id.
        #[arg(long)]
        to: Option<u64>,
    },
    /// Add a node to the local cluster (learner, then voter).
    #[command(after_help = "Example: raftmq cluster add-node --flush async")]
    AddNode {
        /// Flush policy of the new node.
        #[arg(long, default_value = "sync", value_parser = ["sync", "async"])]
        flush: String,
        /// Keep it a learner (do not make it a voter).
        #[arg(long)]
        learner: bool,
    },
    /// Remove a node from the membership and stop it.
    #[command(after_help = "Example: raftmq cluster remove-node 4")]
    RemoveNode {
        /// Node id.
        id: u64,
    },
}

/// `cluster up` options.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=9))]
    pub nodes: u64,
    /// Cluster directory.
    #[arg(long, default_value = "./raftmq-data")]
    pub dir: PathBuf,
    /// First port (see above); 0 picks free ports.
    #[arg(long, default_value_t = 9100)]
    pub base_port: u16,
    /// Flush policy: one for all nodes, or one per node (sync,async,async).
    #[arg(long, default_value = "sync")]
    pub flush: String,
    /// CommitLog segment size in bytes (cluster-wide; fixed once created).
    #[arg(long, default_value_t = 1 << 30)]
    pub segment_bytes: u64,
    /// Cluster id written into every node's config.
    #[arg(long, default_value = "raftmq")]
    pub cluster_id: String,
    /// How long to wait for a leader.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub wait: Duration,
    /// A raftmq-node setting for every node, KEY=VALUE with KEY a `raftmq-node` long flag
    /// (repeatable), e.g. `--set disk-reject-ratio=0.95`; kept for nodes added later.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<NodeSetting>,
    /// Secure cluster: TLS everywhere (a cluster CA and a certificate per node under
    /// `<dir>/tls`, keys 0600) and authentication on (a cluster key and an admin credential in
    /// `<dir>/auth/`); cluster.toml records the CA and the credential, so every `raftmq
    /// --cluster` command uses them with no extra flag.
    #[arg(long)]
    pub secure: bool,
}

/// Result of a command that acts on one node.
#[derive(Debug, Serialize)]
struct NodeAction {
    node: u64,
    action: &'static str,
    changed: bool,
}

/// Runs a cluster command.
pub async fn run(g: &Global, cmd: ClusterCmd) -> anyhow::Result<i32> {
    match cmd {
        ClusterCmd::Up(a) => up(g, a).await,
        ClusterCmd::Status { watch } => {
            loop {
                let view = if g.servers.is_empty() {
                    status::gather_local(&g.manifest()?).await?
                } else {
                    status::gather_remote(&g.servers).await?
                };
                let Some(every) = watch else {
                    show(g, &view)?;
                    return Ok(0);
                };
                if !g.json {
                    // Clear the screen and home the cursor.
                    print!("\x1b[2J\x1b[H");
                }
                show(g, &view)?;
                tokio::time::sleep(every).await;
            }
        }
        ClusterCmd::Down { purge } => down(g, purge),
        ClusterCmd::Kill { id } => node_action(g, id, "kill", local::Stop::Kill),
        ClusterCmd::Stop { id } => node_action(g, id, "stop", local::Stop::Term),
        ClusterCmd::Start { id } => {
            let mut m = g.manifest()?;
            let bin = node_binary()?;
            let changed = local::start(&mut m, id, &bin)?;
            let addr = m.node(id)?.client_addr.clone();
            status::wait_serving(&addr, Duration::from_secs(60)).await?;
            report(
                g,
                NodeAction {
                    node: id,
                    action: "start",
                    changed,
                },
            )
        }
        ClusterCmd::TransferLeader { to } => {
            let leader = g.client()?.transfer_leader(to).await?;
            if g.json {
                print_json(&serde_json::json!({ "leader_id": leader }))?;
            } else {
                println!("leader is now node {leader}");
            }
            Ok(0)
        }
        ClusterCmd::AddNode { flush, learner } => add_node(g, &flush, learner).await,
        ClusterCmd::RemoveNode { id } => remove_node(g, id).await,
    }
}

fn show(g: &Global, view: &status::ClusterView) -> anyhow::Result<()> {
    if g.json {
        print_json(view)
    } else {
        println!("{}", view.render());
        Ok(())
    }
}

fn report(g: &Global, a: NodeAction) -> anyhow::Result<i32> {
    if g.json {
        print_json(&a)?;
    } else if a.changed {
        println!("node {}: {} done", a.node, a.action);
    } else {
        println!(
            "node {}: {}: nothing to do (already in that state)",
            a.node, a.action
        );
    }
    Ok(0)
}

async fn up(g: &Global, a: UpArgs) -> anyhow::Result<i32> {
    let dir = local::absolute_dir(&a.dir)?;
    let manifest_path = dir.join(MANIFEST_FILE);
    let bin = node_binary()?;
    let mut m = if manifest_path.exists() {
        eprintln!(
            "{} exists: restarting stopped nodes (layout options and --set are ignored)",
            manifest_path.display()
        );
        Manifest::load(&manifest_path)?
    } else {
        let mut settings = a.settings;
        let secure = match a.secure {
            true => Some(crate::deploy::credentials::generate(&dir)?),
            false => None,
        };
        if let Some(s) = &secure {
            settings.extend(s.settings.iter().cloned());
        }
        let mut m = local::init(&local::InitOptions {
            nodes: usize::try_from(a.nodes)?,
            dir,
            base_port: a.base_port,
            flush: a.flush,
            segment_bytes: a.segment_bytes,
            cluster_id: a.cluster_id,
            settings,
            secure: a.secure,
        })?;
        if let Some(s) = secure {
            m.update(|m| {
                m.access_key = Some(s.access_key.clone());
                m.secret_file = Some(s.secret_file.clone());
                Ok(())
            })?;
        }
        m
    };
    if g.access_key.is_none() {
        crate::credentials::set(crate::credentials::from_manifest(&m)?);
    }
    if g.tls_ca.is_none() {
        crate::client_tls::set(m.tls_ca.as_deref())?;
    }
    let started = local::start_all(&mut m, &bin)?;
    if !g.json {
        eprintln!("started nodes {started:?}; waiting for a leader ...");
    }
    let view = status::wait_leader(&m, a.wait).await?;
    show(g, &view)?;
    if !g.json {
        println!("manifest: {}", m.path().display());
    }
    Ok(0)
}

fn down(g: &Global, purge: bool) -> anyhow::Result<i32> {
    let mut m = g.manifest()?;
    let mut stopped = Vec::new();
    for id in m.ids() {
        if local::stop(&mut m, id, local::Stop::Term)? {
            stopped.push(id);
        }
    }
    if purge {
        local::purge(&m)?;
    }
    if g.json {
        print_json(&serde_json::json!({ "stopped": stopped, "purged": purge }))?;
    } else {
        println!(
            "stopped nodes {stopped:?}{}",
            if purge { "; directory removed" } else { "" }
        );
    }
    Ok(0)
}

fn node_action(g: &Global, id: u64, action: &'static str, how: local::Stop) -> anyhow::Result<i32> {
    let mut m = g.manifest()?;
    let changed = local::stop(&mut m, id, how)?;
    report(
        g,
        NodeAction {
            node: id,
            action,
            changed,
        },
    )
}

async fn add_node(g: &Global, flush: &str, learner: bool) -> anyhow::Result<i32> {
    let mut m = g.manifest()?;
    let bin = node_binary()?;
    let client = g.client()?;
    client.refresh().await?;
    let leader = client
        .leader_hint()
        .ok_or_else(|| anyhow::anyhow!("the cluster has no leader; cannot add a node"))?;
    let node = local::add_node(&mut m, &bin, &leader, flush)?;
    status::wait_serving(&node.client_addr, Duration::from_secs(60)).await?;
    // The node also adds itself (join-addr); concurrent membership changes are refused with
    // FailedPrecondition, so both calls are retried while one is in progress.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while let Err(e) = client
        .add_learner(node.id, &node.raft_addr, &node.client_addr, true)
        .await
    {
        retry_membership(e, deadline).await?;
    }
    wait_caught_up(&m, node.id, deadline).await;
    if !learner {
        while let Err(e) = client.change_membership(vec![node.id], vec![], false).await {
            retry_membership(e, deadline).await?;
        }
    }
    let action = if learner { "add-learner" } else { "add-voter" };
    report(
        g,
        NodeAction {
            node: node.id,
            action,
            changed: true,
        },
    )
}

/// Sleeps before another try if `e` says a membership change is in progress (and time is
/// left); otherwise returns `e`.
async fn retry_membership(
    e: raftmq_client::ClientError,
    deadline: std::time::Instant,
) -> anyhow::Result<()> {
    let busy = e.code() == Some(tonic::Code::FailedPrecondition)
        && e.to_string().contains("configuration change");
    if !busy || std::time::Instant::now() >= deadline {
        return Err(e.into());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// Waits (until `deadline`) until node `id` has applied to within 64 entries of the leader's
/// commit index.
async fn wait_caught_up(m: &Manifest, id: u64, deadline: std::time::Instant) {
    while std::time::Instant::now() < deadline {
        if let Ok(view) = status::gather_local(m).await {
            let leader = view.nodes.iter().find(|n| Some(n.id) == view.leader_id);
            let node = view.nodes.iter().find(|n| n.id == id);
            if let (Some(c), Some(a)) = (
                leader.and_then(|l| l.committed),
                node.and_then(|n| n.applied),
            ) {
                if a + 64 >= c {
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn remove_node(g: &Global, id: u64) -> anyhow::Result<i32> {
    let client = g.client()?;
    if let Err(e) = client.change_membership(vec![], vec![id], false).await {
        // The API removes voters only; a learner is just stopped (the leader keeps trying to
        // replicate to it).
        if e.code() != Some(tonic::Code::NotFound) {
            return Err(e.into());
        }
        eprintln!("note: {e}; stopping it only");
    }
    if let Ok(mut m) = g.manifest() {
        if m.node(id).is_ok() {
            local::stop(&mut m, id, local::Stop::Term)?;
            m.update(|m| {
                m.nodes.retain(|n| n.id != id);
                Ok(())
            })?;
        }
    }
    report(
        g,
        NodeAction {
            node: id,
            action: "remove",
            changed: true,
        },
    )
}
