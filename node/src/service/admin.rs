//! Leader-side writes other than sends: topic admin and consumer offsets (replicated
//! commands), and membership admin (openraft's membership API).

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::errors::ClientWriteError;
use openraft::errors::RaftError;
use openraft::ChangeMembers;
use raftmq_proto::v1 as pb;
use raftmq_raft_log::types::PeerNode;
use raftmq_store::command::Command;
use raftmq_store::command::CommitOffset;
use raftmq_store::topic::TopicConfig;
use raftmq_store::types::QueueOffset;
use raftmq_store::ApplyResponse;
use tokio::time::Instant;

use super::convert;
use super::read::offset_args;
use crate::core::NodeCore;
use crate::error::NodeError;
use crate::pipeline::propose::propose;
use crate::pipeline::propose::WriteResponse;

fn deadline(core: &NodeCore) -> Instant {
    Instant::now() + core.config.send_timeout()
}

pub(crate) async fn run(core: &NodeCore, cmd: Command) -> Result<WriteResponse, NodeError> {
    let payload = cmd
        .encode()
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let resp = propose(core, payload, deadline(core)).await?;
    if let ApplyResponse::Rejected { code, message } = resp.data {
        return Err(NodeError::from_reject(code, message));
    }
    Ok(resp)
}

fn topic_reply(resp: WriteResponse) -> Result<pb::TopicConfig, NodeError> {
    match resp.data {
        ApplyResponse::Topic(t) => Ok(convert::topic_out(&t)),
        other => Err(NodeError::Internal(format!("apply answered {other:?}"))),
    }
}

/// CreateTopic.
pub async fn create_topic(
    core: &NodeCore,
    cfg: pb::TopicConfig,
) -> Result<pb::TopicConfig, NodeError> {
    let mut t = TopicConfig::new(cfg.name, cfg.queue_count);
    if let Some(p) = convert::perm_in(cfg.perm)? {
        t.perm = p;
    }
    t.check(core.store.limits())
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    if core.store.topic(&t.name).is_some() {
        return Err(NodeError::AlreadyExists(format!(
            "topic '{}' exists",
            t.name
        )));
    }
    core.store
        .limits()
        .check_new_topic(core.store.topic_count())?;
    topic_reply(run(core, Command::CreateTopic(t)).await?)
}

/// UpdateTopic: queue count (only grows) and/or permission.
pub async fn update_topic(
    core: &NodeCore,
    req: pb::UpdateTopicRequest,
) -> Result<pb::TopicConfig, NodeError> {
    let mut t = core
        .store
        .topic(&req.name)
        .ok_or_else(|| NodeError::TopicNotFound(req.name.clone()))?;
    if let Some(n) = req.queue_count {
        if n < t.queue_count() {
            return Err(NodeError::InvalidArgument(format!(
                "queue_count {n} is below the topic's {} queues; queues cannot be removed",
                t.queue_count()
            )));
        }
        t.read_queue_count = n;
        t.write_queue_count = n;
    }
    if let Some(p) = convert::perm_in(req.perm)? {
        t.perm = p;
    }
    t.check(core.store.limits())
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    topic_reply(run(core, Command::UpdateTopic(t)).await?)
}

/// DeleteTopic.
pub async fn delete_topic(core: &NodeCore, name: String) -> Result<(), NodeError> {
    if core.store.topic(&name).is_none() {
        return Err(NodeError::TopicNotFound(name));
    }
    run(core, Command::DeleteTopic { topic: name })
        .await
        .map(|_| ())
}

/// CommitOffset.
pub async fn commit_offset(
    core: &NodeCore,
    req: pb::CommitOffsetRequest,
) -> Result<pb::CommitOffsetReply, NodeError> {
    let queue_id = offset_args(&req.group, &req.topic, req.queue_id)?;
    // Offsets only for queues that exist: the table must not grow from client-chosen names
    // (apply refuses the rest too, should the topic go meanwhile).
    let topic = core
        .store
        .topic(&req.topic)
        .ok_or_else(|| NodeError::TopicNotFound(req.topic.clone()))?;
    if !queue_id.is_below(topic.queue_count()) {
        return Err(NodeError::InvalidArgument(format!(
            "queue {queue_id} is not a queue of topic '{}' (0..{})",
            topic.name,
            topic.queue_count()
        )));
    }
    core.store.check_new_group(&req.group)?;
    let cmd = Command::CommitOffset(CommitOffset {
        group: req.group,
        topic: req.topic,
        queue_id,
        offset: QueueOffset::new(req.offset),
    });
    let resp = run(core, cmd).await?;
    Ok(pb::CommitOffsetReply {
        log_id: Some(convert::log_id(&resp.log_id)),
    })
}

fn membership_error(
    e: RaftError<raftmq_store::TypeConfig, ClientWriteError<raftmq_store::TypeConfig>>,
) -> NodeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => NodeError::NotLeader {
            leader_id: f.leader_id,
            leader_addr: f.leader_node.map(|n| n.client_addr).unwrap_or_default(),
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => {
            NodeError::FailedPrecondition(c.to_string())
        }
        RaftError::APIError(other) => NodeError::OutcomeUnknown(other.to_string()),
        RaftError::Fatal(f) => NodeError::OutcomeUnknown(format!("raft stopped: {f}")),
    }
}

