//! Cluster status: every node asked for its own view, merged into one [`ClusterView`] (a table
//! and JSON for `raftmq cluster status`); waiting until a node serves or a leader is agreed.

use std::time::Duration;
use std::time::Instant;

use raftmq_client::proto::ClusterStatusReply;
use raftmq_client::proto::MemberStatus;
use raftmq_client::proto::Role;
use raftmq_client::Client;
use raftmq_client::ClientOptions;
use serde::Serialize;

use crate::deploy::manifest::Manifest;
use crate::deploy::process::is_running;
use crate::output::opt;
use crate::output::table;

/// One node as it sees itself (and as the leader sees its lag).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NodeRow {
    /// Node id.
    pub id: u64,
    /// leader | follower | candidate | learner | down (no answer).
    pub role: String,
    /// Its term.
    pub term: Option<u64>,
    /// The leader it knows.
    pub leader_id: Option<u64>,
    /// Client address.
    pub client_addr: String,
    /// RocketMQ 5 protocol address (local clusters only: from the manifest).
    pub rocketmq_addr: Option<String>,
    /// Pid from the manifest (local clusters only).
    pub pid: Option<u32>,
    /// Whether the pid runs (local clusters only).
    pub running: Option<bool>,
    /// Last appended log index.
    pub appended: Option<u64>,
    /// Last flushed log index.
    pub flushed: Option<u64>,
    /// Committed log index (= confirm offset).
    pub committed: Option<u64>,
    /// Applied log index.
    pub applied: Option<u64>,
    /// Entries behind the leader, as the leader sees it.
    pub lag: Option<u64>,
    /// Why it did not answer, if it did not.
    pub error: Option<String>,
    /// Used share of its data dir's file system, 0..1.
    pub disk_usage: Option<f64>,
    /// True while its disk is above its disk-reject-ratio (it takes no entries).
    pub disk_full: bool,
}

/// The whole cluster.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterView {
    /// Cluster id as the nodes report it.
    pub cluster_id: Option<String>,
    /// The leader, if a node that answered is leader.
    pub leader_id: Option<u64>,
    /// Highest term seen.
    pub term: u64,
    /// Every node.
    pub nodes: Vec<NodeRow>,
}

/// Client options for status probes: fail fast.
pub fn probe_options() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        max_attempts: 1,
        ..ClientOptions::default()
    }
}

fn role_name(m: &MemberStatus) -> String {
    match Role::try_from(m.role).unwrap_or(Role::Unspecified) {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Unreachable => "unreachable",
        Role::Unspecified => "unknown",
    }
    .to_string()
}

fn row_from(reply: &ClusterStatusReply, addr: &str) -> NodeRow {
    let me = reply
        .members
        .iter()
        .find(|m| m.node_id == reply.responder_id);
    let w = me.and_then(|m| m.watermarks);
    NodeRow {
        id: reply.responder_id,
        role: me.map_or_else(|| "unknown".into(), role_name),
        term: Some(reply.term),
        leader_id: reply.leader_id,
        client_addr: addr.to_string(),
        appended: w.and_then(|w| w.appended_index),
        flushed: w.and_then(|w| w.flushed_index),
        committed: w.and_then(|w| w.committed_index),
        applied: w.and_then(|w| w.applied_index),
        disk_usage: me.and_then(|m| m.disk_usage),
        disk_full: me.is_some_and(|m| m.disk_full),
        ..NodeRow::default()
    }
}

/// Asks every address (concurrently) for its status; `ids` gives the expected id of each
/// address (when known) so a silent node still gets its row.
pub async fn gather(targets: &[(Option<u64>, String)]) -> anyhow::Result<ClusterView> {
    let addrs: Vec<String> = targets.iter().map(|t| t.1.clone()).collect();
    let client = Client::new(&addrs, probe_options())?;
    let replies =
        futures::future::join_all(addrs.iter().map(|a| client.cluster_status_from(a))).await;
    let mut view = ClusterView::default();
    let mut leader_reply: Option<ClusterStatusReply> = None;
    for ((id, addr), reply) in targets.iter().zip(replies) {
        match reply {
            Ok(r) => {
                view.term = view.term.max(r.term);
                view.cluster_id.get_or_insert(r.cluster_id.clone());
                if r.leader_id == Some(r.responder_id) {
                    view.leader_id = Some(r.responder_id);
                    leader_reply = Some(r.clone());
                }
                view.nodes.push(row_from(&r, addr));
            }
            Err(e) => view.nodes.push(NodeRow {
                id: id.unwrap_or(0),
                role: "down".into(),
                client_addr: addr.clone(),
                error: Some(e.to_string()),
                ..NodeRow::default()
            }),
        }
    }
    if let Some(l) = leader_reply {
        for row in &mut view.nodes {
            row.lag = l
                .members
                .iter()
                .find(|m| m.node_id == row.id)
                .and_then(|m| m.replication_lag);
        }
    }
    view.nodes.sort_by_key(|n| n.id);
    Ok(view)
}

