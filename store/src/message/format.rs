//! The message record: how one message is laid out inside an application payload, and therefore
//! inside the CommitLog. A message's id is the physical offset of the first byte of its record.
//!
//! All integers little-endian. Version 1:
//!
//! | offset | size | field               | meaning                                              |
//! |-------:|-----:|---------------------|------------------------------------------------------|
//! | 0      | 4    | `total_len` u32     | bytes of the whole record, this field included       |
//! | 4      | 4    | `magic` u32         | [`MESSAGE_MAGIC`]                                    |
//! | 8      | 4    | `crc` u32           | CRC32 (crc32fast, IEEE) of bytes `[12, total_len)`   |
//! | 12     | 2    | `version` u16       | [`MESSAGE_VERSION`]                                  |
//! | 14     | 2    | reserved u16        | must be 0                                            |
//! | 16     | 4    | `flags` u32         | producer flags                                       |
//! | 20     | 4    | `queue_id` u32      | queue inside the topic                               |
//! | 24     | 8    | `born_ts_ms` u64    | producer clock                                       |
//! | 32     | 8    | `store_ts_ms` u64   | leader clock at accept time                          |
//! | 40     | var  | `born_host`         | u16 length + UTF-8                                   |
//! |        | var  | `topic`             | u16 length + UTF-8                                   |
//! |        | var  | `tags`              | u16 length + UTF-8 (empty = no tag)                  |
//! |        | var  | keys                | u16 count, then each: u16 length + UTF-8             |
//! |        | var  | properties          | u16 count, then each: name, value (u16 len + UTF-8); |
//! |        |      |                     | names strictly increasing (canonical, deterministic) |
//! |        | var  | `body`              | u32 length + bytes; last, so peeks never touch it    |
//!
//! The variable part must end exactly at `total_len`.

use crate::codec::le_u32_at;
use crate::codec::Reader;
use crate::codec::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::owned::Message;
use crate::message::strings::Properties;
use crate::message::strings::Strings;
use crate::message::strings::Text;
use crate::types::QueueId;
use crate::types::TimestampMs;

/// Magic of a message record (`"RMQM"` read as little-endian bytes `M Q M R`).
pub const MESSAGE_MAGIC: u32 = 0x524D_514D;
/// Current record version.
pub const MESSAGE_VERSION: u16 = 1;
/// Size of the fixed part.
pub const MESSAGE_HEADER_LEN: usize = 40;
/// Start of the CRC-covered range.
pub const MESSAGE_CRC_START: usize = 12;
/// Smallest possible record: header, three empty strings, zero keys, zero properties, empty body.
pub const MESSAGE_MIN_LEN: usize = MESSAGE_HEADER_LEN + 3 * 2 + 2 + 2 + 4;

const _: () = assert!(MESSAGE_HEADER_LEN == 4 + 4 + 4 + 2 + 2 + 4 + 4 + 8 + 8);
const _: () = assert!(MESSAGE_MIN_LEN == 54);

const SRC: &str = "message record";

/// A decoded record borrowing from the buffer it was parsed from: no allocation, no copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageView<'a> {
    /// Length of the whole record.
    pub record_len: u32,
    /// Producer flags.
    pub flags: u32,
    /// Queue id.
    pub queue_id: QueueId,
    /// Producer clock.
    pub born_timestamp_ms: TimestampMs,
    /// Leader clock.
    pub store_timestamp_ms: TimestampMs,
    /// Producer address.
    pub born_host: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Tags (empty = none).
    pub tags: &'a str,
    /// Keys in record order.
    pub keys: Strings<'a>,
    /// Properties, sorted by name.
    pub properties: Properties<'a>,
    /// Body.
    pub body: &'a [u8],
}

fn u16_count(what: &str, n: usize) -> Result<u16> {
    u16::try_from(n).map_err(|_| {
        StoreError::invalid(format!(
            "{n} {what}; the format allows at most {}",
            u16::MAX
        ))
    })
}

