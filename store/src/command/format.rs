//! Byte layout of a command payload. All integers little-endian. Version 1:
//!
//! | offset | size | field            | meaning                                               |
//! |-------:|-----:|------------------|-------------------------------------------------------|
//! | 0      | 4    | `magic` u32      | [`COMMAND_MAGIC`]                                     |
//! | 4      | 4    | `crc` u32        | CRC32 of bytes `[8, end)` (version, kind and body)    |
//! | 8      | 1    | `version` u8     | [`COMMAND_VERSION`]                                   |
//! | 9      | 1    | `kind` u8        | [`CommandKind`]                                       |
//! | 10     | 2    | reserved u16     | must be 0                                             |
//! | 12     | 4    | `body_len` u32   | bytes after the header; header + body = payload       |
//! | 16     | var  | body             | per kind, below                                       |
//!
//! Bodies (strings: u16 length + UTF-8):
//! - `SendBatch` (1): `count` u32 (>= 1), `auto_create_queues` u32 (0: the topic must exist;
//!   n > 0: apply creates a missing topic with n read/write queues), then `count` message
//!   records ([`crate::message::format`]) back to back, the first at payload offset
//!   [`BATCH_FIRST_RECORD_OFFSET`]; then an optional dedup trailer of 16 bytes: magic u32
//!   `"DDUP"` (0x50554444), `window_ms` u64 (>= 1), `max_entries` u32 (>= 1) (the leader's
//!   [`DedupParams`], written only when a message carries an identity, see
//!   [`crate::dedup`]). Records and trailer fill the body exactly; without the trailer (every
//!   entry written before it existed) the batch decodes with no dedup.
//! - `CreateTopic` (2) / `UpdateTopic` (3): name, `read_queue_count` u32,
//!   `write_queue_count` u32, `perm` u8 ([`crate::topic::Permissions`] bits).
//! - `DeleteTopic` (4): name.
//! - `CommitOffset` (5): group, topic, `queue_id` u32, `offset` u64.
//! - `Receive` (6): group, topic, `queue_id` u32, `max_messages` u32 (>= 1), `invisible_ms`
//!   u64, `now_ms` u64, `max_inflight` u32, `queue_min` u64, `filter` (tag expression),
//!   then an optional `flags` u8 (bit 0: FIFO delivery; other bits must be 0), written only
//!   when a flag is set. Without it (every entry written before `flags` existed, and every
//!   non-FIFO one) the body ends after `filter` and decodes with no flag set.
//! - `Ack` (7): group, topic, `count` u32 (>= 1), then `count` entries of 20 bytes:
//!   `queue_id` u32, `queue_offset` u64, `handle` u64 (a log index).
//! - `ChangeInvisible` (8): group, topic, `queue_id` u32, `queue_offset` u64, `handle` u64,
//!   `invisible_ms` u64, `now_ms` u64.
//!
//! - `PutUser` (9): name, access key, `role` u8 (1 admin, 2 producer, 3 consumer),
//!   `secret` u32 length + bytes (sealed with the cluster key: never the plaintext), topic
//!   patterns and group patterns (each `count` u16, then `count` strings).
//! - `DeleteUser` (10): name.
//!
//! The pop bodies (6..=8) are encoded and parsed in `pop_format.rs`, the user bodies (9, 10)
//! in `user_format.rs`.
//!
//! Since the command CRC covers every record, records inside a batch are parsed with
//! [`MessageView::parse_trusted`] (no second CRC pass on the apply path).

use crate::codec::Reader;
use crate::command::batch_format::batch_offsets;
use crate::command::owned::Command;
use crate::command::owned::CommitOffset;
use crate::command::pop::Ack;
use crate::command::pop::ChangeInvisible;
use crate::command::pop::Receive;
use crate::command::pop_format;
use crate::command::user_format;
use crate::dedup::DedupParams;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::MessageView;
use crate::topic::Permissions;
use crate::topic::TopicConfig;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::users::User;

/// Magic of a command payload.
pub const COMMAND_MAGIC: u32 = 0x434D_5152;
/// Current version.
pub const COMMAND_VERSION: u8 = 1;
/// Header size.
pub const COMMAND_HEADER_LEN: usize = 16;
/// Payload offset of the first message record of a `SendBatch`.
pub const BATCH_FIRST_RECORD_OFFSET: usize = COMMAND_HEADER_LEN + 8;

const _: () = assert!(COMMAND_HEADER_LEN == 4 + 4 + 1 + 1 + 2 + 4);
const _: () = assert!(BATCH_FIRST_RECORD_OFFSET == 24);

const SRC: &str = "command payload";

/// The command kind byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CommandKind {
    /// Messages.
    SendBatch = 1,
    /// Create a topic.
    CreateTopic = 2,
    /// Update a topic.
    UpdateTopic = 3,
    /// Delete a topic.
    DeleteTopic = 4,
    /// Commit a consumer offset.
    CommitOffset = 5,
    /// Hand out messages to a group (pop).
    Receive = 6,
    /// Ack popped messages.
    Ack = 7,
    /// Move a popped message's invisibility deadline.
    ChangeInvisible = 8,
    /// Add or replace a user.
    PutUser = 9,
    /// Delete a user.
    DeleteUser = 10,
}

