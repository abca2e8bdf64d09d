//! # raftmq-raft-log: the CommitLog that is also the Raft log
//!
//! **Responsibility.** Store the Raft log of one node as RocketMQ-style CommitLog segments and
//! serve it to openraft ([`openraft::storage::RaftLogStorage`] / `RaftLogReader`, implemented
//! by [`LogStore`]) and to the state machine (`store` crate), which reads message bytes by
//! physical offset. Nothing else in raftmq writes the CommitLog.
//!
//! **Place in the data flow.** `Raft::client_write` → openraft → [`LogStore`] `append` (record
//! written at the next physical offset; the `IOFlushed` callback completes per the node's
//! [`FlushPolicy`]) → quorum commit → `store` applies the entry, reading it back with
//! [`LogStore::entry_location`] / [`LogStore::read_at`] and giving each message the id
//! `entry phys + ENTRY_HEADER_LEN + offset inside the payload` (`store`'s `message_id`, over
//! [`payload_offset`]). Positions and indexes cross the API as the newtypes
//! [`types::PhysOffset`] and [`types::LogIndex`] (bare `u64` only inside this crate).
//! Retention purges logically ([`LogStore::purge`], through openraft's `purge_log`) and then
//! removes whole segments with [`LogStore::delete_segments_below`].
//!
//! **On disk** (under the configured directory):
//! - `commitlog/<20-digit start phys offset>`: fixed-size, preallocated segments; records
//!   per [`mod@format`]; an entry never spans two segments (a padding record fills the tail).
//! - `raft-index/index`: log index → (phys offset, size, term), 32-byte records
//!   ([`raft_index`]); a cache, checked against the CommitLog on open and rebuilt if needed.
//! - `meta/`: sled db with vote, committed id, last purged id, flush checkpoint, log start,
//!   and an install swap in progress.
//!
//! **Public API** (used by `store` and `node`):
//! - [`LogStore::open`]`(dir, LogConfig) -> Result<LogStore<C>, LogError>` (recovery runs
//!   here); [`LogStore::open_with_env`] for fault injection ([`mem_env::MemEnv`]);
//!   `Clone` = shared handle; [`LogStore::close`] flushes and stops (also on last drop).
//! - Reads: [`LogStore::entry_location`]`(index) -> Option<EntryLocation>`,
//!   [`LogStore::read_at`]`(phys, len) -> Result<Vec<u8>>`, [`LogStore::read_entries`],
//!   [`LogStore::watermarks`]` -> Watermarks`, [`LogStore::committed`], [`LogStore::vote`].
//! - Writes (openraft calls them through the trait): [`LogStore::append_entries`],
//!   [`LogStore::truncate_after`], [`LogStore::purge`], [`LogStore::save_vote`],
//!   [`LogStore::save_committed`] / [`LogStore::save_committed_deferred`], [`LogStore::flush`];
//!   acks: [`LogStore::wait_durable`]; retention: [`LogStore::delete_segments_below`]`(phys)
//!   -> Result<PhysOffset>` (or [`LogStore::detach_segments_below`] + [`Detached::delete`]);
//!   votes: [`LogStore::lost_commit_floor`].
//! - Snapshot install (DLedger-style segment copy, the only install path):
//!   [`LogStore::replace_from_files`]`(staged_dir, purged: LogId, end)` on the receiver takes
//!   over the snapshot's segment files (staged by `store`, streamed from the sender's pinned
//!   segments) and records `purged` (the snapshot's last log id) as the last purged id; the
//!   log may therefore start at any segment-aligned offset. Crash-safe: the swap is recorded
//!   in `meta/` first and a recorded swap is finished by the next open (old log or new one).
//!   [`LogStore::pin_range`]`(start, end) -> Result<PinnedRange>` holds committed bytes open
//!   for a snapshot being built or sent, so retention cannot change what it reads.
//!
//! **Parts** (each its own type; the import graph between files has no cycle):
//! - CommitLog: `segments` ([`Detached`]; `graveyard`: detached segments still pinned),
//!   `prealloc`, `zero_ahead` (zeros ahead of the appends), `stage` (the appends in
//!   memory until a flush writes them with `O_DIRECT`; `stage_file`: an `async` log's, in a
//!   mapped file the next open replays), [`mod@format`], `recovery`; the
//!   append path `writer` (`Writer`; `batch` checks and encodes a call's entries), the cuts at
//!   either end `trim` (`Trimmer`), the snapshot swap `install`.
//! - [`raft_index`]: log index → location; `meta`: the sled db, and beside it
//!   `committed_file` (the committed id, two checksummed slots).
//! - `open` builds the `state` (`State`, one mutex) from disk; `shared` (`Shared`: state, meta,
//!   flush waiters `flush_queue`, durable watch `durable`) is the narrow core the workers hold.
//! - Workers: `flusher` (`Flusher`, group commit / interval flush; its `checkpointer` makes
//!   the flush checkpoint durable; `drop_behind` drops old pages from the page cache) and
//!   `committer` (`Committer`, the committed id; `wait_durable`), each holding only `Shared`.
//! - [`LogStore`] (`store`) wires them together and delegates ([`Watermarks`]: its positions);
//!   `storage_impl` is the openraft `RaftLogStorage` / `RaftLogReader` impl over it.
//!
//! **Invariants** (checked by `State::validate` after every change in debug builds):
//! - The same entries give identical bytes at identical physical offsets on every node
//!   (deterministic encoding, cluster-wide `segment_bytes`); the log start is segment-aligned.
//! - Records are contiguous: each starts where the previous ends, or at the next segment
//!   start; indexes are contiguous (a gap only right after purged entries) and terms never
//!   decrease.
//! - `min_phys_offset <= purged_phys_end <= appended_phys_end`,
//!   `flushed_phys_end <= appended_phys_end`; bytes past the append position are zero.
//! - Nothing at or below the persisted committed id is ever truncated; no segment holding
//!   an unpurged byte is ever deleted.
//!
//! **Durability.**
//! - `sync`: an append's callback completes only after the fdatasync covering its bytes (group
//!   commit: one flush covers every append queued before it). `async`: the callback completes
//!   once the bytes are in the write stage's file (or the page cache without one); fdatasync
//!   every `interval-ms`, on segment roll, on close, and on a leader after each append.
//! - `save_vote`, `save_committed`, `purge` and the log start are durable before returning (a
//!   sled flush and an fdatasync of its file, see `meta.rs`; the committed id: a pwrite and an
//!   fdatasync of `meta/committed-id`, see `committed_file.rs`). openraft's `save_committed` on a
//!   `sync` log is `save_committed_deferred` instead: the `raftlog-commit` thread writes the id
//!   behind (at most every 100 ms unless an ack waits via
//!   [`LogStore::wait_durable`]); see `committer.rs` for why that is safe only for `sync`
//!   (or for an id the log's own flush already covers). On an `async` log openraft's
//!   `save_committed` is [`LogStore::save_committed_async`]: written behind, apply waiting
//!   with [`LogStore::wait_applicable`]; a leader's transport lets the commit index out only
//!   through the [`LogStore::commit_gate`].
//! - Segments are created under a temporary name, allocated with `fallocate` (a full disk
//!   fails there, as [`LogError::DiskFull`]), fsynced, renamed, and the directory is fsynced;
//!   removals fsync the directory too. The next segment is prepared by a background thread.
//!   Retention shrinks a segment stepwise before unlinking it; one a pin still maps is renamed
//!   `<name>.deleted` instead and removed stepwise when its last pin drops (open unlinks
//!   what a crash left).
//! - The flush checkpoint (`meta/`) is recorded after the fdatasync it describes and made
//!   durable right after, with the `raft-index` file fsynced first (the `raftlog-ckpt` thread,
//!   at most every 100 ms; inline for an explicit [`LogStore::flush`]).
//! - Recovery: the raft index's records below the checkpoint are taken once their last
//!   header and their first header in each segment match the CommitLog; the scan covers
//!   the rest. A record that fails
//!   validation past the flush checkpoint is a torn tail (cut, logged); before it, corruption:
//!   open fails naming file, offset and reason unless `repair-truncate-corruption` is set. A
//!   committed id past the recovered end is lowered.
//! - Any I/O error in append or flush stops the log: the callback gets the error, later writes
//!   fail with [`LogError::Stopped`]; openraft then stops the node.
//!
//! **Write method** (measured on ext4, see `fs_segment.rs`): the records of one append call are
//! copied into the write stage (`stage.rs`, a ring, `ring.rs`), which a flush writes out with
//! `O_DIRECT` before its `fdatasync` (an `async` log's writeback step, every 2 ms under load,
//! writes it out too). A `sync` log's ring is its own memory; an `async` log's is a shared
//! mapping of `write-stage` in the log directory (`stage_file.rs`), whose header says which
//! bytes only the ring holds, so that `open` writes them to their segment after a kill -9.
//! Without a stage (`write-stage-bytes` 0, tmpfs) they are written with one `pwrite` (storing
//! into fresh mapped pages costs a zero-fill and two faults per page). Readers read the stage
//! for what it holds, else the mapping (one page cache), except bytes below the end of the
//! pages dropped behind the flushed end (`log-cache-bytes`, or half the stage if less), which
//! `cold_read.rs` reads with `O_DIRECT` in 2 MiB chunks.
//!
//! **Known limits.** Open validates (CRCs included) only the records past the flush checkpoint
//! and those below the first record the `raft-index` file holds; below the checkpoint the
//! index stands in for the bytes, so corruption there shows on the first read of the entry,
//! not at open (a segment lost or overwritten whole fails open: its first header is read). The in-memory index costs 32 bytes per retained entry; the `raft-index` file
//! is emptied by retention and refills from there (open then scans what it lacks). Vote saves (and an `async`
//! log's committed-id saves) block the calling task for an fdatasync (votes: after a sled flush).