/// Encoded size of `m` (saturating; [`encode_into`] rejects what does not fit).
pub fn encoded_len(m: &Message) -> usize {
    let keys: usize = m.keys.iter().map(|k| 2 + k.len()).sum();
    let props: usize = m
        .properties
        .iter()
        .map(|(k, v)| 4 + k.len() + v.len())
        .sum();
    // Two properties, each with its two u16 lengths.
    let identity = m
        .identity
        .as_ref()
        .map_or(0, |id| 2 * 4 + id.properties_len());
    MESSAGE_MIN_LEN
        + m.born_host.len()
        + m.topic.len()
        + m.tags.len()
        + keys
        + props
        + identity
        + m.body.len()
}

/// Appends the record of `m` to `out`; returns the record length. Deterministic: equal messages
/// give equal bytes. Fails (appending nothing) if a field exceeds its width.
pub fn encode_into(m: &Message, out: &mut Vec<u8>) -> Result<usize> {
    let len = encoded_len(m);
    let total = u32::try_from(len)
        .map_err(|_| StoreError::invalid(format!("message record would be {len} bytes")))?;
    let start = out.len();
    out.reserve(len);
    let res = encode_body(m, total, out);
    if let Err(e) = res {
        out.truncate(start);
        return Err(e);
    }
    // The body, last in the record, is hashed from the message rather than from the copy just
    // made: the copy's stores are still on their way to the cache, and loads of what they
    // wrote would wait for them (the leader's top CRC cost at batch-32).
    let body_at = out.len() - m.body.len();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[start + MESSAGE_CRC_START..body_at]);
    crc.update(&m.body);
    let crc = crc.finalize();
    out[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(out.len() - start, len, "encoded_len matches the encoder");
    Ok(len)
}

fn encode_body(m: &Message, total: u32, out: &mut Vec<u8>) -> Result<()> {
    let mut w = Writer::new(out);
    w.u32(total);
    w.u32(MESSAGE_MAGIC);
    w.u32(0); // crc, patched by the caller
    w.u16(MESSAGE_VERSION);
    w.u16(0);
    w.u32(m.flags);
    w.u32(m.queue_id.get());
    w.u64(m.born_timestamp_ms);
    w.u64(m.store_timestamp_ms);
    w.str16("born host", &m.born_host)?;
    w.str16("topic", &m.topic)?;
    w.str16("tags", &m.tags)?;
    w.u16(u16_count("keys", m.keys.len())?);
    for k in &m.keys {
        w.str16("key", k)?;
    }
    write_properties(m, &mut w)?;
    w.blob32("body", &m.body)
}

/// The properties section: the map's entries, with the identity fields (if any) as their two
/// properties in name order, so a message gives the same record either way.
fn write_properties(m: &Message, w: &mut Writer<'_>) -> Result<()> {
    let mut digits = [0u8; 20];
    let fields = match &m.identity {
        Some(id) => Some(id.as_properties(&mut digits)?),
        None => None,
    };
    let count = m.properties.len() + fields.as_ref().map_or(0, |f| f.len());
    w.u16(u16_count("properties", count)?);
    let mut fields = fields.iter().flatten().peekable();
    let mut put = |k: &str, v: &str| {
        w.str16("property name", k)?;
        w.str16("property value", v)
    };
    for (k, v) in &m.properties {
        while let Some((fk, fv)) = fields.next_if(|(fk, _)| *fk < k.as_str()) {
            put(fk, fv)?;
        }
        if fields.peek().is_some_and(|(fk, _)| *fk == k.as_str()) {
            return Err(StoreError::invalid(format!(
                "property {k} is also given as the identity fields"
            )));
        }
        put(k, v)?;
    }
    fields.try_for_each(|(k, v)| put(k, v))
}

/// Length of the record starting at `buf[0]` as its header claims, if at least 4 bytes exist.
pub fn peek_record_len(buf: &[u8]) -> Option<u32> {
    le_u32_at(buf, 0)
}

