//! Names and size limits, checked by the leader before it proposes an entry.
//!
//! # Names
//!
//! Topic names follow RocketMQ: 1..=127 characters from `[%|a-zA-Z0-9_-]`. Topic names are
//! also directory names under `consumequeue/`; that character set is safe on every filesystem we
//! run on, and `.`/`..` cannot be formed from it.
//!
//! Reserved topics (refused by [`validate_user_topic_name`], i.e. for producers and for
//! `CreateTopic` from clients; internal code uses [`validate_topic_name`]):
//! - any name starting with `rmq_sys_` or `RMQ_SYS_` (RocketMQ 5 system topics),
//! - any name starting with `%RETRY%` or `%DLQ%` (per-group retry / dead-letter topics, created by
//!   the broker itself, never by clients),
//! - the RocketMQ 4 system topics `SCHEDULE_TOPIC_XXXX`, `TBW102`, `SELF_TEST_TOPIC`,
//!   `OFFSET_MOVED_EVENT`, `TRANS_CHECK_MAX_TIME_TOPIC`.
//!
//! Consumer group names: 1..=255 characters from the same set; user groups may not start with
//! `CID_RMQ_SYS_`.
//!
//! # Determinism
//!
//! Limits are node-local configuration and may differ between nodes, so they are checked only
//! *before* proposing (by the leader). `apply` never re-checks them: a committed entry is applied
//! on every replica whatever its local limits say. Only the format widths (e.g. `u16` string
//! lengths) are absolute.

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;
use crate::message::Message;
use crate::message::SendIdentity;

/// Longest topic name, in bytes (RocketMQ `TOPIC_MAX_LENGTH`).
pub const MAX_TOPIC_NAME_LEN: usize = 127;
/// Longest consumer group name, in bytes.
pub const MAX_GROUP_NAME_LEN: usize = 255;
/// Longest born-host string (`host:port`), in bytes.
pub const MAX_BORN_HOST_LEN: usize = 255;

const ALLOWED_DESC: &str = "letters a-z A-Z, digits 0-9, '%', '|', '_', '-'";
const RESERVED_TOPIC_PREFIXES: [&str; 4] = ["rmq_sys_", "RMQ_SYS_", "%RETRY%", "%DLQ%"];
const RESERVED_TOPICS: [&str; 5] = [
    "SCHEDULE_TOPIC_XXXX",
    "TBW102",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "TRANS_CHECK_MAX_TIME_TOPIC",
];
const RESERVED_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

/// Most characters of client input an error message quotes (see [`quote`]).
pub const QUOTE_MAX_CHARS: usize = 64;

/// `input` quoted for an error message: `'input'`, or, past [`QUOTE_MAX_CHARS`] characters,
/// its first ones and its size (`'abc...' (60000000 bytes)`), so a message never echoes
/// unbounded client input. Every error text that quotes client input goes through here.
pub fn quote(input: &str) -> String {
    Quoted(input).to_string()
}

/// [`quote`] as a `Display` that formats only when it is written, for error texts built in
/// a hot path's argument list (`too_big(format_args!(..., Quoted(k)), ...)`): no allocation
/// unless the error is raised.
pub struct Quoted<'a>(pub &'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let input = self.0;
        match input.char_indices().nth(QUOTE_MAX_CHARS) {
            None => write!(f, "'{input}'"),
            Some((cut, _)) => write!(f, "'{}...' ({} bytes)", &input[..cut], input.len()),
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')
}

fn validate_name(kind: &str, name: &str, max_len: usize) -> Result<()> {
    if name.is_empty() {
        return Err(StoreError::invalid(format!("{kind} name is empty")));
    }
    if name.len() > max_len {
        return Err(StoreError::invalid(format!(
            "{kind} name {} is {} characters; at most {max_len} allowed",
            quote(name),
            name.len()
        )));
    }
    if let Some((pos, c)) = name.chars().enumerate().find(|(_, c)| !is_name_char(*c)) {
        return Err(StoreError::invalid(format!(
            "{kind} name {} contains {c:?} at position {pos}; allowed: {ALLOWED_DESC}",
            quote(name)
        )));
    }
    Ok(())
}

/// Checks a topic name's characters and length (system topics allowed).
pub fn validate_topic_name(name: &str) -> Result<()> {
    validate_name("topic", name, MAX_TOPIC_NAME_LEN)
}

/// Checks a topic name a client may produce to or create: [`validate_topic_name`] plus the
/// reserved names of the module docs.
pub fn validate_user_topic_name(name: &str) -> Result<()> {
    validate_topic_name(name)?;
    if let Some(p) = RESERVED_TOPIC_PREFIXES
        .iter()
        .find(|p| name.starts_with(*p))
    {
        return Err(StoreError::invalid(format!(
            "topic name {} starts with the reserved system prefix '{p}'",
            quote(name)
        )));
    }
    if RESERVED_TOPICS.contains(&name) {
        return Err(StoreError::invalid(format!(
            "topic name {} is a reserved system topic",
            quote(name)
        )));
    }
    Ok(())
}

