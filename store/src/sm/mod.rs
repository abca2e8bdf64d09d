//! The openraft state machine: [`StateMachine`] (apply, snapshots through
//! [`crate::snapshot`]) and [`dispatch`] (one committed entry into the dispatch state).

pub mod dispatch;
pub mod machine;

pub use machine::Raft;
pub use machine::SnapshotBuilder;
pub use machine::StateMachine;

pub use crate::snapshot::Snapshot;
pub use crate::snapshot::SnapshotMeta;