impl CommandKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => CommandKind::SendBatch,
            2 => CommandKind::CreateTopic,
            3 => CommandKind::UpdateTopic,
            4 => CommandKind::DeleteTopic,
            5 => CommandKind::CommitOffset,
            6 => CommandKind::Receive,
            7 => CommandKind::Ack,
            8 => CommandKind::ChangeInvisible,
            9 => CommandKind::PutUser,
            10 => CommandKind::DeleteUser,
            _ => return None,
        })
    }
}

/// One message of a parsed batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchMessage<'a> {
    /// Byte offset of the record inside the payload.
    pub offset_in_payload: u32,
    /// The record.
    pub view: MessageView<'a>,
}

/// A parsed command borrowing from its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandView<'a> {
    /// Messages in payload order.
    SendBatch {
        /// The records.
        messages: Vec<BatchMessage<'a>>,
        /// Create a missing topic with this many queues (see [`Command::SendBatch`]).
        auto_create_queues: Option<u32>,
        /// The dedup window's bounds, if the leader stamped them (see [`Command::SendBatch`]).
        dedup: Option<DedupParams>,
    },
    /// Create a topic.
    CreateTopic(TopicConfig),
    /// Update a topic.
    UpdateTopic(TopicConfig),
    /// Delete a topic.
    DeleteTopic {
        /// Topic name.
        topic: String,
    },
    /// Commit a consumer offset.
    CommitOffset(CommitOffset),
    /// Hand out messages to a group.
    Receive(Receive),
    /// Ack popped messages.
    Ack(Ack),
    /// Move a popped message's deadline.
    ChangeInvisible(ChangeInvisible),
    /// Add or replace a user.
    PutUser(User),
    /// Delete a user.
    DeleteUser {
        /// User name.
        name: String,
    },
}

/// Checks magic, length, CRC (unless `check_crc` is false) and version; returns the kind and
/// the body.
fn parse_header(payload: &[u8], check_crc: bool) -> Result<(CommandKind, &[u8])> {
    let mut r = Reader::new(payload, SRC);
    let magic = r.u32("magic")?;
    if magic != COMMAND_MAGIC {
        return Err(r.corrupt(
            0,
            format!("bad magic {magic:#010x}, expected {COMMAND_MAGIC:#010x}"),
        ));
    }
    let crc = r.u32("crc")?;
    let version = r.u8("version")?;
    let kind = r.u8("kind")?;
    let reserved = r.u16("reserved")?;
    let body_len = r.u32("body length")? as usize;
    if r.remaining() != body_len {
        return Err(r.corrupt(
            12,
            format!(
                "body length {body_len}, but {} bytes follow the header",
                r.remaining()
            ),
        ));
    }
    if check_crc {
        let actual = crc32fast::hash(&payload[8..]);
        if actual != crc {
            return Err(r.corrupt(
                4,
                format!("crc mismatch: stored {crc:#010x}, computed {actual:#010x}"),
            ));
        }
    }
    if version != COMMAND_VERSION {
        return Err(r.corrupt(8, format!("unsupported version {version}")));
    }
    let kind = CommandKind::from_u8(kind)
        .ok_or_else(|| r.corrupt(9, format!("unknown command kind {kind}")))?;
    if reserved != 0 {
        return Err(r.corrupt(10, "reserved field is not zero"));
    }
    Ok((kind, &payload[COMMAND_HEADER_LEN..]))
}

/// Offsets (inside `payload`) of the message records of a `SendBatch` payload, after checking
/// header, CRC and that the records tile the body exactly. Does not parse the records.
pub fn record_offsets(payload: &[u8]) -> Result<Vec<u32>> {
    let (kind, body) = parse_header(payload, true)?;
    if kind != CommandKind::SendBatch {
        return Err(StoreError::invalid(format!(
            "payload is a {kind:?}, not a SendBatch"
        )));
    }
    batch_offsets(body, COMMAND_HEADER_LEN).map(|l| l.offsets)
}

fn parse_topic(r: &mut Reader<'_>) -> Result<TopicConfig> {
    let name = r.str16("topic name")?.to_owned();
    let read_queue_count = r.u32("read queue count")?;
    let write_queue_count = r.u32("write queue count")?;
    let at = r.pos();
    let bits = r.u8("permissions")?;
    let perm = Permissions::from_bits(bits)
        .ok_or_else(|| r.corrupt(at, format!("unknown permission bits {bits:#04x}")))?;
    Ok(TopicConfig {
        name,
        read_queue_count,
        write_queue_count,
        perm,
    })
}

impl<'a> CommandView<'a> {
    /// Parses a payload: header, CRC, body. Never panics on arbitrary bytes.
    pub fn parse(payload: &'a [u8]) -> Result<Self> {
        Self::parse_with(payload, true)
    }