/// Checks a consumer group name a client may use.
pub fn validate_group_name(name: &str) -> Result<()> {
    validate_name("group", name, MAX_GROUP_NAME_LEN)?;
    if name.starts_with(RESERVED_GROUP_PREFIX) {
        return Err(StoreError::invalid(format!(
            "group name {} starts with the reserved system prefix '{RESERVED_GROUP_PREFIX}'",
            quote(name)
        )));
    }
    Ok(())
}

/// Size of a message as `max-message-bytes` counts it: body, property names and values, keys,
/// topic and tags.
pub fn message_bytes(m: &Message) -> usize {
    let props: usize = m.properties.iter().map(|(k, v)| k.len() + v.len()).sum();
    let keys: usize = m.keys.iter().map(String::len).sum();
    m.body.len() + props + identity_bytes(m) + keys + m.topic.len() + m.tags.len()
}

/// The identity fields' bytes as the two properties the record holds them as (names and
/// values), so a message counts the same either way.
fn identity_bytes(m: &Message) -> usize {
    m.identity.as_ref().map_or(0, SendIdentity::properties_len)
}

/// Size and count limits of messages, batches and topics.
///
/// Serde form: flat kebab-case keys, so [`StoreConfig`](crate::StoreConfig) embeds it with
/// `#[serde(flatten)]`; a node's config file reads the three send limits (`max-message-bytes`,
/// `max-batch-messages`, `max-batch-bytes`), its other fields have no key there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct StoreLimits {
    /// Largest message, counted by [`message_bytes`]. Default 4 MiB (4194304); range
    /// 1024 ..= 64 MiB (67108864).
    pub max_message_bytes: u32,
    /// Longest tag string. Default 256; range 1 ..= 65535.
    pub max_tag_bytes: u32,
    /// Longest single key. Default 256; range 1 ..= 65535.
    pub max_key_bytes: u32,
    /// Most keys per message. Default 32; range 0 ..= 1024.
    pub max_keys_per_message: u32,
    /// Most user properties per message. Default 64; range 0 ..= 1024.
    pub max_properties: u32,
    /// Longest property name. Default 128; range 1 ..= 65535.
    pub max_property_name_bytes: u32,
    /// Longest property value. Default 16384; range 1 ..= 65535.
    pub max_property_value_bytes: u32,
    /// Largest sum of all property names and values of one message. Default 32767 (RocketMQ's
    /// `Short.MAX_VALUE`); range 0 ..= 16 MiB.
    pub max_properties_total_bytes: u32,
    /// Most messages in one batch (one Raft entry). Default 1024; range 1 ..= 65536.
    pub max_batch_messages: u32,
    /// Largest encoded batch payload; also bounds the entries a node's SendStream groups.
    /// Default 16 MiB (16777216); range max-message-bytes ..= 256 MiB (268435456).
    pub max_batch_bytes: u32,
    /// Most queues a topic may have (read or write). Default 1024; range 1 ..= 65535.
    pub max_queues_per_topic: u32,
    /// Most topics (user and system together); creating one more, explicitly or by a first
    /// send, is refused RESOURCE_EXHAUSTED. Bounds the topic table, the offset table (offsets
    /// are only committed for existing queues) and the ConsumeQueue files. Default 10000;
    /// range 1 ..= 1000000.
    pub max_topics: u32,
    /// Most consumer groups with replicated state (committed offsets or pop state); a
    /// CommitOffset or Receive of one more group is refused RESOURCE_EXHAUSTED. Bounds the
    /// offset and receive tables against client-chosen group names. Default 10000; range
    /// 1 ..= 1000000.
    pub max_groups: u32,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            max_message_bytes: 4 << 20,
            max_tag_bytes: 256,
            max_key_bytes: 256,
            max_keys_per_message: 32,
            max_properties: 64,
            max_property_name_bytes: 128,
            max_property_value_bytes: 16384,
            max_properties_total_bytes: 32767,
            max_batch_messages: 1024,
            max_batch_bytes: 16 << 20,
            max_queues_per_topic: 1024,
            max_topics: 10_000,
            max_groups: 10_000,
        }
    }
}

fn check_range(field: &'static str, v: u32, lo: u32, hi: u32) -> Result<()> {
    if v < lo || v > hi {
        return Err(StoreError::Config {
            field,
            reason: format!("{v} is outside {lo}..={hi}"),
        });
    }
    Ok(())
}

fn too_big(what: impl std::fmt::Display, actual: usize, field: &str, max: u32) -> Result<()> {
    if actual > max as usize {
        return Err(StoreError::invalid(format!(
            "{what} is {actual} bytes; {field} is {max}"
        )));
    }
    Ok(())
}

fn too_many(what: &str, actual: usize, field: &str, max: u32) -> Result<()> {
    if actual > max as usize {
        return Err(StoreError::invalid(format!(
            "{what} has {actual}; {field} is {max}"
        )));
    }
    Ok(())
}

