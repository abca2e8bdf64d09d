//! The openraft state machine: dispatch on apply, checkpoints, snapshots.

pub mod checkpoint;
pub mod dispatch;
pub mod machine;
pub mod state;

pub use machine::Snapshot;
pub use machine::SnapshotBuilder;
pub use machine::SnapshotMeta;
pub use machine::StateMachine;