/// Checks length, magic, CRC (if asked), version and reserved field of the record at the start
/// of `buf`; returns exactly the record's bytes.
fn check_frame(buf: &[u8], check_crc: bool) -> Result<&[u8]> {
    let mut r = Reader::new(buf, SRC);
    let total = r.u32("record length")?;
    if (total as usize) < MESSAGE_MIN_LEN {
        let reason = format!("record length {total} below minimum {MESSAGE_MIN_LEN}");
        return Err(r.corrupt(0, reason));
    }
    if buf.len() < total as usize {
        let reason = format!(
            "truncated record: length {total}, {} bytes available",
            buf.len()
        );
        return Err(r.corrupt(0, reason));
    }
    let rec = &buf[..total as usize];
    let magic = r.u32("magic")?;
    if magic != MESSAGE_MAGIC {
        let reason = format!("bad magic {magic:#010x}, expected {MESSAGE_MAGIC:#010x}");
        return Err(r.corrupt(4, reason));
    }
    let crc = r.u32("crc")?;
    if check_crc {
        let actual = crc32fast::hash(&rec[MESSAGE_CRC_START..]);
        if actual != crc {
            let reason = format!("crc mismatch: stored {crc:#010x}, computed {actual:#010x}");
            return Err(r.corrupt(8, reason));
        }
    }
    let version = r.u16("version")?;
    if version != MESSAGE_VERSION {
        return Err(r.corrupt(12, format!("unsupported version {version}")));
    }
    if r.u16("reserved")? != 0 {
        return Err(r.corrupt(14, "reserved field is not zero"));
    }
    Ok(rec)
}

impl<'a> MessageView<'a> {
    /// Parses and CRC-checks the record at the start of `buf` (`buf` may continue past it).
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        Self::parse_inner(buf, true)
    }

    /// Like [`parse`](Self::parse) but skips the CRC: for bytes already covered by an outer
    /// checksum (a CRC-checked command payload). Still bounds-checked; never panics.
    pub fn parse_trusted(buf: &'a [u8]) -> Result<Self> {
        Self::parse_inner(buf, false)
    }

    /// Two walks over the variable part: the first finds every string (bounds only), then its
    /// UTF-8 is checked in one pass over all of it (see [`Text`]), and the second checks each
    /// list's strings against that and the properties' order.
    fn parse_inner(buf: &'a [u8], check_crc: bool) -> Result<Self> {
        let rec = check_frame(buf, check_crc)?;
        let mut r = Reader::new(rec, SRC);
        r.take(16, "header")?;
        let flags = r.u32("flags")?;
        let queue_id = QueueId::new(r.u32("queue id")?);
        let born_timestamp_ms = r.u64("born timestamp")?;
        let store_timestamp_ms = r.u64("store timestamp")?;
        let born_host = span16(&mut r, "born host")?;
        let topic = span16(&mut r, "topic")?;
        let tags = span16(&mut r, "tags")?;
        let key_count = r.u16("key count")?;
        let keys_at = r.pos();
        for _ in 0..key_count {
            span16(&mut r, "key")?;
        }
        let property_count = r.u16("property count")?;
        let properties_at = r.pos();
        for _ in 0..property_count {
            span16(&mut r, "property name")?;
            span16(&mut r, "property value")?;
        }
        let text_end = r.pos();
        let body = r.blob32("body")?;
        r.finish("body")?;
        let var = &rec[MESSAGE_HEADER_LEN..text_end];
        let text = match std::str::from_utf8(var) {
            Ok(s) => Text::Utf8(s),
            Err(_) => Text::Bytes(var),
        };
        let string = |(at, len): (usize, usize), what: &str| {
            text.str_at(at - MESSAGE_HEADER_LEN, len)
                .ok_or_else(|| not_utf8(at, what))
        };
        let v = MessageView {
            record_len: rec.len() as u32,
            flags,
            queue_id,
            born_timestamp_ms,
            store_timestamp_ms,
            born_host: string(born_host, "born host")?,
            topic: string(topic, "topic")?,
            tags: string(tags, "tags")?,
            keys: Strings::new(text, keys_at - MESSAGE_HEADER_LEN, u32::from(key_count)),
            properties: Properties::new(text, properties_at - MESSAGE_HEADER_LEN, property_count),
            body,
        };
        check_strings(&v, keys_at, properties_at)?;
        Ok(v)
    }

    /// Copies into an owned [`Message`].
    pub fn to_message(&self) -> Message {
        self.to_message_with(bytes::Bytes::copy_from_slice(self.body))
    }

    /// Like [`to_message`](Self::to_message), but the body is a slice of `rec`'s buffer, not
    /// a copy, when `rec` holds the bytes this view was parsed from (else it is copied).
    pub fn to_message_in(&self, rec: &bytes::Bytes) -> Message {
        let start = (self.body.as_ptr() as usize).wrapping_sub(rec.as_ptr() as usize);
        let inside = start
            .checked_add(self.body.len())
            .is_some_and(|end| end <= rec.len());
        match inside {
            true => self.to_message_with(rec.slice(start..start + self.body.len())),
            false => self.to_message(),
        }
    }

    fn to_message_with(&self, body: bytes::Bytes) -> Message {
        Message {
            topic: self.topic.to_owned(),
            queue_id: self.queue_id,
            flags: self.flags,
            born_timestamp_ms: self.born_timestamp_ms,
            store_timestamp_ms: self.store_timestamp_ms,
            born_host: self.born_host.to_owned(),
            tags: self.tags.to_owned(),
            keys: self.keys.iter().map(str::to_owned).collect(),
            properties: self
                .properties
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            body,
            identity: None,
        }
    }
}