fn check_addr(field: &str, a: &str) -> Result<(), NodeError> {
    let ok = a
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(NodeError::InvalidArgument(format!(
            "{field} {a:?} is not host:port"
        )))
    }
}

/// AddLearner.
pub async fn add_learner(
    core: &NodeCore,
    req: pb::AddLearnerRequest,
) -> Result<pb::AddLearnerReply, NodeError> {
    if req.node_id == 0 {
        return Err(NodeError::InvalidArgument(
            "node_id 0 is not a valid node id".into(),
        ));
    }
    check_addr("raft_addr", &req.raft_addr)?;
    check_addr("client_addr", &req.client_addr)?;
    let m = core.raft_metrics();
    if m.membership_config
        .membership()
        .voter_ids()
        .any(|v| v == req.node_id)
    {
        return Err(NodeError::FailedPrecondition(format!(
            "node {} is already a voter",
            req.node_id
        )));
    }
    let node = PeerNode {
        raft_addr: req.raft_addr,
        client_addr: req.client_addr,
    };
    let resp = core
        .raft
        .add_learner(req.node_id, node, req.wait_caught_up)
        .await
        .map_err(membership_error)?;
    tracing::info!(
        learner = req.node_id,
        log_index = resp.log_id.index,
        "learner added"
    );
    Ok(pb::AddLearnerReply {
        log_id: Some(convert::log_id(&resp.log_id)),
    })
}

/// ChangeMembership: the new voter set is (voters + add) - remove.
pub async fn change_membership(
    core: &NodeCore,
    req: pb::ChangeMembershipRequest,
) -> Result<pb::ChangeMembershipReply, NodeError> {
    let m = core.raft_metrics();
    let membership = m.membership_config.membership();
    let mut voters: BTreeSet<u64> = membership.voter_ids().collect();
    let learners: BTreeSet<u64> = membership.learner_ids().collect();
    for id in &req.add_voters {
        if !voters.contains(id) && !learners.contains(id) {
            return Err(NodeError::FailedPrecondition(format!(
                "node {id} is not a learner of the cluster; add it with AddLearner first"
            )));
        }
        voters.insert(*id);
    }
    for id in &req.remove_voters {
        if !voters.remove(id) {
            return Err(NodeError::NotFound(format!(
                "node {id} is not a voter of the cluster"
            )));
        }
    }
    if voters.is_empty() {
        return Err(NodeError::FailedPrecondition(
            "the change would remove the last voters; a cluster needs at least one".into(),
        ));
    }
    let resp = core
        .raft
        .change_membership(
            ChangeMembers::ReplaceAllVoters(voters),
            req.retain_as_learners,
        )
        .await
        .map_err(membership_error)?;
    let after = resp
        .membership
        .clone()
        .unwrap_or_else(|| membership.clone());
    tracing::info!(log_index = resp.log_id.index, membership = %after, "membership changed");
    Ok(pb::ChangeMembershipReply {
        log_id: Some(convert::log_id(&resp.log_id)),
        voters: after.voter_ids().collect(),
        learners: after.learner_ids().collect(),
    })
}

/// TransferLeader: to `to`, or to the voter whose log matches the leader's furthest.
pub async fn transfer_leader(core: &NodeCore, to: Option<u64>) -> Result<u64, NodeError> {
    let m = core.raft_metrics();
    let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
    let target = match to {
        Some(id) if id == core.node_id => return Ok(id),
        Some(id) if !voters.contains(&id) => {
            return Err(NodeError::NotFound(format!(
                "node {id} is not a voter of the cluster"
            )))
        }
        Some(id) => id,
        None => most_caught_up(core, &m, &voters).ok_or_else(|| {
            NodeError::FailedPrecondition("there is no other voter to transfer to".into())
        })?,
    };
    core.raft
        .trigger()
        .transfer_leader(target)
        .await
        .map_err(|e| NodeError::Internal(e.to_string()))?;
    let wait = Duration::from_millis(core.config.election_timeout_max_ms * 4);
    let end = Instant::now() + wait;
    loop {
        let (leader, _) = core.leader();
        match leader {
            Some(l) if l != core.node_id => return Ok(l),
            _ if Instant::now() >= end => {
                return Err(NodeError::OutcomeUnknown(format!(
                    "leadership did not move to node {target} within {} ms",
                    wait.as_millis()
                )))
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The voter (not this node) with the highest matched log index, per replication metrics.
pub fn most_caught_up(
    core: &NodeCore,
    m: &crate::core::RaftMetrics,
    voters: &[u64],
) -> Option<u64> {
    let repl = m.replication.as_ref();
    voters
        .iter()
        .filter(|v| **v != core.node_id)
        .max_by_key(|v| {
            repl.and_then(|r| r.get(*v).cloned().flatten())
                .map(|l| l.index + 1)
                .unwrap_or(0)
        })
        .copied()
}
