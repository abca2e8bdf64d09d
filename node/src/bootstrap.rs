//! Cluster bootstrap (exactly once) and joining an existing cluster.
//!
//! - Raft's own durable state is the marker: a node whose log store holds a vote or any entry
//!   (`Raft::is_initialized`) never initialises again, whatever its config says.
//! - A new node with `initial-members` (or with neither that nor `join-addr`: a single-node
//!   cluster) calls `Raft::initialize` with that membership. Every initial member does so; the
//!   membership entry is identical on all of them (same log id 0, same bytes), so whichever
//!   vote wins, the logs agree.
//! - A new node with `join-addr` asks that member (over the client API, which forwards to
//!   the leader) to add it as a learner, retrying in the background until it succeeds or the
//!   node stops. Promotion to voter is an explicit `ChangeMembership`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::errors::InitializeError;
use openraft::errors::RaftError;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use raftmq_raft_log::types::PeerNode;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::core::NodeCore;

/// Initialises or joins as configured; returns the background join task, if any.
pub async fn bootstrap(
    core: &Arc<NodeCore>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<JoinHandle<()>>> {
    if core.raft.is_initialized().await? {
        tracing::info!("raft state found in the data dir; not bootstrapping");
        return Ok(None);
    }
    let cfg = &core.config;
    if let Some(addr) = cfg.join_addr.clone() {
        let c = core.clone();
        let task = tokio::spawn(join(c, addr, stop).instrument(tracing::Span::current()));
        return Ok(Some(task));
    }
    let members: BTreeMap<u64, PeerNode> = if cfg.initial_members.is_empty() {
        BTreeMap::from([(
            core.node_id,
            PeerNode {
                raft_addr: cfg.raft_addr(),
                client_addr: cfg.client_addr(),
            },
        )])
    } else {
        cfg.initial_members
            .iter()
            .map(|m| {
                let node = PeerNode {
                    raft_addr: m.raft_addr.clone(),
                    client_addr: m.client_addr.clone(),
                };
                (m.id, node)
            })
            .collect()
    };
    let ids: Vec<u64> = members.keys().copied().collect();
    match core.raft.initialize(members).await {
        Ok(()) => tracing::info!(members = ?ids, "cluster initialised"),
        Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
            tracing::info!(reason = %e, "already initialised")
        }
        Err(e) => return Err(anyhow::anyhow!("cannot initialise the cluster: {e}")),
    }
    Ok(None)
}

async fn join(core: Arc<NodeCore>, addr: String, stop: watch::Receiver<bool>) {
    let req = pb::AddLearnerRequest {
        node_id: core.node_id,
        raft_addr: core.config.raft_addr(),
        client_addr: core.config.client_addr(),
        wait_caught_up: false,
    };
    let mut delay = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        match add_self(&core, &addr, req.clone()).await {
            Ok(()) => {
                tracing::info!(join_addr = %addr, "joined the cluster as a learner");
                return;
            }
            Err(e) => tracing::warn!(join_addr = %addr, error = %e, "join failed; retrying"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

async fn add_self(core: &NodeCore, addr: &str, req: pb::AddLearnerRequest) -> Result<(), String> {
    let ch = core.channel(addr)?;
    let mut client = RaftMqClient::new(ch);
    let mut r = tonic::Request::new(req);
    core.auth.sign_internal(r.metadata_mut(), None);
    r.set_timeout(core.config.send_timeout() + Duration::from_secs(2));
    client
        .add_learner(r)
        .await
        .map(|_| ())
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}
