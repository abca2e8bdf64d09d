//! The Raft type vocabulary every raftmq crate shares.
//!
//! raft-log is generic over the openraft type config `C` so that the state machine crate
//! (`store`) can pick its own apply response type `C::R`; everything the log itself stores is
//! fixed here: node ids, the node address record, the standard (one leader per term) leader id,
//! and the opaque application payload whose bytes the `store` crate encodes.

use std::fmt;

use openraft::RaftTypeConfig;
use serde::Deserialize;
use serde::Serialize;

/// Identity of a node in the cluster.
pub type NodeId = u64;

/// A Raft term.
pub type Term = u64;

/// Index of an entry in the Raft log (the first entry written by `initialize` has index 0).
pub type LogIndex = u64;

/// A byte position in the CommitLog. The same log index sits at the same physical offset on
/// every replica, so a physical offset names the same bytes cluster-wide.
pub type PhysOffset = u64;

/// Standard Raft leader id: at most one leader per term, so a committed leader id is a term.
pub type LeaderId = openraft::vote::leader_id_std::LeaderId<Term, NodeId>;

/// The committed part of a leader id: the term.
pub type CommittedLeaderId = openraft::vote::leader_id_std::CommittedLeaderId<Term>;

/// `(term, index)` of a log entry.
pub type LogId = openraft::LogId<CommittedLeaderId>;

/// A vote record (term, candidate, committed flag).
pub type Vote = openraft::Vote<LeaderId>;

/// Entry payload as stored in the CommitLog.
pub type Payload = openraft::EntryPayload<AppPayload, NodeId, PeerNode>;

/// A Raft log entry.
pub type LogEntry = openraft::Entry<CommittedLeaderId, Payload>;

/// Cluster membership with our node record.
pub type Membership = openraft::Membership<NodeId, PeerNode>;

/// Where a member can be reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerNode {
    /// `host:port` of the peer (Raft) gRPC service.
    pub raft_addr: String,
    /// `host:port` of the client gRPC service.
    pub client_addr: String,
}

impl fmt::Display for PeerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft={} client={}", self.raft_addr, self.client_addr)
    }
}

/// Application data of a normal entry: bytes the state machine encoded (a message batch or an
/// admin command). The log stores them verbatim; their layout is the `store` crate's format.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AppPayload(pub Vec<u8>);

impl fmt::Debug for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppPayload({} bytes)", self.0.len())
    }
}

impl fmt::Display for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

/// The type configs raft-log can store: everything fixed except the apply response `R` (and
/// the runtime plumbing openraft defaults).
pub trait LogTypes:
    RaftTypeConfig<
    D = AppPayload,
    NodeId = NodeId,
    Node = PeerNode,
    Term = Term,
    LeaderId = LeaderId,
    Vote = Vote,
    Payload = Payload,
    Entry = LogEntry,
>
{
}

impl<C> LogTypes for C where
    C: RaftTypeConfig<
        D = AppPayload,
        NodeId = NodeId,
        Node = PeerNode,
        Term = Term,
        LeaderId = LeaderId,
        Vote = Vote,
        Payload = Payload,
        Entry = LogEntry,
    >
{
}

#[cfg(test)]
pub(crate) mod test_types {
    use super::*;

    openraft::declare_raft_types!(
        /// Type config used by raft-log's own tests.
        pub TestConfig:
            D = AppPayload,
            R = (),
            Node = PeerNode,
            LeaderId = LeaderId,
    );

    fn _assert_log_types<C: LogTypes>() {}

    #[test]
    fn test_config_is_log_types() {
        _assert_log_types::<TestConfig>();
    }
}
