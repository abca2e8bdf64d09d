//! Cluster status: every node asked for its own view, merged into one [`ClusterView`] (a table
//! and JSON for `raftmq cluster status`); waiting until a node serves or a leader is agreed.
//!
//! The summary's leader is the one named at the highest term any node reports
//! ([`summarize_leader`]): a leader cut off from the majority may still name itself at its old
//! term, but once the majority moved on to a higher term its claim is stale. Every node whose
//! own view differs from the summary is listed as a disagreement.

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

/// What one node that answered believes: its term and the leader it knows.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LeaderClaim {
    /// The node that answered.
    pub node_id: u64,
    /// Its term.
    pub term: u64,
    /// The leader it knows at that term (None: none known, e.g. during an election).
    pub leader_id: Option<u64>,
}

/// The whole cluster.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterView {
    /// Cluster id as the nodes report it.
    pub cluster_id: Option<String>,
    /// The leader named at the highest term any node reports (None: no node at that term
    /// knows one).
    pub leader_id: Option<u64>,
    /// Highest term seen.
    pub term: u64,
    /// The answering nodes whose term or leader differs from the summary (e.g. a leader cut
    /// off from the majority, still at its old term); empty when all agree.
    pub disagreement: Vec<LeaderClaim>,
    /// Every node.
    pub nodes: Vec<NodeRow>,
}

/// The summary of the claims of every node that answered: the highest term, the leader named
/// at that term (a node naming itself wins over one naming another, which can only lag
/// behind it), and the claims that differ from that.
pub fn summarize_leader(claims: &[LeaderClaim]) -> (u64, Option<u64>, Vec<LeaderClaim>) {
    let term = claims.iter().map(|c| c.term).max().unwrap_or(0);
    let at_top = claims.iter().filter(|c| c.term == term);
    let leader = at_top
        .clone()
        .find(|c| c.leader_id == Some(c.node_id))
        .or_else(|| at_top.clone().find(|c| c.leader_id.is_some()))
        .and_then(|c| c.leader_id);
    let disagreement = claims
        .iter()
        .filter(|c| c.term != term || c.leader_id != leader)
        .cloned()
        .collect();
    (term, leader, disagreement)
}

/// Client options for status probes: fail fast.
pub fn probe_options() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        max_attempts: 1,
        ..crate::client_tls::options()
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
    gather_with(targets, crate::credentials::signed(probe_options())).await
}

/// [`gather`] with the client options given (TLS, credentials, timeouts), not the command
/// line's.
pub async fn gather_with(
    targets: &[(Option<u64>, String)],
    opts: ClientOptions,
) -> anyhow::Result<ClusterView> {
    let addrs: Vec<String> = targets.iter().map(|t| t.1.clone()).collect();
    let client = Client::new(&addrs, opts)?;
    let replies =
        futures::future::join_all(addrs.iter().map(|a| client.cluster_status_from(a))).await;
    let mut view = ClusterView::default();
    let mut answered: Vec<ClusterStatusReply> = Vec::new();
    for ((id, addr), reply) in targets.iter().zip(replies) {
        match reply {
            Ok(r) => {
                view.cluster_id.get_or_insert(r.cluster_id.clone());
                view.nodes.push(row_from(&r, addr));
                answered.push(r);
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
    let claims: Vec<LeaderClaim> = answered
        .iter()
        .map(|r| LeaderClaim {
            node_id: r.responder_id,
            term: r.term,
            leader_id: r.leader_id,
        })
        .collect();
    (view.term, view.leader_id, view.disagreement) = summarize_leader(&claims);
    let leader_reply = answered
        .iter()
        .find(|r| r.term == view.term && Some(r.responder_id) == view.leader_id);
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
    let client = Client::connect(seeds, crate::credentials::signed(probe_options())).await?;
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
    let client = Client::new(
        &[addr.to_string()],
        crate::credentials::signed(probe_options()),
    )?;
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
        let mut head = format!(
            "cluster {}  leader {}  term {}",
            self.cluster_id.as_deref().unwrap_or("?"),
            opt(self.leader_id),
            self.term
        );
        if !self.disagreement.is_empty() {
            let d: Vec<String> = self
                .disagreement
                .iter()
                .map(|c| {
                    format!(
                        "node {} says leader {} at term {}",
                        c.node_id,
                        opt(c.leader_id),
                        c.term
                    )
                })
                .collect();
            head.push_str(&format!("  (disagreement: {})", d.join("; ")));
        }
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
            disagreement: vec![],
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
        assert!(!view.render().contains("disagreement"));
    }

    fn claim(node_id: u64, term: u64, leader_id: Option<u64>) -> LeaderClaim {
        LeaderClaim {
            node_id,
            term,
            leader_id,
        }
    }

    #[test]
    fn the_leader_of_the_highest_term_wins_over_a_stale_claim() {
        // Node 1 led at term 3 and was cut off; nodes 2 and 3 elected node 2 at term 4. The
        // stale leader answers first and names itself.
        let claims = [
            claim(1, 3, Some(1)),
            claim(2, 4, Some(2)),
            claim(3, 4, Some(2)),
        ];
        let (term, leader, disagreement) = summarize_leader(&claims);
        assert_eq!((term, leader), (4, Some(2)));
        assert_eq!(disagreement, vec![claim(1, 3, Some(1))]);
        // Order does not matter, and a follower's word alone names the leader.
        let claims = [claim(3, 4, Some(2)), claim(1, 3, Some(1))];
        assert_eq!(summarize_leader(&claims).1, Some(2));
    }

    #[test]
    fn no_leader_at_the_highest_term_means_no_leader() {
        // An election at term 5 is under way; the old leader still names itself at term 4.
        let claims = [claim(1, 4, Some(1)), claim(2, 5, None), claim(3, 5, None)];
        let (term, leader, disagreement) = summarize_leader(&claims);
        assert_eq!((term, leader), (5, None));
        assert_eq!(disagreement, vec![claim(1, 4, Some(1))]);
        // Everyone agrees: no disagreement; nobody answered: term 0, no leader.
        let claims = [
            claim(1, 2, Some(3)),
            claim(2, 2, Some(3)),
            claim(3, 2, Some(3)),
        ];
        assert_eq!(summarize_leader(&claims), (2, Some(3), vec![]));
        assert_eq!(summarize_leader(&[]), (0, None, vec![]));
    }

    #[test]
    fn the_leaders_own_word_wins_over_a_lagging_follower() {
        // At the same term a follower may still name nobody or (never, by Raft) another node;
        // the node naming itself is the leader and the others are the disagreement.
        let claims = [
            claim(2, 7, None),
            claim(1, 7, Some(1)),
            claim(3, 7, Some(1)),
        ];
        let (term, leader, disagreement) = summarize_leader(&claims);
        assert_eq!((term, leader), (7, Some(1)));
        assert_eq!(disagreement, vec![claim(2, 7, None)]);
        let view = ClusterView {
            cluster_id: Some("c".into()),
            leader_id: leader,
            term,
            disagreement,
            nodes: vec![],
        };
        let head = view.render();
        assert!(
            head.starts_with(
                "cluster c  leader 1  term 7  (disagreement: node 2 says leader - at term 7)"
            ),
            "{head}"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["disagreement"][0]["node_id"], 2);
        assert!(json["disagreement"][0]["leader_id"].is_null());
    }
}
