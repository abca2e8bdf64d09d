//! Body codec of the pop commands `Receive` (6), `Ack` (7) and `ChangeInvisible` (8); their
//! layout is in [`super::format`]'s byte table, which calls these.

use crate::codec::Reader;
use crate::codec::Writer;
use crate::command::pop::Ack;
use crate::command::pop::AckEntry;
use crate::command::pop::ChangeInvisible;
use crate::command::pop::Receive;
use crate::error::Result;
use crate::error::StoreError;
use crate::types::LogIndex;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Bytes of one ack entry: `queue_id` u32, `queue_offset` u64, `handle` u64.
pub(crate) const ACK_ENTRY_LEN: usize = 4 + 8 + 8;

/// Bit of a `Receive`'s trailing `flags` byte: FIFO delivery ([`Receive::fifo`]).
pub(crate) const RECEIVE_FLAG_FIFO: u8 = 0x01;

pub(crate) fn encode_receive(w: &mut Writer<'_>, c: &Receive) -> Result<()> {
    if c.max_messages == 0 {
        return Err(StoreError::invalid("receive of 0 messages"));
    }
    w.str16("group", &c.group)?;
    w.str16("topic", &c.topic)?;
    w.u32(c.queue_id.get());
    w.u32(c.max_messages);
    w.u64(c.invisible_ms);
    w.u64(c.now_ms);
    w.u32(c.max_inflight);
    w.u64(c.queue_min.get());
    w.str16("filter", &c.filter)?;
    // Written only when a flag is set: a non-FIFO `Receive` keeps the bytes of the format
    // before `flags`, which nodes that predate it can still apply.
    if c.fifo {
        w.u8(RECEIVE_FLAG_FIFO);
    }
    Ok(())
}

/// Parses the optional trailing `flags` u8 of a `Receive`: absent when no flag is set (and in
/// entries written before it existed); an unknown bit is corruption.
fn parse_receive_flags(r: &mut Reader<'_>) -> Result<u8> {
    if r.remaining() == 0 {
        return Ok(0);
    }
    let at = r.pos();
    let flags = r.u8("receive flags")?;
    if flags & !RECEIVE_FLAG_FIFO != 0 {
        return Err(r.corrupt(at, format!("unknown receive flags {flags:#04x}")));
    }
    Ok(flags)
}

pub(crate) fn parse_receive(r: &mut Reader<'_>) -> Result<Receive> {
    let group = r.str16("group")?.to_owned();
    let topic = r.str16("topic")?.to_owned();
    let queue_id = QueueId::new(r.u32("queue id")?);
    let at = r.pos();
    let max_messages = r.u32("max messages")?;
    if max_messages == 0 {
        return Err(r.corrupt(at, "receive of 0 messages"));
    }
    let invisible_ms = r.u64("invisible ms")?;
    let now_ms = r.u64("now ms")?;
    let max_inflight = r.u32("max inflight")?;
    let queue_min = QueueOffset::new(r.u64("queue min")?);
    let filter = r.str16("filter")?.to_owned();
    let flags = parse_receive_flags(r)?;
    Ok(Receive {
        group,
        topic,
        queue_id,
        max_messages,
        invisible_ms,
        now_ms,
        max_inflight,
        queue_min,
        filter,
        fifo: flags & RECEIVE_FLAG_FIFO != 0,
    })
}

pub(crate) fn encode_ack(w: &mut Writer<'_>, c: &Ack) -> Result<()> {
    if c.entries.is_empty() {
        return Err(StoreError::invalid("ack of no message"));
    }
    let n = u32::try_from(c.entries.len())
        .map_err(|_| StoreError::invalid(format!("ack of {} messages", c.entries.len())))?;
    w.str16("group", &c.group)?;
    w.str16("topic", &c.topic)?;
    w.u32(n);
    for e in &c.entries {
        w.u32(e.queue_id.get());
        w.u64(e.queue_offset.get());
        w.u64(e.handle.get());
    }
    Ok(())
}

pub(crate) fn parse_ack(r: &mut Reader<'_>) -> Result<Ack> {
    let group = r.str16("group")?.to_owned();
    let topic = r.str16("topic")?.to_owned();
    let at = r.pos();
    let n = r.u32("ack count")? as usize;
    if n == 0 || n > r.remaining() / ACK_ENTRY_LEN {
        return Err(r.corrupt(
            at,
            format!(
                "ack count {n} does not fit the {} bytes left",
                r.remaining()
            ),
        ));
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(AckEntry {
            queue_id: QueueId::new(r.u32("queue id")?),
            queue_offset: QueueOffset::new(r.u64("queue offset")?),
            handle: LogIndex::new(r.u64("handle")?),
        });
    }
    Ok(Ack {
        group,
        topic,
        entries,
    })
}

pub(crate) fn encode_change_invisible(w: &mut Writer<'_>, c: &ChangeInvisible) -> Result<()> {
    w.str16("group", &c.group)?;
    w.str16("topic", &c.topic)?;
    w.u32(c.queue_id.get());
    w.u64(c.queue_offset.get());
    w.u64(c.handle.get());
    w.u64(c.invisible_ms);
    w.u64(c.now_ms);
    Ok(())
}

pub(crate) fn parse_change_invisible(r: &mut Reader<'_>) -> Result<ChangeInvisible> {
    Ok(ChangeInvisible {
        group: r.str16("group")?.to_owned(),
        topic: r.str16("topic")?.to_owned(),
        queue_id: QueueId::new(r.u32("queue id")?),
        queue_offset: QueueOffset::new(r.u64("queue offset")?),
        handle: LogIndex::new(r.u64("handle")?),
        invisible_ms: r.u64("invisible ms")?,
        now_ms: r.u64("now ms")?,
    })
}
