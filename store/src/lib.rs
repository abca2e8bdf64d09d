//! raftmq-store: everything a node derives from the committed part of the CommitLog.
//!
//! # Responsibility
//!
//! The CommitLog (crate `raftmq-raft-log`) is the Raft log. This crate defines what the bytes
//! of its normal entries mean and maintains the structures built from *committed* entries:
//!
//! - [`message`]: the message record (byte table in [`message::format`]); a message's id is
//!   the physical offset of its record.
//! - [`command`]: the replicated commands an `AppPayload` carries: `SendBatch` (message records
//!   back to back at known payload offsets), `CreateTopic` / `UpdateTopic` / `DeleteTopic`,
//!   `CommitOffset`, and the pop commands `Receive` / `Ack` / `ChangeInvisible` (byte table
//!   in [`command::format`]).
//! - [`limits`]: name rules and size limits the leader checks before proposing.
//! - [`consume_queue`]: per `topic/queue` arrays of 20-byte units (physical offset, size, tag
//!   hash) indexed by queue offset; [`consume_queue::ConsumeQueueSet`] holds all of them.
//! - [`index`]: RocketMQ-style IndexFiles from key hash to physical offsets.
//! - [`filter`]: tag expressions, first stage on tag hashes, second on exact tags.
//! - [`topic`]: topic configs and the replicated, deterministic [`topic::TopicTable`].
//! - [`offsets`]: the replicated consumer-group offset table `CommitOffset` updates.
//! - [`receive`]: the replicated pop state (`Receive` / `Ack` / `ChangeInvisible`): per
//!   group and queue the next offset never delivered and the in-flight messages with their
//!   invisibility deadlines, attempts and receipt handles.
//! - [`dedup`]: the replicated dedup window of idempotent sends (producer id + sequence, or
//!   a RocketMQ client message id): a retry is answered with the original result.
//!
//! - [`raft_types`]: the openraft [`TypeConfig`], `StoredMembership`, [`ApplyResponse`],
//!   [`MessageAck`].
//! - [`state`]: what the writer and the readers share: the dispatch state behind one lock and
//!   its durable checkpoint ([`state::Checkpoint`]); `paths`: the data dir layout.
//! - [`snapshot`]: file-backed snapshots (manifest + ConsumeQueue units + retained CommitLog
//!   segments; byte layout and codec in [`snapshot::format`]), chunked transfer
//!   ([`SnapshotFile::read_chunk`], [`SnapshotReceiver`]) and install.
//! - [`read`] (pull with tag filter, long polling, get by id, query by key), `receive_read`
//!   (a group's pop state, the leader's `has_deliverable` check) and [`retention`] (plan,
//!   apply, disk-full guard).
//! - [`Store`]: the cheap clonable read handle, every one of its methods in `store.rs`
//!   (topics, consumer offsets, watermarks, reads, retention, close).
//! - [`sm`]: the openraft `RaftStateMachine` ([`StateMachine`]): dispatch on apply
//!   ([`sm::dispatch`]), snapshots; [`Raft`].
//! - [`open`]: recovery, then the two halves ([`Store`], [`StateMachine`]).
//!
//! Dependencies between these modules point one way (top to bottom: `open`, `sm`, `store`,
//! `read` / `retention` / `snapshot`, `state`, the parts above); see [`state`].
//!
//! # On disk (beside raft-log's `commitlog/`, `raft-index/`, `meta/`)
//!
//! `consumequeue/<topic>/<queue>/`, `index/`, `store-meta/checkpoint` (dispatch
//! checkpoint; `checkpoint.json` on nodes before the binary file), `snapshots/` (the current snapshot file, `incoming/` transfers), `abort`
//! (present while open: found at open = unclean shutdown).
//!
//! # Durability and recovery
//!
//! Apply writes ConsumeQueue and index units into mappings; every `checkpoint-every-entries`
//! entries (and on snapshot, close) the log is flushed, then the mappings, then the checkpoint
//! file is replaced atomically: it records `last_applied` with the replicated tables as of
//! that entry. openraft restarts applying after the checkpoint's `last_applied`; re-dispatch is
//! idempotent. After an unclean shutdown (abort marker) units at or past the recovered
//! CommitLog end are cut first.
//!
//! # Place in the data flow
//!
//! leader: validate ([`limits`]) -> encode [`command::Command`] -> `Raft::client_write` ->
//! raft-log appends the entry on every node -> commit -> `apply` ([`StateMachine`]):
//! [`command::CommandView::parse_logged`] -> per message: next queue offset, ConsumeQueue
//! [`put`](consume_queue::ConsumeQueue::put), IndexStore [`put`](index::IndexStore::put) of each
//! key -> answer the producer. Readers: ConsumeQueue `read` -> [`filter::TagFilter`] on tag hash
//! -> record from the CommitLog by physical offset -> CRC and exact tag check.
//!
//! # Invariants
//!
//! - Only committed entries are dispatched; nothing past the commit index is served.
//! - Encodings are deterministic: equal commands give equal bytes on every replica, and
//!   `apply` never consults node-local configuration (limits are checked before proposing).
//! - Per queue, queue offsets are contiguous and units' physical offsets strictly increase.
//! - Dispatch is idempotent: re-putting a unit already at its offset, or a key already indexed
//!   at its physical offset, writes nothing; so replay after a crash is safe.
//! - Crash recovery cuts every ConsumeQueue and index unit at or past the recovered CommitLog
//!   end (`truncate_phys_beyond`); retention removes whole files below the minimum physical
//!   offset (`delete_below_phys`, `delete_files_below`).
//! - Decoding untrusted bytes never panics: it returns [`StoreError::Corruption`] naming the
//!   file (or byte source) and offset. All integers on disk are little-endian; on-disk hashes
//!   are fixed FNV-1a ([`hash`]), never std's seeded hasher.

mod codec;
pub mod command;
pub mod config;
pub mod consume_queue;
pub mod dedup;
pub mod disk_reserve;
pub mod error;
pub mod filter;
mod fs_space;
/// Fuzz target bodies (for `fuzz/` and the corpus replay test; not an API).
#[doc(hidden)]
pub mod fuzzing;
pub mod hash;
pub mod index;
pub mod limits;
mod mapped_file;
pub mod message;
pub mod offsets;
mod open;
mod paths;
pub mod raft_types;
pub mod read;
pub mod receive;
mod receive_read;
pub mod retention;
pub mod sm;
pub mod snapshot;
pub mod state;
mod store;
pub mod topic;
pub mod types;
pub mod users;

pub use config::StoreConfig;
pub use open::open;
pub use open::open_with_hasher;
pub use raft_types::ApplyResponse;
pub use raft_types::Delivered;
pub use raft_types::InvisibleChanged;
pub use raft_types::LogStore;
pub use raft_types::MessageAck;
pub use raft_types::RejectCode;
pub use raft_types::TypeConfig;
pub use read::KeyQueryResult;
pub use read::PullRequest;
pub use read::PullResult;
pub use read::PullStatus;
pub use read::StoredMessage;
pub use retention::RetentionPlan;
pub use sm::Raft;
pub use sm::StateMachine;
pub use snapshot::SnapshotFile;
pub use snapshot::SnapshotReceiver;
pub use store::Store;
pub use store::StoreWatermarks;

pub use error::Result;
pub use error::StoreError;
