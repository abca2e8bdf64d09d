//! The writer of command payloads: the byte layout is [`super::format`]'s table.

use super::batch_format::DEDUP_TRAILER_LEN;
use super::batch_format::DEDUP_TRAILER_MAGIC;
use super::format::CommandKind;
use super::format::COMMAND_HEADER_LEN;
use super::format::COMMAND_MAGIC;
use super::format::COMMAND_VERSION;
use super::owned::Command;
use super::pop_format;
use super::user_format;
use crate::codec::prefetch;
use crate::codec::Writer;
use crate::codec::CACHE_LINE;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::format::encode_into;
use crate::message::format::encoded_len;
use crate::topic::TopicConfig;

/// How many messages ahead a batch's encoder asks for the body: each body sits where its
/// request was decoded, long enough ago to have left the cache, and copying it was the
/// leader's largest `memcpy` at batches of 32.
const PREFETCH_MESSAGES_AHEAD: usize = 2;
/// How much of a body ahead is asked for; the CPU's own prefetcher follows a longer one.
const PREFETCH_BODY_BYTES: usize = 2048;

/// Encodes `cmd` (see the byte table).
pub(crate) fn encode(cmd: &Command) -> Result<Vec<u8>> {
    let (kind, body_hint) = match cmd {
        Command::SendBatch { messages: ms, .. } => (
            CommandKind::SendBatch,
            8 + ms.iter().map(encoded_len).sum::<usize>() + DEDUP_TRAILER_LEN,
        ),
        Command::CreateTopic(_) => (CommandKind::CreateTopic, 64),
        Command::UpdateTopic(_) => (CommandKind::UpdateTopic, 64),
        Command::DeleteTopic { .. } => (CommandKind::DeleteTopic, 64),
        Command::CommitOffset(_) => (CommandKind::CommitOffset, 128),
        Command::Receive(_) => (CommandKind::Receive, 128),
        Command::Ack(a) => (
            CommandKind::Ack,
            64 + a.entries.len() * pop_format::ACK_ENTRY_LEN,
        ),
        Command::ChangeInvisible(_) => (CommandKind::ChangeInvisible, 128),
        Command::PutUser(_) => (CommandKind::PutUser, 256),
        Command::DeleteUser { .. } => (CommandKind::DeleteUser, 64),
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
            dedup,
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
            for (i, m) in ms.iter().enumerate() {
                if let Some(ahead) = ms.get(i + PREFETCH_MESSAGES_AHEAD) {
                    let len = ahead.body.len().min(PREFETCH_BODY_BYTES);
                    (0..len)
                        .step_by(CACHE_LINE)
                        .for_each(|at| prefetch(&ahead.body, at));
                }
                encode_into(m, out)?;
            }
            if let Some(d) = dedup {
                if d.window_ms == 0 || d.max_entries == 0 {
                    return Err(StoreError::invalid(
                        "dedup window and max entries must be >= 1",
                    ));
                }
                let mut w = Writer::new(out);
                w.u32(DEDUP_TRAILER_MAGIC);
                w.u64(d.window_ms);
                w.u32(d.max_entries);
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
        Command::Receive(c) => pop_format::encode_receive(&mut Writer::new(out), c),
        Command::Ack(c) => pop_format::encode_ack(&mut Writer::new(out), c),
        Command::ChangeInvisible(c) => {
            pop_format::encode_change_invisible(&mut Writer::new(out), c)
        }
        Command::PutUser(u) => user_format::encode_put_user(&mut Writer::new(out), u),
        Command::DeleteUser { name } => Writer::new(out).str16("user name", name),
    }
}
