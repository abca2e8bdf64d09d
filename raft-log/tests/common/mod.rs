//! Shared test support: the test type config and a minimal real state machine.
#![allow(dead_code)]

pub mod util;

use std::io;
use std::io::Cursor;
use std::sync::Arc;

use futures::Stream;
use futures::TryStreamExt;
use openraft::entry::RaftEntry;
use openraft::storage::EntryResponder;
use openraft::storage::RaftStateMachine;
use openraft::RaftSnapshotBuilder;
use openraft::SnapshotMeta;
use openraft::StoredMembership;
use parking_lot::Mutex;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::CommittedLeaderId;
use raftmq_raft_log::types::LeaderId;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::Payload;
use raftmq_raft_log::types::PeerNode;
use serde::Deserialize;
use serde::Serialize;

openraft::declare_raft_types!(
    /// Type config of the integration tests.
    pub TestConfig:
        D = AppPayload,
        R = (),
        Node = PeerNode,
        LeaderId = LeaderId,
);

type Stored = StoredMembership<CommittedLeaderId, NodeId, PeerNode>;
type Meta = SnapshotMeta<CommittedLeaderId, NodeId, PeerNode>;
type Snapshot = openraft::Snapshot<CommittedLeaderId, NodeId, PeerNode, Cursor<Vec<u8>>>;

/// The last built or installed snapshot: meta and bytes.
type SavedSnapshot = (Meta, Vec<u8>);

/// What the test state machine keeps: last applied id, membership, and a digest of the data.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId>,
    pub membership: Stored,
    pub normal_entries: u64,
    pub normal_bytes: u64,
}

/// A small in-memory state machine.
#[derive(Clone, Default)]
pub struct MemStateMachine {
    data: Arc<Mutex<SmData>>,
    snapshot: Arc<Mutex<Option<SavedSnapshot>>>,
}

impl RaftSnapshotBuilder<TestConfig> for MemStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let d = self.data.lock().clone();
        let bytes = serde_json::to_vec(&d).map_err(io::Error::other)?;
        let meta = Meta {
            last_log_id: d.last_applied,
            last_membership: d.membership.clone(),
        };
        *self.snapshot.lock() = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Cursor::new(bytes),
        })
    }
}

impl RaftStateMachine<TestConfig> for MemStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Stored), io::Error> {
        let d = self.data.lock();
        Ok((d.last_applied, d.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TestConfig>, io::Error>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            {
                let mut d = self.data.lock();
                d.last_applied = Some(entry.log_id());
                match &entry.payload {
                    Payload::Blank => {}
                    Payload::Normal(p) => {
                        d.normal_entries += 1;
                        d.normal_bytes += p.0.len() as u64;
                    }
                    Payload::Membership(m) => {
                        d.membership = StoredMembership::new(Some(entry.log_id()), m.clone())
                    }
                }
            }
            if let Some(r) = responder {
                r.send(());
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), io::Error> {
        let bytes = snapshot.into_inner();
        let d: SmData = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
        *self.data.lock() = d;
        *self.snapshot.lock() = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.snapshot.lock().clone().map(|(meta, b)| Snapshot {
            meta,
            snapshot: Cursor::new(b),
        }))
    }
}