    /// [`parse`](Self::parse) of a payload the CommitLog vouches for, without the command's
    /// CRC: apply takes each entry from this node's log, which computed its record's CRC over
    /// these very bytes as it appended them or checked it as it read them back, so a second
    /// pass over the payload (32 KiB an entry at batch-32, 4% of a follower's CPU) finds
    /// nothing the first did not. Every other check stays, and the command's CRC is still
    /// written, for readers of payloads from anywhere else.
    pub fn parse_logged(payload: &'a [u8]) -> Result<Self> {
        Self::parse_with(payload, false)
    }

    fn parse_with(payload: &'a [u8], check_crc: bool) -> Result<Self> {
        let (kind, body) = parse_header(payload, check_crc)?;
        if kind == CommandKind::SendBatch {
            let layout = batch_offsets(body, COMMAND_HEADER_LEN)?;
            let mut out = Vec::with_capacity(layout.offsets.len());
            for off in layout.offsets {
                let view = MessageView::parse_trusted(&payload[off as usize..])
                    .map_err(|e| e.locate(SRC, u64::from(off)))?;
                out.push(BatchMessage {
                    offset_in_payload: off,
                    view,
                });
            }
            return Ok(CommandView::SendBatch {
                messages: out,
                auto_create_queues: layout.auto_create_queues,
                dedup: layout.dedup,
            });
        }
        let rebase = |e: StoreError| e.locate(SRC, COMMAND_HEADER_LEN as u64);
        let mut r = Reader::new(body, SRC);
        let cmd = match kind {
            CommandKind::CreateTopic => {
                CommandView::CreateTopic(parse_topic(&mut r).map_err(rebase)?)
            }
            CommandKind::UpdateTopic => {
                CommandView::UpdateTopic(parse_topic(&mut r).map_err(rebase)?)
            }
            CommandKind::DeleteTopic => CommandView::DeleteTopic {
                topic: r.str16("topic name").map_err(rebase)?.to_owned(),
            },
            CommandKind::CommitOffset => {
                CommandView::CommitOffset(parse_commit(&mut r).map_err(rebase)?)
            }
            CommandKind::Receive => {
                CommandView::Receive(pop_format::parse_receive(&mut r).map_err(rebase)?)
            }
            CommandKind::Ack => CommandView::Ack(pop_format::parse_ack(&mut r).map_err(rebase)?),
            CommandKind::ChangeInvisible => CommandView::ChangeInvisible(
                pop_format::parse_change_invisible(&mut r).map_err(rebase)?,
            ),
            CommandKind::PutUser => {
                CommandView::PutUser(user_format::parse_put_user(&mut r).map_err(rebase)?)
            }
            CommandKind::DeleteUser => CommandView::DeleteUser {
                name: r.str16("user name").map_err(rebase)?.to_owned(),
            },
            CommandKind::SendBatch => unreachable!("handled above"),
        };
        r.finish("command body").map_err(rebase)?;
        Ok(cmd)
    }

    /// The kind.
    pub fn kind(&self) -> CommandKind {
        match self {
            CommandView::SendBatch { .. } => CommandKind::SendBatch,
            CommandView::CreateTopic(_) => CommandKind::CreateTopic,
            CommandView::UpdateTopic(_) => CommandKind::UpdateTopic,
            CommandView::DeleteTopic { .. } => CommandKind::DeleteTopic,
            CommandView::CommitOffset(_) => CommandKind::CommitOffset,
            CommandView::Receive(_) => CommandKind::Receive,
            CommandView::Ack(_) => CommandKind::Ack,
            CommandView::ChangeInvisible(_) => CommandKind::ChangeInvisible,
            CommandView::PutUser(_) => CommandKind::PutUser,
            CommandView::DeleteUser { .. } => CommandKind::DeleteUser,
        }
    }

    /// Owned copy.
    pub fn to_command(&self) -> Command {
        match self {
            CommandView::SendBatch {
                messages,
                auto_create_queues,
                dedup,
            } => Command::SendBatch {
                messages: messages.iter().map(|m| m.view.to_message()).collect(),
                auto_create_queues: *auto_create_queues,
                dedup: *dedup,
            },
            CommandView::CreateTopic(c) => Command::CreateTopic(c.clone()),
            CommandView::UpdateTopic(c) => Command::UpdateTopic(c.clone()),
            CommandView::DeleteTopic { topic } => Command::DeleteTopic {
                topic: topic.clone(),
            },
            CommandView::CommitOffset(c) => Command::CommitOffset(c.clone()),
            CommandView::Receive(c) => Command::Receive(c.clone()),
            CommandView::Ack(c) => Command::Ack(c.clone()),
            CommandView::ChangeInvisible(c) => Command::ChangeInvisible(c.clone()),
            CommandView::PutUser(u) => Command::PutUser(u.clone()),
            CommandView::DeleteUser { name } => Command::DeleteUser { name: name.clone() },
        }
    }
}

fn parse_commit(r: &mut Reader<'_>) -> Result<CommitOffset> {
    Ok(CommitOffset {
        group: r.str16("group")?.to_owned(),
        topic: r.str16("topic")?.to_owned(),
        queue_id: QueueId::new(r.u32("queue id")?),
        offset: QueueOffset::new(r.u64("offset")?),
    })
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