impl StoreLimits {
    /// Rejects out-of-range fields, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        check_range("max-message-bytes", self.max_message_bytes, 1024, 64 << 20)?;
        check_range("max-tag-bytes", self.max_tag_bytes, 1, 65535)?;
        check_range("max-key-bytes", self.max_key_bytes, 1, 65535)?;
        check_range("max-keys-per-message", self.max_keys_per_message, 0, 1024)?;
        check_range("max-properties", self.max_properties, 0, 1024)?;
        check_range(
            "max-property-name-bytes",
            self.max_property_name_bytes,
            1,
            65535,
        )?;
        check_range(
            "max-property-value-bytes",
            self.max_property_value_bytes,
            1,
            65535,
        )?;
        check_range(
            "max-properties-total-bytes",
            self.max_properties_total_bytes,
            0,
            16 << 20,
        )?;
        check_range("max-batch-messages", self.max_batch_messages, 1, 65536)?;
        check_range(
            "max-batch-bytes",
            self.max_batch_bytes,
            self.max_message_bytes,
            256 << 20,
        )?;
        check_range("max-queues-per-topic", self.max_queues_per_topic, 1, 65535)?;
        check_range("max-topics", self.max_topics, 1, 1_000_000)?;
        check_range("max-groups", self.max_groups, 1, 1_000_000)?;
        Ok(())
    }

    /// Checks one message a client wants to send: topic name (user rules), size, tags, keys,
    /// properties and born host.
    pub fn check_message(&self, m: &Message) -> Result<()> {
        validate_user_topic_name(&m.topic)?;
        self.check_message_parts(m)
    }

    /// [`check_message`](Self::check_message) for a message the broker itself writes into a
    /// system topic (a dead-letter queue `%DLQ%<group>`): the reserved names are allowed.
    pub fn check_system_message(&self, m: &Message) -> Result<()> {
        validate_topic_name(&m.topic)?;
        self.check_message_parts(m)
    }

    /// Everything of a message but its topic name.
    fn check_message_parts(&self, m: &Message) -> Result<()> {
        too_big(
            "message",
            message_bytes(m),
            "max-message-bytes",
            self.max_message_bytes,
        )?;
        too_big("tags", m.tags.len(), "max-tag-bytes", self.max_tag_bytes)?;
        too_big(
            "born host",
            m.born_host.len(),
            "the born-host limit",
            MAX_BORN_HOST_LEN as u32,
        )?;
        too_many(
            "message keys",
            m.keys.len(),
            "max-keys-per-message",
            self.max_keys_per_message,
        )?;
        for (i, k) in m.keys.iter().enumerate() {
            if k.is_empty() {
                return Err(StoreError::invalid(format!("key #{i} is empty")));
            }
            too_big(
                format_args!("key #{i}"),
                k.len(),
                "max-key-bytes",
                self.max_key_bytes,
            )?;
        }
        self.check_properties(m)
    }

    fn check_properties(&self, m: &Message) -> Result<()> {
        crate::dedup::check_identity(m)?;
        // The identity fields count as the two properties the record holds them as.
        let fields = if m.identity.is_some() { 2 } else { 0 };
        let mut total = identity_bytes(m);
        too_many(
            "properties",
            m.properties.len() + fields,
            "max-properties",
            self.max_properties,
        )?;
        for (k, v) in &m.properties {
            if k.is_empty() {
                return Err(StoreError::invalid("a property name is empty"));
            }
            too_big(
                format_args!("property name {}", Quoted(k)),
                k.len(),
                "max-property-name-bytes",
                self.max_property_name_bytes,
            )?;
            too_big(
                format_args!("value of property {}", Quoted(k)),
                v.len(),
                "max-property-value-bytes",
                self.max_property_value_bytes,
            )?;
            total += k.len() + v.len();
        }
        too_big(
            "properties in total",
            total,
            "max-properties-total-bytes",
            self.max_properties_total_bytes,
        )
    }

    /// Checks a batch's message count and encoded size (the messages are checked one by one with
    /// [`check_message`](Self::check_message)).
    pub fn check_batch(&self, message_count: usize, encoded_bytes: usize) -> Result<()> {
        if message_count == 0 {
            return Err(StoreError::invalid("batch is empty"));
        }
        too_many(
            "batch",
            message_count,
            "max-batch-messages",
            self.max_batch_messages,
        )?;
        too_big(
            "encoded batch",
            encoded_bytes,
            "max-batch-bytes",
            self.max_batch_bytes,
        )
    }

    /// Refuses a new topic when `existing` topics are there already (`max-topics`): a
    /// [`StoreError::LimitReached`].
    pub fn check_new_topic(&self, existing: usize) -> Result<()> {
        if existing >= self.max_topics as usize {
            return Err(StoreError::LimitReached {
                what: format!("{existing} topics exist"),
                setting: "max-topics",
                max: u64::from(self.max_topics),
            });
        }
        Ok(())
    }

    /// Checks a topic's queue counts.
    pub fn check_queue_count(&self, what: &str, n: u32) -> Result<()> {
        if n == 0 || n > self.max_queues_per_topic {
            return Err(StoreError::invalid(format!(
                "{what} is {n}; allowed 1 ..= {} (max-queues-per-topic)",
                self.max_queues_per_topic
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
