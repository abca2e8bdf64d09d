//! The node crate's snapshot transport traits (copied verbatim from
//! `node/src/network/snapshot.rs`; the store cannot depend on the node) implemented for
//! [`SnapshotFile`] and [`SnapshotReceiver`] by delegation: the node pastes these two impls.
//! The test moves a real snapshot through them and installs it.

mod common;

use raftmq_raft_log::types::LogIndex;
use std::future::Future;
use std::io;

use common::msg;
use common::open_node;
use common::small_config;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use raftmq_store::snapshot::PartialSnapshot;
use raftmq_store::SnapshotFile;
use raftmq_store::SnapshotReceiver;

/// Sender side (as in the node crate).
pub trait SnapshotSource: Send + 'static {
    fn read_chunk(
        &mut self,
        offset: u64,
        max_bytes: usize,
    ) -> impl Future<Output = io::Result<Vec<u8>>> + Send;
}

/// Receiver side (as in the node crate).
pub trait SnapshotSink<SD>: Send + Sync + 'static {
    type Partial: Send + 'static;
    fn begin(&self) -> impl Future<Output = io::Result<Self::Partial>> + Send;
    fn write_chunk(
        &self,
        partial: &mut Self::Partial,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = io::Result<()>> + Send;
    fn finish(&self, partial: Self::Partial) -> impl Future<Output = io::Result<SD>> + Send;
}

impl SnapshotSource for SnapshotFile {
    async fn read_chunk(&mut self, offset: u64, max_bytes: usize) -> io::Result<Vec<u8>> {
        SnapshotFile::read_chunk(self, offset, max_bytes)
    }
}

impl SnapshotSink<SnapshotFile> for SnapshotReceiver {
    type Partial = PartialSnapshot;

    async fn begin(&self) -> io::Result<PartialSnapshot> {
        SnapshotReceiver::begin(self)
    }

    async fn write_chunk(
        &self,
        p: &mut PartialSnapshot,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        SnapshotReceiver::write_chunk(self, p, offset, data)
    }

    async fn finish(&self, p: PartialSnapshot) -> io::Result<SnapshotFile> {
        SnapshotReceiver::finish(self, p)
    }
}

async fn send<S: SnapshotSource, K: SnapshotSink<SD>, SD>(src: &mut S, sink: &K) -> io::Result<SD> {
    let mut p = sink.begin().await?;
    let mut off = 0u64;
    loop {
        let c = src.read_chunk(off, 777).await?;
        if c.is_empty() {
            break;
        }
        sink.write_chunk(&mut p, off, &c).await?;
        off += c.len() as u64;
    }
    sink.finish(p).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_moves_through_the_node_traits() {
    let (da, db) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut a = open_node(da.path(), small_config(), 4096);
    let mut b = open_node(db.path(), small_config(), 4096);
    a.create_topic("t", 1);
    for i in 0..30 {
        a.send(vec![msg("t", 0, i, "", "", i)]);
    }
    let mut snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let sink = b.store.snapshot_receiver(1 << 30);
    let file = send(&mut snap.snapshot, &sink).await.expect("transfer");
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    assert_eq!(common::queue_offsets(&b, "t", 0), (0, 30));
    // Both put the next entry at the same physical offset.
    b.next_index = a.next_index;
    let e = a.append(&raftmq_store::command::Command::batch(vec![msg(
        "t", 0, 99, "", "", 99,
    )]));
    b.append_entry(e.clone());
    let i = e.log_id.index;
    assert_eq!(
        a.log.entry_location(LogIndex::new(i)),
        b.log.entry_location(LogIndex::new(i))
    );
    assert_eq!(
        a.sm.apply_entry(&e).expect("a"),
        b.sm.apply_entry(&e).expect("b")
    );
}
