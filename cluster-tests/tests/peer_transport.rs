//! Peer transport tests of `raftmq_node::network` over real tonic servers on 127.0.0.1 (port
//! 0: nothing here restarts on its port), with in-memory `RaftLogStorage` /
//! `RaftStateMachine` TEST DOUBLES (the real stores are raft-log and store). They drive
//! `openraft::Raft` with their own type config through the public network API, so they build
//! their nodes here rather than on `TestCluster` (which runs whole raftmq nodes).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::io::Cursor;
use std::net::SocketAddr;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::RPCError;
use openraft::network::RPCOption;
use openraft::network::RaftNetworkFactory;
use openraft::network::RaftNetworkV2;
use openraft::raft::VoteRequest;
use openraft::storage::EntryResponder;
use openraft::storage::IOFlushed;
use openraft::storage::LogState;
use openraft::storage::RaftLogReader;
use openraft::storage::RaftLogStorage;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use openraft::storage::Snapshot;
use openraft::storage::SnapshotMeta;
use openraft::Config;
use openraft::EntryPayload;
use openraft::Raft;
use openraft::StoredMembership;
use raftmq_node::network::FloorFn;
use raftmq_node::network::MemorySnapshotSink;
use raftmq_node::network::PeerNetworkFactory;
use raftmq_node::network::PeerNetworkOptions;
use raftmq_node::network::PeerService;
use raftmq_node::network::PeerServiceStats;
use raftmq_node::network::DEFAULT_MAX_MESSAGE_BYTES;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use raftmq_proto::v1::RaftRequest;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::LeaderId;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

openraft::declare_raft_types!(
    /// Type config of these tests: apply answers the number of normal entries applied.
    pub TestConfig:
        D = AppPayload,
        R = u64,
        Node = PeerNode,
        LeaderId = LeaderId,
);

type Meta = SnapshotMeta<CommittedLeaderId, NodeId, PeerNode>;
type Snap = Snapshot<CommittedLeaderId, NodeId, PeerNode, Cursor<Vec<u8>>>;

// ------------------------------------------------------------------ in-memory log (test double)

#[derive(Default)]
struct LogInner {
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
    entries: BTreeMap<u64, LogEntry>,
}

#[derive(Clone, Default)]
struct MemLog(Arc<Mutex<LogInner>>);

impl MemLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.0.lock().expect("test lock")
    }
}

impl RaftLogReader<TestConfig> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<LogEntry>> {
        Ok(self
            .lock()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.lock().vote)
    }
}

impl RaftLogStorage<TestConfig> for MemLog {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> io::Result<LogState<TestConfig>> {
        let g = self.lock();
        let last = g
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(g.purged);
        Ok(LogState {
            last_purged_log_id: g.purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        self.lock().vote = Some(*vote);
        Ok(())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        self.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TestConfig>) -> io::Result<()>
    where
        I: IntoIterator<Item = LogEntry> + Send,
        I::IntoIter: Send,
    {
        {
            let mut g = self.lock();
            for e in entries {
                g.entries.insert(e.log_id.index, e);
            }
        }
        callback.io_completed(Ok(()));
        Ok(())
    }

    async fn truncate_after(&mut self, last: Option<LogId>) -> io::Result<()> {
        let mut g = self.lock();
        let keep_up_to = last.map(|l| l.index + 1).unwrap_or(0);
        g.entries.split_off(&keep_up_to);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        let mut g = self.lock();
        g.entries = g.entries.split_off(&(log_id.index + 1));
        g.purged = Some(log_id);
        Ok(())
    }
}

// ------------------------------------------------------------------ in-memory state machine

#[derive(Default)]
struct SmInner {
    applied: Option<LogId>,
    membership: StoredMembership<CommittedLeaderId, NodeId, PeerNode>,
    data: Vec<Vec<u8>>,
    snapshot: Option<(Meta, Vec<u8>)>,
}

#[derive(Clone, Default)]
struct MemSm(Arc<Mutex<SmInner>>);

impl MemSm {
    fn lock(&self) -> std::sync::MutexGuard<'_, SmInner> {
        self.0.lock().expect("test lock")
    }

    fn data(&self) -> Vec<Vec<u8>> {
        self.lock().data.clone()
    }
}

impl RaftSnapshotBuilder<TestConfig> for MemSm {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> io::Result<Snap> {
        let mut g = self.lock();
        let bytes = postcard::to_stdvec(&g.data).map_err(io::Error::other)?;
        let meta = Meta {
            last_log_id: g.applied,
            last_membership: g.membership.clone(),
        };
        g.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Cursor::new(bytes),
        })
    }
}