/// Status of a local cluster: every manifest node, with its pid.
pub async fn gather_local(m: &Manifest) -> anyhow::Result<ClusterView> {
    let targets: Vec<(Option<u64>, String)> = m
        .nodes
        .iter()
        .map(|n| (Some(n.id), n.client_addr.clone()))
        .collect();
    let mut view = gather(&targets).await?;
    for row in &mut view.nodes {
        if let Ok(n) = m.node(row.id) {
            row.pid = n.pid;
            row.running = Some(n.pid.is_some_and(is_running));
            row.rocketmq_addr = Some(n.rocketmq_addr.clone()).filter(|a| !a.is_empty());
        }
    }
    Ok(view)
}

/// Status from seed addresses: the members the first answering node knows.
pub async fn gather_remote(seeds: &[String]) -> anyhow::Result<ClusterView> {
    let client = Client::connect(seeds, probe_options()).await?;
    let status = client.cluster_status().await?;
    let targets: Vec<(Option<u64>, String)> = status
        .members
        .iter()
        .map(|m| (Some(m.node_id), m.client_addr.clone()))
        .collect();
    gather(&targets).await
}

/// Polls `addr` until it answers a status call (a restarted node replays its log first).
pub async fn wait_serving(addr: &str, timeout: Duration) -> anyhow::Result<()> {
    let client = Client::new(&[addr.to_string()], probe_options())?;
    let start = Instant::now();
    loop {
        match client.cluster_status_from(addr).await {
            Ok(_) => return Ok(()),
            Err(e) if start.elapsed() >= timeout => {
                anyhow::bail!("node at {addr} does not answer after {timeout:?}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Polls until a node says it is the leader and every voter it lists answers with that leader
/// (or `timeout` passes).
pub async fn wait_leader(m: &Manifest, timeout: Duration) -> anyhow::Result<ClusterView> {
    let start = Instant::now();
    loop {
        let view = gather_local(m).await?;
        let agreed = view.leader_id.is_some()
            && view
                .nodes
                .iter()
                .filter(|n| n.running != Some(false))
                .all(|n| n.leader_id == view.leader_id);
        if agreed {
            return Ok(view);
        }
        if start.elapsed() >= timeout {
            let why: Vec<String> = view
                .nodes
                .iter()
                .map(|n| format!("node {} {}", n.id, n.error.as_deref().unwrap_or(&n.role)))
                .collect();
            anyhow::bail!(
                "no leader elected within {timeout:?} ({}); see the node logs in {}/node-*/node.log",
                why.join("; "),
                m.dir.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// "42%", "95% FULL" (above its reject ratio: takes no entries) or "-".
fn disk_cell(n: &NodeRow) -> String {
    match (n.disk_usage, n.disk_full) {
        (Some(u), full) => format!("{:.0}%{}", u * 100.0, if full { " FULL" } else { "" }),
        (None, true) => "FULL".into(),
        (None, false) => "-".into(),
    }
}

impl ClusterView {
    /// The human table.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.id.to_string(),
                    n.role.clone(),
                    opt(n.term),
                    n.client_addr.clone(),
                    n.rocketmq_addr.clone().unwrap_or_else(|| "-".into()),
                    opt(n.pid),
                    opt(n.appended),
                    opt(n.committed),
                    opt(n.applied),
                    opt(n.lag),
                    disk_cell(n),
                ]
            })
            .collect();
        let head = format!(
            "cluster {}  leader {}  term {}",
            self.cluster_id.as_deref().unwrap_or("?"),
            opt(self.leader_id),
            self.term
        );
        let t = table(
            &[
                "ID",
                "ROLE",
                "TERM",
                "CLIENT",
                "ROCKETMQ",
                "PID",
                "APPENDED",
                "COMMITTED",
                "APPLIED",
                "LAG",
                "DISK",
            ],
            &rows,
        );
        format!("{head}\n{t}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftmq_client::proto::Watermarks;

    #[test]
    fn row_takes_the_responders_own_entry_and_json_shape() {
        let member = |id: u64, role: Role| MemberStatus {
            node_id: id,
            client_addr: format!("h:{id}"),
            role: role as i32,
            watermarks: Some(Watermarks {
                committed_index: Some(10 + id),
                ..Watermarks::default()
            }),
            ..MemberStatus::default()
        };
        let reply = ClusterStatusReply {
            cluster_id: "c".into(),
            responder_id: 2,
            leader_id: Some(1),
            term: 3,
            members: vec![member(1, Role::Leader), member(2, Role::Follower)],
        };
        let row = row_from(&reply, "h:2");
        assert_eq!(row.role, "follower");
        assert_eq!(row.committed, Some(12));
        assert_eq!(row.leader_id, Some(1));
        let view = ClusterView {
            cluster_id: Some("c".into()),
            leader_id: Some(1),
            term: 3,
            nodes: vec![row],
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["leader_id"], 1);
        assert_eq!(json["nodes"][0]["role"], "follower");
        assert_eq!(json["nodes"][0]["committed"], 12);
        assert!(json["nodes"][0]["pid"].is_null());
        assert!(view.render().contains("COMMITTED"));
        assert_eq!(json["nodes"][0]["disk_full"], false);

        let mut full = reply.clone();
        full.members[1].disk_usage = Some(0.953);
        full.members[1].disk_full = true;
        let row = row_from(&full, "h:2");
        assert_eq!(disk_cell(&row), "95% FULL");
        assert!(ClusterView {
            nodes: vec![row],
            ..ClusterView::default()
        }
        .render()
        .contains("95% FULL"));
    }
}
