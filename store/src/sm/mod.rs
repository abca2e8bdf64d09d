//! The openraft state machine: [`StateMachine`] (apply, snapshots through
//! [`crate::snapshot`]), [`dispatch`] (one committed entry into the dispatch state) and
//! [`receive`] (the pop commands, which `dispatch` hands on).

pub mod dispatch;
pub mod machine;
pub mod receive;

pub use machine::Raft;
pub use machine::SnapshotBuilder;
pub use machine::StateMachine;

pub use crate::snapshot::Snapshot;
pub use crate::snapshot::SnapshotMeta;