pub mod config;
pub mod env;
pub mod error;
pub mod format;
/// Fuzz target bodies (for `fuzz/` and the corpus replay test; not an API).
#[doc(hidden)]
pub mod fuzzing;
pub mod mem_env;
pub mod raft_index;
pub mod stage;
pub mod stage_file;
pub mod store;
pub mod types;

mod batch;
mod checkpointer;
mod cold_read;
mod committed_file;
mod committer;
mod drop_behind;
mod durable;
mod entry_read;
mod flush_queue;
mod flusher;
mod fs_env;
mod fs_segment;
mod graveyard;
mod huge;
mod inline_flush;
mod inner;
mod install;
mod meta;
mod open;
mod pinned;
mod prealloc;
mod recent;
mod recovery;
mod recycle;
mod ring;
mod segments;
mod shared;
mod state;
mod storage_impl;
mod tail;
mod trim;
mod vectored;
mod watermarks;
mod writer;
mod zero_ahead;

pub use segments::Detached;

pub use committer::CommitGate;
pub use config::FlushPolicy;
pub use config::LogConfig;
pub use error::LogError;
pub use error::LogResult;
pub use flush_queue::FlushCallback;
pub use format::payload_offset;
pub use format::ENTRY_HEADER_LEN;
pub use pinned::PinnedRange;
pub use raft_index::EntryLocation;
pub use store::LogStore;
pub use store::Watermarks;
