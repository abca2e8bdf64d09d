//! The peer transport's snapshot traits for the store's file-backed snapshots: a
//! [`SnapshotFile`] is read in chunks by the sender, and a [`SnapshotReceiver`] (files under
//! `<data_dir>/snapshots/incoming/`) rebuilds it on the receiver.

use std::io;

use raftmq_raft_log::types::LogId;
use raftmq_store::snapshot::receiver::Leftover;
use raftmq_store::snapshot::PartialSnapshot;
use raftmq_store::SnapshotFile;
use raftmq_store::SnapshotReceiver;

use crate::network::SnapshotSink;
use crate::network::SnapshotSource;

impl SnapshotSource for SnapshotFile {
    async fn read_chunk(&mut self, offset: u64, max_bytes: usize) -> io::Result<Vec<u8>> {
        SnapshotFile::read_chunk(self, offset, max_bytes)
    }
}

/// [`SnapshotSink`] over the store's [`SnapshotReceiver`].
pub struct FileSnapshotSink(pub SnapshotReceiver);

impl SnapshotSink<SnapshotFile> for FileSnapshotSink {
    type Partial = PartialSnapshot;
    type Leftover = Leftover;

    fn leftover(&self, data: &SnapshotFile) -> Leftover {
        self.0.leftover(data)
    }

    async fn begin(&self) -> io::Result<PartialSnapshot> {
        self.0.begin()
    }

    async fn write_chunk(
        &self,
        p: &mut PartialSnapshot,
        offset: u64,
        data: &[u8],
    ) -> io::Result<()> {
        self.0.write_chunk(p, offset, data)
    }

    async fn finish(&self, p: PartialSnapshot) -> io::Result<SnapshotFile> {
        self.0.finish(p)
    }

    async fn verify(&self, data: SnapshotFile, last: Option<LogId>) -> io::Result<SnapshotFile> {
        let rx = self.0.clone();
        tokio::task::spawn_blocking(move || rx.verify(data, last))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::from)
    }
}