impl RaftStateMachine<TestConfig> for MemSm {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> io::Result<(
        Option<LogId>,
        StoredMembership<CommittedLeaderId, NodeId, PeerNode>,
    )> {
        let g = self.lock();
        Ok((g.applied, g.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: futures::Stream<Item = io::Result<EntryResponder<TestConfig>>> + Unpin + Send,
    {
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let count = {
                let mut g = self.lock();
                g.applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Normal(p) => g.data.push(p.0.to_vec()),
                    EntryPayload::Membership(m) => {
                        g.membership = StoredMembership::new(Some(entry.log_id), m)
                    }
                    EntryPayload::Blank => {}
                }
                g.data.len() as u64
            };
            if let Some(r) = responder {
                r.send(count);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Cursor<Vec<u8>>) -> io::Result<()> {
        let bytes = snapshot.into_inner();
        let data: Vec<Vec<u8>> = postcard::from_bytes(&bytes).map_err(io::Error::other)?;
        let mut g = self.lock();
        g.data = data;
        g.applied = meta.last_log_id;
        g.membership = meta.last_membership.clone();
        g.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snap>> {
        Ok(self.lock().snapshot.clone().map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Cursor::new(bytes),
        }))
    }
}

// ------------------------------------------------------------------ harness

struct TestNode {
    id: NodeId,
    raft: Raft<TestConfig, MemSm>,
    sm: MemSm,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
    stats: Arc<PeerServiceStats>,
}

impl TestNode {
    fn peer(&self) -> PeerNode {
        PeerNode {
            raft_addr: self.addr.to_string(),
            client_addr: String::new(),
        }
    }
}

async fn start_node(id: NodeId, cluster_id: &str) -> TestNode {
    start_node_with_limit(id, cluster_id, DEFAULT_MAX_MESSAGE_BYTES).await
}

async fn start_node_with_limit(id: NodeId, cluster_id: &str, max_message_bytes: usize) -> TestNode {
    start_node_with(id, cluster_id, max_message_bytes, None).await
}

async fn start_node_with(
    id: NodeId,
    cluster_id: &str,
    max_message_bytes: usize,
    floor: Option<FloorFn>,
) -> TestNode {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = incoming.local_addr().expect("local addr");
    let config = Config {
        cluster_name: cluster_id.to_string(),
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: 800,
        // Tiny chunks, so a snapshot transfer takes many of them.
        snapshot_max_chunk_size: 7,
        ..Default::default()
    };
    let config = Arc::new(config.validate().expect("valid raft config"));
    let mut opts = PeerNetworkOptions::new(cluster_id);
    opts.backoff_max = Duration::from_millis(200);
    opts.max_message_bytes = max_message_bytes;
    let network = PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(id, opts);
    let sm = MemSm::default();
    let raft = Raft::new(id, config, network, MemLog::default(), sm.clone())
        .await
        .expect("raft starts");
    let mut svc = PeerService::new(raft.clone(), id, cluster_id, MemorySnapshotSink::default());
    if let Some(f) = floor {
        svc = svc.with_lost_commit_floor(f);
    }
    let stats = svc.stats();
    let svc = svc.into_server(max_message_bytes);
    let server = tokio::spawn(async move {
        Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming)
            .await
            .expect("peer server runs");
    });
    TestNode {
        id,
        raft,
        sm,
        addr,
        server,
        stats,
    }
}

const WAIT: Option<Duration> = Some(Duration::from_secs(10));

async fn wait_leader(nodes: &[&TestNode]) -> NodeId {
    let m = nodes[0]
        .raft
        .wait(WAIT)
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await
        .expect("leader elected");
    m.current_leader.expect("checked above")
}

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_replicate_and_ship_snapshot_in_chunks() {
    let cluster = "test-cluster";
    let n1 = start_node(1, cluster).await;
    let n2 = start_node(2, cluster).await;
    let n3 = start_node(3, cluster).await;
    let nodes = [&n1, &n2, &n3];
    let members: BTreeMap<NodeId, PeerNode> = nodes.iter().map(|n| (n.id, n.peer())).collect();
    n1.raft.initialize(members).await.expect("initialize");

    let leader_id = wait_leader(&nodes).await;
    let leader = nodes
        .iter()
        .find(|n| n.id == leader_id)
        .expect("leader is a member");
    leader
        .raft
        .wait(WAIT)
        .leader_with_quorum_acked(None, "leader heard from a quorum")
        .await
        .expect("leader lease established");
    let mut last = 0;
    for i in 0..5u8 {
        let resp = leader
            .raft
            .client_write(AppPayload::from(vec![i; 3]))
            .await
            .expect("quorum write");
        assert_eq!(resp.data, u64::from(i) + 1);
        last = resp.log_id.index;
    }
    for n in &nodes {
        n.raft
            .wait(WAIT)
            .applied_index_at_least(Some(last), "replicated")
            .await
            .expect("every node applies");
        assert_eq!(
            n.sm.data(),
            (0..5u8).map(|i| vec![i; 3]).collect::<Vec<_>>()
        );
    }

    // Snapshot, purge the log, then add a learner: it can only catch up by snapshot.
    leader
        .raft
        .trigger()
        .snapshot()
        .await
        .expect("trigger snapshot");
    leader
        .raft
        .wait(WAIT)
        .metrics(
            |m| m.snapshot.map(|s| s.index) >= Some(last),
            "snapshot built",
        )
        .await
        .expect("snapshot built");
    leader.raft.trigger().purge_log(last).await.expect("purge");
    leader
        .raft
        .wait(WAIT)
        .metrics(|m| m.purged.map(|p| p.index) == Some(last), "purged")
        .await
        .expect("log purged");

    let n4 = start_node(4, cluster).await;
    leader
        .raft
        .add_learner(4, n4.peer(), true)
        .await
        .expect("learner added");
    n4.raft
        .wait(WAIT)
        .applied_index_at_least(Some(last), "learner caught up")
        .await
        .expect("learner installs the snapshot");
    assert_eq!(n4.sm.data().len(), 5);
    assert!(n4.sm.lock().snapshot.is_some(), "learner got a snapshot");
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    // The stats are bumped after install_full_snapshot answers, which may trail the metrics.
    for _ in 0..100 {
        if load(&n4.stats.snapshots_installed) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(load(&n4.stats.snapshots_installed), 1);
    assert!(
        load(&n4.stats.snapshot_chunks) > 2,
        "sent in several chunks"
    );
    let streamed: u64 = nodes
        .iter()
        .map(|n| load(&n.stats.stream_append_requests))
        .sum();
    assert!(streamed > 0, "replication used StreamAppend");
    assert!(nodes.iter().all(|n| load(&n.stats.refused) == 0));

    for n in [n1, n2, n3, n4] {
        n.raft.shutdown().await.expect("shutdown");
        n.server.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_cluster_id_is_refused_naming_both_ids() {
    let n1 = start_node(1, "alpha").await;
    let mut raw = RaftPeerClient::connect(format!("http://{}", n1.addr))
        .await
        .expect("connect");
    let status = raw
        .vote(RaftRequest {
            cluster_id: "beta".into(),
            from_node_id: 9,
            to_node_id: 1,
            codec: raftmq_proto::v1::Codec::PostcardV1 as i32,
            payload: Default::default(),
        })
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(
        status.message().contains("\"alpha\""),
        "{}",
        status.message()
    );
    assert!(
        status.message().contains("\"beta\""),
        "{}",
        status.message()
    );

    // Through the openraft network: refused requests surface as Unreachable (Raft backs off).
    let mut factory =
        PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(9, PeerNetworkOptions::new("beta"));
    let mut net = factory.new_client(1, &n1.peer()).await;
    let vote = VoteRequest::<TestConfig>::new(Vote::new(1, 9), None);
    let err = net
        .vote(vote.clone(), RPCOption::new(Duration::from_secs(2)))
        .await
        .expect_err("refused");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("alpha"), "{err}");

    // Wrong target node id is refused too.
    let mut ok_cluster =
        PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(9, PeerNetworkOptions::new("alpha"));
    let mut right = ok_cluster.new_client(1, &n1.peer()).await;
    let mut wrong_node = ok_cluster.new_client(2, &n1.peer()).await;
    let err = wrong_node
        .vote(vote.clone(), RPCOption::new(Duration::from_secs(2)))
        .await
        .expect_err("wrong node");
    assert!(err.to_string().contains("node id mismatch"), "{err}");
    // The right cluster and node get a real answer.
    right
        .vote(vote, RPCOption::new(Duration::from_secs(2)))
        .await
        .expect("vote answered");

    n1.raft.shutdown().await.expect("shutdown");
    n1.server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_lost_commit_floor_votes_only_for_candidates_holding_it() {
    let floor = LogId::new_term_index(2, 10);
    let n1 = start_node_with(
        1,
        "floor",
        DEFAULT_MAX_MESSAGE_BYTES,
        Some(Arc::new(move || Some(floor))),
    )
    .await;
    let mut factory =
        PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(9, PeerNetworkOptions::new("floor"));
    let mut net = factory.new_client(1, &n1.peer()).await;
    let opt = || RPCOption::new(Duration::from_secs(2));
    // Below the floor (Raft order: term first): refused, answering the floor as last log id.
    for (term, last) in [
        (5, None),
        (6, Some(LogId::new_term_index(1, 50))),
        (7, Some(LogId::new_term_index(2, 9))),
    ] {
        let req = VoteRequest::<TestConfig>::new(Vote::new(term, 9), last);
        let pre = net
            .pre_vote(req.clone(), opt())
            .await
            .expect("pre-vote answered");
        assert!(
            !pre.vote_granted,
            "pre-vote below the floor granted: {last:?}"
        );
        let resp = net.vote(req, opt()).await.expect("vote answered");
        assert!(!resp.vote_granted, "vote below the floor granted: {last:?}");
        assert_eq!(resp.last_log_id, Some(floor));
    }
    // Raft never saw them: its vote is unchanged.
    assert_ne!(n1.raft.metrics().borrow_watched().vote, Vote::new(7, 9));
    // At the floor (or a later term): Raft decides, and grants (its own log is empty).
    let req = VoteRequest::<TestConfig>::new(Vote::new(8, 9), Some(floor));
    let resp = net.vote(req, opt()).await.expect("vote answered");
    assert!(resp.vote_granted, "{resp:?}");

    n1.raft.shutdown().await.expect("shutdown");
    n1.server.abort();
}

#[tokio::test]
async fn dead_peer_is_unreachable_and_backoff_is_capped() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let mut opts = PeerNetworkOptions::new("c");
    opts.backoff_initial = Duration::from_millis(10);
    opts.backoff_max = Duration::from_millis(40);
    let mut factory = PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(1, opts);
    let node = PeerNode {
        raft_addr: addr.to_string(),
        client_addr: String::new(),
    };
    let mut net = factory.new_client(2, &node).await;
    let err = net
        .vote(
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_secs(2)),
        )
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");

    let delays: Vec<u64> = net
        .backoff()
        .expect("we provide a backoff")
        .take(5)
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(delays, vec![10, 20, 40, 40, 40]);

    let bad = PeerNode {
        raft_addr: "not a uri\u{0}".into(),
        client_addr: String::new(),
    };
    let mut net = factory.new_client(3, &bad).await;
    let err = net
        .vote(
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_secs(1)),
        )
        .await
        .expect_err("bad address");
    assert!(matches!(err, RPCError::Unreachable(_)), "{err:?}");
}

#[tokio::test]
async fn silent_peer_times_out_within_the_rpc_ttl() {
    // Accepts TCP connections and never speaks HTTP/2.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let mut factory =
        PeerNetworkFactory::<TestConfig, Cursor<Vec<u8>>>::new(1, PeerNetworkOptions::new("c"));
    let node = PeerNode {
        raft_addr: addr.to_string(),
        client_addr: String::new(),
    };
    let mut net = factory.new_client(2, &node).await;
    let started = std::time::Instant::now();
    let err = net
        .vote(
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_millis(300)),
        )
        .await
        .expect_err("no answer");
    assert!(matches!(err, RPCError::Timeout(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "bounded by the ttl"
    );
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_size_limit_are_split_and_still_replicate() {
    // Parts may carry 24 KiB; entries are 20 KiB, so a request with several entries is cut.
    let limit = (64 << 10) + (24 << 10);
    let cluster = "split";
    let n1 = start_node_with_limit(1, cluster, limit).await;
    let n2 = start_node_with_limit(2, cluster, limit).await;
    let n3 = start_node_with_limit(3, cluster, limit).await;
    let nodes = [&n1, &n2, &n3];
    let members: BTreeMap<NodeId, PeerNode> = nodes.iter().map(|n| (n.id, n.peer())).collect();
    n1.raft.initialize(members).await.expect("initialize");
    let leader_id = wait_leader(&nodes).await;
    let leader = nodes
        .iter()
        .find(|n| n.id == leader_id)
        .expect("leader is a member");
    leader
        .raft
        .wait(WAIT)
        .leader_with_quorum_acked(None, "leader heard from a quorum")
        .await
        .expect("leader lease established");

    let writes = (0..24u8).map(|i| {
        leader
            .raft
            .client_write(AppPayload::from(vec![i; 20 << 10]))
    });
    let results = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(writes))
        .await
        .expect("writes commit (oversized requests must be split)");
    let last = results
        .into_iter()
        .map(|r| r.expect("quorum write").log_id.index)
        .max()
        .expect("24 writes");
    for n in &nodes {
        n.raft
            .wait(WAIT)
            .applied_index_at_least(Some(last), "replicated")
            .await
            .expect("every node applies");
        assert_eq!(n.sm.data().len(), 24);
        assert_eq!(
            n.stats.refused.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }
    for n in [n1, n2, n3] {
        n.raft.shutdown().await.expect("shutdown");
        n.server.abort();
    }
}

fn log_id(index: u64) -> LogId {
    LogId {
        leader_id: CommittedLeaderId::new(1),
        index,
    }
}

/// A `RaftRequest` of node 9 to node 1 of `cluster` carrying `payload`.
fn request_to_1(cluster: &str, payload: Vec<u8>) -> RaftRequest {
    RaftRequest {
        cluster_id: cluster.into(),
        from_node_id: 9,
        to_node_id: 1,
        codec: raftmq_proto::v1::Codec::PostcardV1 as i32,
        payload: payload.into(),
    }
}

/// The status a StreamAppend call of `request` ends with before any answer.
async fn first_refusal(
    client: &mut RaftPeerClient<tonic::transport::Channel>,
    request: RaftRequest,
) -> tonic::Status {
    let mut answers = client
        .stream_append(futures::stream::iter([request]))
        .await
        .expect("the call is answered")
        .into_inner();
    answers.message().await.expect_err("refused")
}

/// StreamAppend is served on the raw HTTP/2 body (`raw_append`); tonic's own generated client
/// gets what tonic's server would give it: an answer per request, entries stored, and a
/// refusal as the stream's status after the answers before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_append_answers_a_plain_grpc_client() {
    use openraft::raft::AppendEntriesRequest;
    let limit = 64 << 10;
    let n1 = start_node_with_limit(1, "raw", limit).await;
    let mut raw = RaftPeerClient::connect(format!("http://{}", n1.addr))
        .await
        .expect("connect");
    let append = |entries: Vec<LogEntry>, commit: Option<LogId>| {
        let rpc = AppendEntriesRequest::<TestConfig> {
            vote: Vote::new_committed(1, 9),
            prev_log_id: entries
                .first()
                .and_then(|e| e.log_id.index.checked_sub(1).map(log_id)),
            entries,
            leader_commit: commit,
        };
        request_to_1("raw", postcard::to_stdvec(&rpc).expect("encodes"))
    };
    let entry = |i: u64, bytes: usize| LogEntry {
        log_id: log_id(i),
        payload: openraft::EntryPayload::Normal(AppPayload::from(vec![i as u8; bytes])),
    };
    // Two good requests (payloads above the leader's 8 KiB share size among them), then one
    // for another cluster: two answers, then FAILED_PRECONDITION.
    let requests = vec![
        append(vec![entry(0, 10), entry(1, 9000)], None),
        append(vec![entry(2, 20_000)], Some(log_id(2))),
        request_to_1("elsewhere", Vec::new()),
    ];
    let mut answers = raw
        .stream_append(futures::stream::iter(requests))
        .await
        .expect("the call is answered")
        .into_inner();
    for n in 0..2 {
        let reply = answers
            .message()
            .await
            .expect("an answer")
            .expect("not the end");
        assert!(!reply.payload.is_empty(), "answer {n}");
    }
    let status = answers.message().await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("elsewhere"), "{status:?}");
    n1.raft
        .wait(WAIT)
        .applied_index_at_least(Some(2), "the streamed entries apply")
        .await
        .expect("applied");
    assert_eq!(n1.sm.data().last().map(|d| d.len()), Some(20_000));

    // A payload that is not an AppendEntries request: INVALID_ARGUMENT.
    let status = first_refusal(&mut raw, request_to_1("raw", vec![0xff; 40])).await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");

    // A request over the node's message limit: OUT_OF_RANGE naming both sizes.
    let mut raw = raw.max_encoding_message_size(usize::MAX);
    let status = first_refusal(&mut raw, request_to_1("raw", vec![1; limit + 10])).await;
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    assert!(
        status
            .message()
            .contains(&format!("the limit is: {limit} bytes")),
        "{status:?}"
    );

    n1.raft.shutdown().await.expect("shutdown");
    n1.server.abort();
}
