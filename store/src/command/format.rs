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
//!   [`BATCH_FIRST_RECORD_OFFSET`]; the records fill the body exactly.
//! - `CreateTopic` (2) / `UpdateTopic` (3): name, `read_queue_count` u32,
//!   `write_queue_count` u32, `perm` u8 ([`crate::topic::Permissions`] bits).
//! - `DeleteTopic` (4): name.
//! - `CommitOffset` (5): group, topic, `queue_id` u32, `offset` u64.
//!
//! Since the command CRC covers every record, records inside a batch are parsed with
//! [`MessageView::parse_trusted`] (no second CRC pass on the apply path).

use crate::codec::Reader;
use crate::codec::Writer;
use crate::command::owned::Command;
use crate::command::owned::CommitOffset;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::format::encode_into;
use crate::message::format::encoded_len;
use crate::message::format::peek_record_len;
use crate::message::MessageView;
use crate::topic::Permissions;
use crate::topic::TopicConfig;
use crate::types::QueueId;
use crate::types::QueueOffset;

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
}

impl CommandKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => CommandKind::SendBatch,
            2 => CommandKind::CreateTopic,
            3 => CommandKind::UpdateTopic,
            4 => CommandKind::DeleteTopic,
            5 => CommandKind::CommitOffset,
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
}

