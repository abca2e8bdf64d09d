//! ClusterStatus: every member's role, term, leader and watermarks.
//!
//! The answering node reports itself from its own state and asks every other member for its
//! own view over the client API (a `ClusterStatus` call with metadata
//! `x-raftmq-status-scope: local`, answered with that member only; 500 ms per member, all in
//! parallel). A member that does not answer is listed with role UNREACHABLE and the error.
//! `replication_lag` is the leader's last log index minus the member's matched index when the
//! answering node is the leader (openraft replication metrics); otherwise it is the leader's
//! reported appended index minus the member's appended index. A leader that lost its quorum
//! ([`crate::check_quorum`]) reports itself as a follower that knows no leader.

use std::time::Duration;

use futures::future::join_all;
use openraft::ServerState;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_raft_log::types::PeerNode;
use tonic::Request;

use crate::core::NodeCore;
use crate::core::RaftMetrics;

/// Metadata key asking a node for its own status only.
pub const STATUS_SCOPE_KEY: &str = "x-raftmq-status-scope";

/// How long the answering node waits for each member's own status.
const PEER_TIMEOUT: Duration = Duration::from_millis(500);

fn role(state: ServerState) -> pb::Role {
    match state {
        ServerState::Leader => pb::Role::Leader,
        ServerState::Follower => pb::Role::Follower,
        ServerState::Candidate => pb::Role::Candidate,
        ServerState::Learner => pb::Role::Learner,
        ServerState::Shutdown => pb::Role::Unreachable,
    }
}

/// This node's watermarks.
pub fn own_watermarks(core: &NodeCore, m: &RaftMetrics) -> pb::Watermarks {
    let sw = core.store.watermarks();
    let lw = &sw.log;
    pb::Watermarks {
        appended_index: lw.appended.map(|l| l.index),
        flushed_index: lw.flushed.map(|l| l.index),
        committed_index: m.local_committed.map(|l| l.index),
        applied_index: sw.applied.map(|l| l.index),
        dispatched_index: sw.applied.map(|l| l.index),
        purged_index: lw.last_purged.map(|l| l.index),
        min_phys_offset: lw.min_phys_offset.get(),
        max_phys_offset: lw.appended_phys_end.get(),
        committed_phys_offset: sw.dispatched_phys_end.get(),
    }
}

/// This node as a member.
pub fn own_status(core: &NodeCore, m: &RaftMetrics) -> pb::MemberStatus {
    let me = m
        .membership_config
        .membership()
        .get_node(&core.node_id)
        .cloned()
        .unwrap_or_else(|| PeerNode {
            raft_addr: core.config.raft_addr(),
            client_addr: core.config.client_addr(),
        });
    pb::MemberStatus {
        node_id: core.node_id,
        raft_addr: me.raft_addr,
        client_addr: me.client_addr,
        role: if core.quorum.is_lost() {
            pb::Role::Follower as i32
        } else {
            role(m.state) as i32
        },
        voter: m
            .membership_config
            .membership()
            .voter_ids()
            .any(|v| v == core.node_id),
        term: m.current_term,
        leader_id: core.leader_in(m),
        watermarks: Some(own_watermarks(core, m)),
        replication_lag: None,
        error: String::new(),
        disk_usage: core.store.disk_usage().ok(),
        disk_full: crate::disk_guard::local_full(core),
    }
}

/// `id`'s own status (its ClusterStatus answer with the local scope), or an UNREACHABLE
/// entry naming the error.
pub(crate) async fn peer_status(
    core: &NodeCore,
    id: u64,
    node: &PeerNode,
    voter: bool,
) -> pb::MemberStatus {
    let unreachable = |error: String| pb::MemberStatus {
        node_id: id,
        raft_addr: node.raft_addr.clone(),
        client_addr: node.client_addr.clone(),
        role: pb::Role::Unreachable as i32,
        voter,
        error,
        ..Default::default()
    };
    let ch = match core.channel(&node.client_addr) {
        Ok(ch) => ch,
        Err(e) => return unreachable(e),
    };
    let mut req = Request::new(pb::ClusterStatusRequest {});
    req.metadata_mut().insert(
        STATUS_SCOPE_KEY,
        tonic::metadata::MetadataValue::from_static("local"),
    );
    core.auth.sign_internal(req.metadata_mut(), None);
    req.set_timeout(PEER_TIMEOUT);
    let mut client = RaftMqClient::new(ch);
    match tokio::time::timeout(PEER_TIMEOUT, client.cluster_status(req)).await {
        Ok(Ok(r)) => {
            let r = r.into_inner();
            match r.members.into_iter().find(|s| s.node_id == id) {
                Some(mut s) => {
                    s.voter = voter;
                    s
                }
                None => unreachable(format!(
                    "node at {} answered as node {}",
                    node.client_addr, r.responder_id
                )),
            }
        }
        Ok(Err(s)) => unreachable(format!("{:?}: {}", s.code(), s.message())),
        Err(_) => unreachable(format!("no answer within {} ms", PEER_TIMEOUT.as_millis())),
    }
}

fn fill_lag(core: &NodeCore, m: &RaftMetrics, members: &mut [pb::MemberStatus]) {
    if let Some(repl) = m.replication.as_ref() {
        let last = m.last_log_index.unwrap_or(0);
        for s in members.iter_mut() {
            if s.node_id == core.node_id {
                s.replication_lag = Some(0);
            } else if let Some(matched) = repl.get(&s.node_id) {
                let mi = matched.as_ref().map_or(0, |l| l.index + 1);
                s.replication_lag = Some((last + 1).saturating_sub(mi));
            }
        }
        return;
    }
    let leader_appended = members
        .iter()
        .find(|s| Some(s.node_id) == m.current_leader)
        .and_then(|s| s.watermarks.as_ref())
        .and_then(|w| w.appended_index);
    if let Some(la) = leader_appended {
        for s in members.iter_mut() {
            if let Some(a) = s.watermarks.as_ref().and_then(|w| w.appended_index) {
                s.replication_lag = Some(la.saturating_sub(a));
            }
        }
    }
}

/// The ClusterStatus answer; `local_only` lists this node alone.
pub async fn cluster_status(core: &NodeCore, local_only: bool) -> pb::ClusterStatusReply {
    let m = core.raft_metrics();
    let mut members = vec![own_status(core, &m)];
    if !local_only {
        let membership = m.membership_config.membership().clone();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let others: Vec<(u64, PeerNode)> = membership
            .nodes()
            .filter(|(id, _)| **id != core.node_id)
            .map(|(id, n)| (*id, n.clone()))
            .collect();
        let fetched = join_all(
            others
                .iter()
                .map(|(id, n)| peer_status(core, *id, n, voters.contains(id))),
        )
        .await;
        members.extend(fetched);
        fill_lag(core, &m, &mut members);
    }
    pb::ClusterStatusReply {
        cluster_id: core.config.cluster_id.clone(),
        responder_id: core.node_id,
        leader_id: core.leader_in(&m),
        term: m.current_term,
        members,
    }
}
