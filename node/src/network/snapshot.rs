//! How the peer transport moves a state-machine snapshot without knowing what is inside it.
//!
//! The sender reads the snapshot through [`SnapshotSource`] in chunks; the receiver rebuilds
//! it through a [`SnapshotSink`] and hands the result to `Raft::install_full_snapshot`. The
//! state machine crate decides what its `SnapshotData` is (an in-memory buffer, a file) by
//! implementing the two traits; [`MemorySnapshotSink`] and the impl for `Cursor<Vec<u8>>`
//! cover in-memory snapshots.
//!
//! Invariant: chunks are read, sent and written in order, each starting where the previous
//! one ended; the receiver refuses a gap or overlap.

use std::future::Future;
use std::io;
use std::io::Cursor;

use raftmq_raft_log::types::LogId;

/// Sender side: a snapshot readable by byte offset.
pub trait SnapshotSource: Send + 'static {
    /// Reads at most `max_bytes` starting at byte `offset` of the snapshot. An empty result
    /// means `offset` is the end.
    fn read_chunk(
        &mut self,
        offset: u64,
        max_bytes: usize,
    ) -> impl Future<Output = io::Result<Vec<u8>>> + Send;
}

impl SnapshotSource for Cursor<Vec<u8>> {
    async fn read_chunk(&mut self, offset: u64, max_bytes: usize) -> io::Result<Vec<u8>> {
        let buf = self.get_ref();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(buf.len());
        let end = start.saturating_add(max_bytes).min(buf.len());
        Ok(buf[start..end].to_vec())
    }
}

/// Receiver side: rebuilds a snapshot of type `SD` from chunks.
pub trait SnapshotSink<SD>: Send + Sync + 'static {
    /// A snapshot being received.
    type Partial: Send + 'static;

    /// Starts receiving a snapshot.
    fn begin(&self) -> impl Future<Output = io::Result<Self::Partial>> + Send;

    /// Appends `data`, which starts at byte `offset` (= the bytes written so far).
    fn write_chunk(
        &self,
        partial: &mut Self::Partial,
        offset: u64,
        data: &[u8],
    ) -> impl Future<Output = io::Result<()>> + Send;

    /// What a verified snapshot keeps on disk until the state machine takes it over: held
    /// while openraft installs it and dropped once openraft answered, it removes what a
    /// declined or failed install left behind (`()` for in-memory snapshots). A `Partial`
    /// dropped before `finish` must likewise leave nothing behind.
    type Leftover: Send + 'static;

    /// All chunks arrived: produce the snapshot data to install.
    fn finish(&self, partial: Self::Partial) -> impl Future<Output = io::Result<SD>> + Send;

    /// The [`Leftover`](Self::Leftover) guard of a verified `data`.
    fn leftover(&self, data: &SD) -> Self::Leftover;

    /// Checks a finished snapshot that should end at `last_log_id` before it is handed to
    /// openraft. An error refuses it: the sender is told and sends again, nothing is
    /// installed. The default accepts everything (an in-memory snapshot has no parts).
    fn verify(
        &self,
        data: SD,
        last_log_id: Option<LogId>,
    ) -> impl Future<Output = io::Result<SD>> + Send
    where
        SD: Send,
    {
        let _ = last_log_id;
        async move { Ok(data) }
    }
}

/// Receives snapshots into memory as `Cursor<Vec<u8>>`, refusing any larger than a limit.
#[derive(Clone, Debug)]
pub struct MemorySnapshotSink {
    /// Largest snapshot accepted, in bytes.
    pub max_snapshot_bytes: u64,
}

impl Default for MemorySnapshotSink {
    fn default() -> Self {
        Self {
            max_snapshot_bytes: 1 << 30,
        }
    }
}

impl SnapshotSink<Cursor<Vec<u8>>> for MemorySnapshotSink {
    type Partial = Vec<u8>;
    type Leftover = ();

    fn leftover(&self, _data: &Cursor<Vec<u8>>) {}

    async fn begin(&self) -> io::Result<Vec<u8>> {
        Ok(Vec::new())
    }

    async fn write_chunk(&self, partial: &mut Vec<u8>, offset: u64, data: &[u8]) -> io::Result<()> {
        if offset != partial.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "snapshot chunk at offset {offset}, expected {}",
                    partial.len()
                ),
            ));
        }
        if offset.saturating_add(data.len() as u64) > self.max_snapshot_bytes {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "snapshot larger than max_snapshot_bytes {}",
                    self.max_snapshot_bytes
                ),
            ));
        }
        partial.extend_from_slice(data);
        Ok(())
    }

    async fn finish(&self, partial: Vec<u8>) -> io::Result<Cursor<Vec<u8>>> {
        Ok(Cursor::new(partial))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_round_trip_in_chunks_and_gap_refused() {
        let mut src = Cursor::new((0u8..=255).collect::<Vec<u8>>());
        let sink = MemorySnapshotSink::default();
        let mut partial = sink.begin().await.expect("begin");
        let mut offset = 0u64;
        loop {
            let chunk = src.read_chunk(offset, 100).await.expect("read");
            if chunk.is_empty() {
                break;
            }
            sink.write_chunk(&mut partial, offset, &chunk)
                .await
                .expect("write");
            offset += chunk.len() as u64;
        }
        let out = sink.finish(partial).await.expect("finish");
        assert_eq!(out.get_ref(), src.get_ref());

        let mut p = sink.begin().await.expect("begin");
        assert!(sink.write_chunk(&mut p, 5, b"x").await.is_err());
        let small = MemorySnapshotSink {
            max_snapshot_bytes: 2,
        };
        let mut p = small.begin().await.expect("begin");
        assert!(small.write_chunk(&mut p, 0, b"abc").await.is_err());
    }
}