/// Encodes `cmd` (see the byte table).
pub(crate) fn encode(cmd: &Command) -> Result<Vec<u8>> {
    let (kind, body_hint) = match cmd {
        Command::SendBatch { messages: ms, .. } => (
            CommandKind::SendBatch,
            8 + ms.iter().map(encoded_len).sum::<usize>(),
        ),
        Command::CreateTopic(_) => (CommandKind::CreateTopic, 64),
        Command::UpdateTopic(_) => (CommandKind::UpdateTopic, 64),
        Command::DeleteTopic { .. } => (CommandKind::DeleteTopic, 64),
        Command::CommitOffset(_) => (CommandKind::CommitOffset, 128),
    };
    let mut out = Vec::with_capacity(COMMAND_HEADER_LEN + body_hint);
    let mut w = Writer::new(&mut out);
    w.u32(COMMAND_MAGIC);
    w.u32(0); // crc, patched below
    w.u8(COMMAND_VERSION);
    w.u8(kind as u8);
    w.u16(0);
    w.u32(0); // body_len, patched below
    encode_body(cmd, &mut out)?;
    let body_len = out.len() - COMMAND_HEADER_LEN;
    let body_len = u32::try_from(body_len)
        .map_err(|_| StoreError::invalid(format!("command body is {body_len} bytes")))?;
    out[12..16].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32fast::hash(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

fn encode_topic(w: &mut Writer<'_>, c: &TopicConfig) -> Result<()> {
    w.str16("topic name", &c.name)?;
    w.u32(c.read_queue_count);
    w.u32(c.write_queue_count);
    w.u8(c.perm.to_bits());
    Ok(())
}

fn encode_body(cmd: &Command, out: &mut Vec<u8>) -> Result<()> {
    match cmd {
        Command::SendBatch {
            messages: ms,
            auto_create_queues,
        } => {
            if ms.is_empty() {
                return Err(StoreError::invalid("batch is empty"));
            }
            if *auto_create_queues == Some(0) {
                return Err(StoreError::invalid("auto_create_queues must be at least 1"));
            }
            let n = u32::try_from(ms.len())
                .map_err(|_| StoreError::invalid(format!("batch has {} messages", ms.len())))?;
            let mut w = Writer::new(out);
            w.u32(n);
            w.u32(auto_create_queues.unwrap_or(0));
            for m in ms {
                encode_into(m, out)?;
            }
            Ok(())
        }
        Command::CreateTopic(c) | Command::UpdateTopic(c) => encode_topic(&mut Writer::new(out), c),
        Command::DeleteTopic { topic } => Writer::new(out).str16("topic name", topic),
        Command::CommitOffset(c) => {
            let mut w = Writer::new(out);
            w.str16("group", &c.group)?;
            w.str16("topic", &c.topic)?;
            w.u32(c.queue_id.get());
            w.u64(c.offset.get());
            Ok(())
        }
    }
}

/// Checks magic, length, CRC and version; returns the kind and the body.
fn parse_header(payload: &[u8]) -> Result<(CommandKind, &[u8])> {
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
    let actual = crc32fast::hash(&payload[8..]);
    if actual != crc {
        return Err(r.corrupt(
            4,
            format!("crc mismatch: stored {crc:#010x}, computed {actual:#010x}"),
        ));
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
    let (kind, body) = parse_header(payload)?;
    if kind != CommandKind::SendBatch {
        return Err(StoreError::invalid(format!(
            "payload is a {kind:?}, not a SendBatch"
        )));
    }
    batch_offsets(body).map(|(offsets, _)| offsets)
}

/// Record offsets and the `auto_create_queues` field of a batch body.
fn batch_offsets(body: &[u8]) -> Result<(Vec<u32>, Option<u32>)> {
    let rebase = |e: StoreError| e.locate(SRC, COMMAND_HEADER_LEN as u64);
    let mut r = Reader::new(body, SRC);
    let count = r.u32("message count").map_err(rebase)?;
    if count == 0 {
        return Err(StoreError::corruption(
            SRC,
            COMMAND_HEADER_LEN as u64,
            "batch has no message",
        ));
    }
    let auto_create = r.u32("auto create queues").map_err(rebase)?;
    let mut offsets = Vec::with_capacity((count as usize).min(body.len() / 4));
    let mut at = 8usize;
    for i in 0..count {
        let pos = (COMMAND_HEADER_LEN + at) as u64;
        let len = peek_record_len(&body[at..]).ok_or_else(|| {
            StoreError::corruption(SRC, pos, format!("record {i} of {count} missing"))
        })? as usize;
        if len == 0 || len > body.len() - at {
            return Err(StoreError::corruption(
                SRC,
                pos,
                format!("record {i} length {len} overruns the body"),
            ));
        }
        let pos32 = u32::try_from(pos)
            .map_err(|_| StoreError::corruption(SRC, pos, "record offset does not fit a u32"))?;
        offsets.push(pos32);
        at += len;
    }
    if at != body.len() {
        let pos = (COMMAND_HEADER_LEN + at) as u64;
        return Err(StoreError::corruption(
            SRC,
            pos,
            format!("{} bytes after the last record", body.len() - at),
        ));
    }
    Ok((offsets, (auto_create > 0).then_some(auto_create)))
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
        let (kind, body) = parse_header(payload)?;
        if kind == CommandKind::SendBatch {
            let (offsets, auto_create_queues) = batch_offsets(body)?;
            let mut out = Vec::with_capacity(offsets.len());
            for off in offsets {
                let view = MessageView::parse_trusted(&payload[off as usize..])
                    .map_err(|e| e.locate(SRC, u64::from(off)))?;
                out.push(BatchMessage {
                    offset_in_payload: off,
                    view,
                });
            }
            return Ok(CommandView::SendBatch {
                messages: out,
                auto_create_queues,
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
        }
    }

    /// Owned copy.
    pub fn to_command(&self) -> Command {
        match self {
            CommandView::SendBatch {
                messages,
                auto_create_queues,
            } => Command::SendBatch {
                messages: messages.iter().map(|m| m.view.to_message()).collect(),
                auto_create_queues: *auto_create_queues,
            },
            CommandView::CreateTopic(c) => Command::CreateTopic(c.clone()),
            CommandView::UpdateTopic(c) => Command::UpdateTopic(c.clone()),
            CommandView::DeleteTopic { topic } => Command::DeleteTopic {
                topic: topic.clone(),
            },
            CommandView::CommitOffset(c) => Command::CommitOffset(c.clone()),
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