/// The offset and length of the next `u16`-length-prefixed string; its bytes are not read.
fn span16(r: &mut Reader<'_>, what: &str) -> Result<(usize, usize)> {
    let len = usize::from(r.u16(what)?);
    let at = r.pos();
    r.take(len, what)?;
    Ok((at, len))
}

#[cold]
fn not_utf8(at: usize, what: &str) -> StoreError {
    let reason = format!("{what} is not UTF-8");
    StoreError::corruption(SRC, at as u64, reason)
}

/// Checks that every key and property of `v` is a UTF-8 string and that property names
/// strictly increase, in one walk over each list. `keys_at` and `properties_at` are the lists'
/// offsets in the record, for the errors.
fn check_strings(v: &MessageView<'_>, keys_at: usize, properties_at: usize) -> Result<()> {
    walk(v.keys, keys_at, |_| "key", |_, _, _| Ok(()))?;
    let what = |i: usize| match i % 2 {
        0 => "property name",
        _ => "property value",
    };
    let mut prev: Option<&str> = None;
    walk(v.properties.strings(), properties_at, what, |i, at, s| {
        if i % 2 == 1 {
            return Ok(());
        }
        if prev.is_some_and(|p| p >= s) {
            let reason = "property names not strictly increasing";
            return Err(StoreError::corruption(SRC, at as u64, reason));
        }
        prev = Some(s);
        Ok(())
    })
}

/// Reads every string of `list`, whose first length prefix is at record offset `at`, and hands
/// `each` its index, offset and text; fails at the first one that is not UTF-8 (`what` names
/// it by index).
fn walk<'a>(
    list: Strings<'a>,
    mut at: usize,
    what: impl Fn(usize) -> &'static str,
    mut each: impl FnMut(usize, usize, &'a str) -> Result<()>,
) -> Result<()> {
    let mut strings = list.iter();
    for i in 0..list.len() {
        let s = strings.next().ok_or_else(|| not_utf8(at + 2, what(i)))?;
        each(i, at, s)?;
        at += 2 + s.len();
    }
    Ok(())
}

/// Encodes `m` into a fresh buffer.
pub fn encode(m: &Message) -> Result<Vec<u8>> {
    let mut v = Vec::with_capacity(encoded_len(m));
    encode_into(m, &mut v)?;
    Ok(v)
}

/// Decodes and CRC-checks one record that fills `buf` exactly.
pub fn decode(buf: &[u8]) -> Result<Message> {
    let v = MessageView::parse(buf)?;
    if v.record_len as usize != buf.len() {
        return Err(StoreError::corruption(
            SRC,
            u64::from(v.record_len),
            format!(
                "{} trailing bytes after record",
                buf.len() - v.record_len as usize
            ),
        ));
    }
    Ok(v.to_message())
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
