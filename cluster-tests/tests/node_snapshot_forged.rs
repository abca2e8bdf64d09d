//! Forged InstallSnapshot calls over a node's peer port (plaintext, ids learned from
//! `ClusterStatus`): a snapshot whose last log id lies above its vote, one with no segments,
//! one larger than `max-snapshot-bytes`, and a transfer cut short are each refused before
//! openraft sees them; the node keeps serving and its incoming snapshot dir is empty after.

use std::path::Path;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use openraft::async_runtime::WatchReceiver;
use raftmq_node::config::FlushPolicy;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use raftmq_raft_log::types::Vote;
use raftmq_store::snapshot::format::encode_header;
use raftmq_store::snapshot::format::encode_manifest;
use raftmq_store::snapshot::format::Manifest;
use raftmq_store::types::PhysOffset;
use tonic::Code;

type Meta = openraft::storage::SnapshotMeta<CommittedLeaderId, NodeId, PeerNode>;

/// Snapshot bytes whose manifest says `last` and holds no segments, no queues (a valid
/// prefix CRC: only the manifest's consistency can refuse it).
fn no_segment_snapshot(last: LogId, membership: Meta, segment_bytes: u64) -> Vec<u8> {
    let m = Manifest {
        last_log_id: Some(last),
        membership: membership.last_membership,
        topics: Default::default(),
        offsets: Default::default(),
        receive: Default::default(),
        dedup: Default::default(),
        users: Default::default(),
        dispatched_phys_end: PhysOffset::new(0),
        log_end_phys: None,
        segment_bytes,
        queues: Vec::new(),
        segments: Vec::new(),
    };
    let mbytes = encode_manifest(&m).expect("manifest encodes");
    let mut out = encode_header(mbytes.len() as u64).to_vec();
    out.extend_from_slice(&mbytes);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn incoming_files(data_dir: &Path) -> Vec<String> {
    let dir = data_dir.join("snapshots").join("incoming");
    match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

struct Forger {
    cluster_id: String,
    to: NodeId,
    addr: String,
}

impl Forger {
    /// Sends `chunks` (the first carries the header with `vote` and `meta`); `done` on the
    /// last one unless `cut` (the stream then just ends).
    async fn send(
        &self,
        vote: Vote,
        meta: &Meta,
        data: Vec<Vec<u8>>,
        cut: bool,
    ) -> Result<(), tonic::Status> {
        let header = pb::SnapshotHeader {
            cluster_id: self.cluster_id.clone(),
            from_node_id: 7,
            to_node_id: self.to,
            codec: pb::Codec::PostcardV1 as i32,
            vote: postcard::to_stdvec(&vote).expect("vote encodes"),
            meta: postcard::to_stdvec(meta).expect("meta encodes"),
        };
        let mut chunks = Vec::new();
        let mut offset = 0u64;
        let n = data.len();
        for (i, d) in data.into_iter().enumerate() {
            let len = d.len() as u64;
            chunks.push(pb::SnapshotChunk {
                header: (i == 0).then(|| header.clone()),
                offset,
                data: d,
                done: i + 1 == n && !cut,
            });
            offset += len;
        }
        let mut c = RaftPeerClient::connect(format!("http://{}", self.addr))
            .await
            .expect("peer port connects")
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        c.install_snapshot(futures::stream::iter(chunks))
            .await
            .map(|_| ())
    }
}

/// The node is still leader, its Raft runs, and a send commits.
async fn still_serving(cluster: &TestCluster, term_before: u64) {
    let node = cluster.node(1);
    let m = node.raft().metrics().borrow_watched().clone();
    assert!(
        m.running_state.is_ok(),
        "raft stopped: {:?}",
        m.running_state
    );
    assert_eq!(
        m.current_term, term_before,
        "the forged vote reached openraft"
    );
    let mut c = cluster.grpc(1).await.expect("connect");
    let sent = tokio::time::timeout(
        Duration::from_secs(30),
        c.send(pb::SendRequest {
            message: Some(msg("after-forgery", b"x")),
        }),
    )
    .await
    .expect("send answers in time");
    sent.expect("send commits after the forged snapshot");
}

/// A single-node cluster (limit `max-snapshot-bytes` = 1 MiB) and what a forger needs.
struct Setup {
    cluster: TestCluster,
    forger: Forger,
    term: u64,
    base: Meta,
    segment_bytes: u64,
}

async fn setup() -> Setup {
    let cluster = TestCluster::start(&[FlushPolicy::Sync], |c| {
        c.max_snapshot_bytes = 1 << 20;
    })
    .await
    .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let node = cluster.node(1);
    let metrics = node.raft().metrics().borrow_watched().clone();
    let base = Meta {
        last_log_id: None,
        last_membership: (*metrics.membership_config).clone(),
    };
    let forger = Forger {
        cluster_id: node.config().cluster_id.clone(),
        to: 1,
        addr: node.addrs().raft.to_string(),
    };
    Setup {
        term: metrics.current_term,
        segment_bytes: node.config().log.segment_bytes,
        forger,
        base,
        cluster,
    }
}

impl Setup {
    fn meta(&self, last: LogId) -> Meta {
        Meta {
            last_log_id: Some(last),
            ..self.base.clone()
        }
    }

    /// Still serving, nothing left under `snapshots/incoming`; then shut down.
    async fn check_and_stop(self) {
        still_serving(&self.cluster, self.term).await;
        let left = incoming_files(&self.cluster.data_dir(1));
        assert_eq!(
            left,
            Vec::<String>::new(),
            "files left in snapshots/incoming"
        );
        self.cluster.shutdown().await.expect("shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_above_its_vote_is_refused_and_the_node_keeps_running() {
    let s = setup().await;
    // openraft asserts the snapshot's last log id is not above the vote: the node would stop.
    let last = LogId::new_term_index(s.term + 5, 10_000);
    let meta = s.meta(last);
    let bytes = no_segment_snapshot(last, meta.clone(), s.segment_bytes);
    let vote = Vote::new_committed(s.term + 1, 7);
    let e = s
        .forger
        .send(vote, &meta, vec![bytes], false)
        .await
        .expect_err("a snapshot above its vote is refused");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("vote"), "{e:?}");
    s.check_and_stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_without_segments_fails_verify() {
    let s = setup().await;
    let last = LogId::new_term_index(s.term + 1, 10_000);
    let meta = s.meta(last);
    let bytes = no_segment_snapshot(last, meta.clone(), s.segment_bytes);
    let vote = Vote::new_committed(s.term + 1, 7);
    let e = s
        .forger
        .send(vote, &meta, vec![bytes], false)
        .await
        .expect_err("a snapshot without segments is refused");
    assert_eq!(e.code(), Code::DataLoss, "{e:?}");
    assert!(e.message().contains("segment"), "{e:?}");
    s.check_and_stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_cut_short_leaves_no_file() {
    let s = setup().await;
    let meta = s.meta(LogId::new_term_index(s.term + 1, 10_000));
    let vote = Vote::new_committed(s.term + 1, 7);
    let chunks = vec![vec![0u8; 4096], vec![1u8; 4096]];
    let e = s
        .forger
        .send(vote, &meta, chunks, true)
        .await
        .expect_err("a cut transfer is refused");
    assert_eq!(e.code(), Code::Aborted, "{e:?}");
    s.check_and_stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_over_max_snapshot_bytes_is_refused_as_it_arrives() {
    let s = setup().await;
    let meta = s.meta(LogId::new_term_index(s.term + 1, 10_000));
    let vote = Vote::new_committed(s.term + 1, 7);
    let chunks = vec![vec![0u8; 768 << 10], vec![0u8; 768 << 10]];
    let e = s
        .forger
        .send(vote, &meta, chunks, false)
        .await
        .expect_err("an oversized snapshot is refused");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("max-snapshot-bytes"), "{e:?}");
    s.check_and_stop().await;
}
