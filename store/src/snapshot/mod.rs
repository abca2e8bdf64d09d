//! Snapshots: what a node that joins, or falls behind past the purge point, installs to end
//! up with every message the others retain.
//!
//! A snapshot (byte table in [`format`](mod@format)) holds the replicated state as of its
//! last log id (membership, topics, consumer offsets, pop state), every ConsumeQueue's units
//! `[min, max)`, and the bytes of the retained CommitLog segments up to the physical end of
//! its last entry. Since
//! retention purges only whole segments, the Raft log still holds every retained message, so
//! the segments are the messages.
//!
//! - Files: every snapshot is its own file `snapshots/snapshot-<term>-<index>-<seq>.snap`,
//!   written once (temp file, fsync, rename, dir fsync) and never changed; the highest `seq`
//!   is the current one, the others are removed (a sender still holding one keeps reading its
//!   open file). Changes to the directory and the choice of the current file happen under
//!   `Shared::snapshot_files` (`dir.rs`, `current.rs`).
//! - Build: writes only the prefix (manifest with per-segment CRCs, exactly the units it
//!   names, prefix CRC); the segment bytes are pinned in the CommitLog
//!   ([`raftmq_raft_log::PinnedRange`]) when the manifest is taken or the current snapshot
//!   is opened, so a snapshot being built or sent reads the same bytes even if retention
//!   deletes its segments meanwhile (their disk space is freed when it is dropped).
//! - Retention: before deleting segments it writes a new current snapshot (same last log id)
//!   without them and without the units pointing into them, so the stored one never names a
//!   deleted segment.
//! - Receive: [`SnapshotReceiver::verify`] checks the whole transfer (prefix CRC, lengths,
//!   manifest consistency, each segment's CRC, units inside the segments) before openraft
//!   sees it; the transport refuses a bad one and the leader sends again.
//! - Install: verifies again, stages each segment as a fallocated, fsynced file checking its
//!   CRC, then raft-log `replace_from_files` takes them over (byte-identical, same physical
//!   offsets; skipped when the local log already holds the last entry); the ConsumeQueues are
//!   rewritten from the units, the index rebuilt from the records, the dispatch checkpoint
//!   written, and the prefix published (cut or copied, fsync, rename).
//! - Crashes: an install that swaps the log records an intent first (`intent.rs`); a crash
//!   before the install ends is finished at open from the kept file, so the checkpoint never
//!   stays below the log's purge point.
//!
//! # Files and their order
//!
//! Dependencies point one way, in layers: `build`, `install` (and its `resume` at open),
//! [`receiver`] -> `current`, `intent`, `verify` -> `dir`, [`file`](mod@file) ->
//! [`format`](mod@format) (the byte layout and its codec: the only place that encodes or
//! decodes the header, the manifest and the prefix CRC). The operations take `&Shared`
//! ([`crate::state`]); nothing here knows the state machine or the read handle.
//! Siblings import each other by path; this file only declares and re-exports.

mod build;
mod current;
mod dir;
pub mod file;
pub mod format;
mod install;
mod intent;
pub mod receiver;
pub(crate) mod verify;

pub(crate) use build::build;
pub(crate) use build::trim_current;
pub(crate) use current::current;
pub(crate) use dir::remove_leftovers;
pub use dir::snapshot_name;
pub use file::read_manifest;
pub use file::Snapshot;
pub use file::SnapshotFile;
pub use file::SnapshotMeta;
pub(crate) use install::install;
pub(crate) use install::resume as resume_install;
pub use receiver::PartialSnapshot;
pub use receiver::SnapshotReceiver;

pub use crate::paths::snapshots_dir;
pub use crate::state::InstallStop;
