//! End to end through openraft: a single-node Raft over the real CommitLog and this state
//! machine; client writes answer acks, reads see them, and a restart (clean or not) re-applies
//! committed entries after the checkpoint idempotently.

mod common;

use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::msg;
use common::small_config;
use openraft::error::RPCError;
use openraft::error::ReplicationClosed;
use openraft::error::StreamingError;
use openraft::network::RPCOption;
use openraft::network::RaftNetworkFactory;
use openraft::network::RaftNetworkV2;
use openraft::raft::AppendEntriesRequest;
use openraft::raft::AppendEntriesResponse;
use openraft::raft::SnapshotResponse;
use openraft::raft::VoteRequest;
use openraft::raft::VoteResponse;
use openraft::Config;
use openraft::SnapshotPolicy;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use raftmq_store::command::Command;
use raftmq_store::sm::Snapshot;
use raftmq_store::topic::TopicConfig;
use raftmq_store::ApplyResponse;
use raftmq_store::LogStore;
use raftmq_store::PullRequest;
use raftmq_store::Raft;
use raftmq_store::SnapshotFile;
use raftmq_store::Store;
use raftmq_store::TypeConfig;

/// No peers: a single-node cluster never sends.
struct NoNet;

impl RaftNetworkFactory<TypeConfig> for NoNet {
    type Network = NoNet;
    async fn new_client(&mut self, _target: u64, _node: &PeerNode) -> NoNet {
        NoNet
    }
}

impl RaftNetworkV2<TypeConfig> for NoNet {
    type SnapshotData = SnapshotFile;
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        panic!("single node: no peer to append to")
    }
    async fn vote(
        &mut self,
        _rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        panic!("single node: no peer to ask for a vote")
    }
    async fn full_snapshot(
        &mut self,
        _vote: Vote,
        _snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        panic!("single node: no peer to send a snapshot to")
    }
}

async fn start(dir: &Path) -> (Raft, Store, LogStore) {
    let log = LogStore::open(dir, common::log_config(8192)).expect("log");
    let mut cfg = small_config();
    cfg.checkpoint_every_entries = 5;
    let (store, sm) = raftmq_store::open(dir, cfg, log.clone()).expect("store");
    let config = Config {
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: u64::MAX,
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..Config::default()
    };
    let raft = Raft::new(
        1,
        Arc::new(config.validate().expect("config")),
        NoNet,
        log.clone(),
        sm,
    )
    .await
    .expect("raft");
    (raft, store, log)
}

async fn write(raft: &Raft, cmd: Command) -> ApplyResponse {
    for _ in 0..100 {
        match raft.client_write(cmd.encode().expect("encode")).await {
            Ok(r) => return r.data,
            Err(e) => {
                tracing::info!(error = %e, "retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    panic!("no leader")
}

fn count(store: &Store) -> usize {
    store
        .pull(&PullRequest {
            topic: "t".into(),
            queue_id: QueueId::new(0),
            offset: QueueOffset::new(0),
            max_count: 1000,
            max_bytes: u64::MAX,
            tag_expr: "*".into(),
        })
        .expect("pull")
        .messages
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_write_read_restart() {
    let d = tempfile::tempdir().expect("tempdir");
    let (raft, store, log) = start(d.path()).await;
    raft.initialize(BTreeMap::from([(1u64, PeerNode::default())]))
        .await
        .expect("init");
    let r = write(&raft, Command::CreateTopic(TopicConfig::new("t", 1))).await;
    assert!(matches!(r, ApplyResponse::Topic(_)), "{r:?}");
    for i in 0..12u64 {
        let r = write(&raft, Command::batch(vec![msg("t", 0, i, "", "", i)])).await;
        let ApplyResponse::Sent(acks) = r else {
            panic!("{r:?}")
        };
        assert_eq!(acks[0].queue_offset.get(), i);
    }
    assert_eq!(count(&store), 12);
    // Unclean stop: no Store::close (the abort marker stays, the checkpoint lags).
    raft.shutdown().await.expect("shutdown");
    log.halt_without_flush();
    drop((raft, store, log));

    let (raft, store, log) = start(d.path()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = write(&raft, Command::batch(vec![msg("t", 0, 12, "", "", 12)])).await;
    let ApplyResponse::Sent(acks) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        acks[0].queue_offset.get(),
        12,
        "offsets continue after replay"
    );
    assert_eq!(count(&store), 13);
    store.validate().expect("valid");
    raft.shutdown().await.expect("shutdown");
    store.close().expect("close");
    log.close().expect("close");
}
