//! Topic configuration and the replicated topic table.
//!
//! The [`TopicTable`] is part of the state machine: it changes only by applying committed
//! `CreateTopic` / `UpdateTopic` / `DeleteTopic` commands, in log order, so it is identical on
//! every replica. It is a `BTreeMap` so iteration and serialization (snapshots) are
//! deterministic.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;
use crate::limits::validate_topic_name;
use crate::limits::validate_user_topic_name;
use crate::limits::StoreLimits;
use crate::types::QueueId;

/// Topic permission bits, RocketMQ's values (`PERM_READ` = 4, `PERM_WRITE` = 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Permissions {
    /// Consumers may pull.
    pub read: bool,
    /// Producers may send.
    pub write: bool,
}

/// RocketMQ `PermName.PERM_READ`.
pub const PERM_READ: u8 = 1 << 2;
/// RocketMQ `PermName.PERM_WRITE`.
pub const PERM_WRITE: u8 = 1 << 1;

impl Permissions {
    /// Read and write.
    pub const READ_WRITE: Permissions = Permissions {
        read: true,
        write: true,
    };

    /// The on-disk bits.
    pub fn to_bits(self) -> u8 {
        (if self.read { PERM_READ } else { 0 }) | (if self.write { PERM_WRITE } else { 0 })
    }

    /// Parses the bits; `None` if any unknown bit is set.
    pub fn from_bits(bits: u8) -> Option<Self> {
        if bits & !(PERM_READ | PERM_WRITE) != 0 {
            return None;
        }
        Some(Permissions {
            read: bits & PERM_READ != 0,
            write: bits & PERM_WRITE != 0,
        })
    }
}

impl Default for Permissions {
    fn default() -> Self {
        Permissions::READ_WRITE
    }
}

/// Configuration of one topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TopicConfig {
    /// Topic name (see [`crate::limits`]).
    pub name: String,
    /// Queues consumers read: `0..read_queue_count`.
    pub read_queue_count: u32,
    /// Queues producers write: `0..write_queue_count`.
    pub write_queue_count: u32,
    /// Read / write permission.
    pub perm: Permissions,
}

impl TopicConfig {
    /// A read-write topic with `queues` read and write queues.
    pub fn new(name: impl Into<String>, queues: u32) -> Self {
        TopicConfig {
            name: name.into(),
            read_queue_count: queues,
            write_queue_count: queues,
            perm: Permissions::READ_WRITE,
        }
    }

    /// Leader-side check before proposing a create/update from a client: user name rules and
    /// queue counts within `limits`.
    pub fn check(&self, limits: &StoreLimits) -> Result<()> {
        validate_user_topic_name(&self.name)?;
        limits.check_queue_count("read queue count", self.read_queue_count)?;
        limits.check_queue_count("write queue count", self.write_queue_count)
    }

    /// True if a producer may send to `queue_id`.
    pub fn writable(&self, queue_id: QueueId) -> bool {
        self.perm.write && queue_id.is_below(self.write_queue_count)
    }

    /// True if a consumer may pull from `queue_id`.
    pub fn readable(&self, queue_id: QueueId) -> bool {
        self.perm.read && queue_id.is_below(self.read_queue_count)
    }

    /// Largest queue count (the queues that may hold data).
    pub fn queue_count(&self) -> u32 {
        self.read_queue_count.max(self.write_queue_count)
    }
}

/// The replicated registry of topics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TopicTable {
    /// Invariant: every key equals its value's `name`, which is a valid topic name.
    topics: BTreeMap<String, TopicConfig>,
}

impl TopicTable {
    /// An empty table.
    pub fn new() -> Self {
        TopicTable::default()
    }

    /// Adds a topic; fails if it exists. Deterministic: apply it on every replica.
    pub fn create(&mut self, cfg: TopicConfig) -> Result<()> {
        validate_topic_name(&cfg.name)?;
        if self.topics.contains_key(&cfg.name) {
            return Err(StoreError::AlreadyExists {
                what: format!("topic '{}'", cfg.name),
            });
        }
        tracing::info!(topic = %cfg.name, read_queues = cfg.read_queue_count,
            write_queues = cfg.write_queue_count, "topic created");
        self.topics.insert(cfg.name.clone(), cfg);
        Ok(())
    }

    /// Replaces a topic's config; returns the old one. Fails if it does not exist.
    pub fn update(&mut self, cfg: TopicConfig) -> Result<TopicConfig> {
        let slot = self
            .topics
            .get_mut(&cfg.name)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("topic '{}'", cfg.name),
            })?;
        tracing::info!(topic = %cfg.name, read_queues = cfg.read_queue_count,
            write_queues = cfg.write_queue_count, "topic updated");
        Ok(std::mem::replace(slot, cfg))
    }

    /// Removes a topic; returns its config. Fails if it does not exist.
    pub fn delete(&mut self, name: &str) -> Result<TopicConfig> {
        let cfg = self
            .topics
            .remove(name)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("topic '{name}'"),
            })?;
        tracing::info!(topic = %name, "topic deleted");
        Ok(cfg)
    }

    /// A topic's config.
    pub fn get(&self, name: &str) -> Option<&TopicConfig> {
        self.topics.get(name)
    }

    /// Topics in name order.
    pub fn iter(&self) -> impl Iterator<Item = &TopicConfig> {
        self.topics.values()
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.topics.len()
    }

    /// True when there is no topic.
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Checks the invariant (e.g. after deserializing a snapshot).
    pub fn validate(&self) -> Result<()> {
        for (k, v) in &self.topics {
            if *k != v.name {
                return Err(StoreError::invalid(format!(
                    "topic table key '{k}' holds config of '{}'",
                    v.name
                )));
            }
            validate_topic_name(k)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_bits() {
        for p in [(false, false), (true, false), (false, true), (true, true)] {
            let p = Permissions {
                read: p.0,
                write: p.1,
            };
            assert_eq!(Permissions::from_bits(p.to_bits()), Some(p));
        }
        assert_eq!(Permissions::READ_WRITE.to_bits(), 6);
        assert_eq!(Permissions::from_bits(1), None);
    }

    #[test]
    fn create_update_delete() {
        let mut t = TopicTable::new();
        t.create(TopicConfig::new("b", 4)).expect("create");
        t.create(TopicConfig::new("a", 2)).expect("create");
        assert!(matches!(
            t.create(TopicConfig::new("a", 1)),
            Err(StoreError::AlreadyExists { .. })
        ));
        assert!(t.create(TopicConfig::new("a b", 1)).is_err());
        let names: Vec<_> = t.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let mut c = TopicConfig::new("a", 8);
        c.perm.write = false;
        assert_eq!(t.update(c.clone()).expect("update").read_queue_count, 2);
        assert!(!t.get("a").expect("a").writable(QueueId::new(0)));
        assert!(t.get("a").expect("a").readable(QueueId::new(7)));
        assert!(!t.get("a").expect("a").readable(QueueId::new(8)));
        assert!(matches!(
            t.update(TopicConfig::new("zz", 1)),
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(t.delete("a").expect("delete"), c);
        assert!(t.delete("a").is_err());
        assert_eq!(t.len(), 1);
        t.validate().expect("valid");
    }

    #[test]
    fn serde_round_trip_is_deterministic() {
        let mut t = TopicTable::new();
        t.create(TopicConfig::new("z", 1)).expect("create");
        t.create(TopicConfig::new("m", 3)).expect("create");
        let s = serde_json::to_string(&t).expect("ser");
        assert!(s.find("\"m\"").expect("m") < s.find("\"z\"").expect("z"));
        assert!(s.contains("read-queue-count"));
        let back: TopicTable = serde_json::from_str(&s).expect("de");
        assert_eq!(back, t);
        back.validate().expect("valid");
    }

    #[test]
    fn check_against_limits() {
        let l = StoreLimits::default();
        TopicConfig::new("orders", 8).check(&l).expect("ok");
        assert!(TopicConfig::new("orders", 0).check(&l).is_err());
        assert!(TopicConfig::new("TBW102", 1).check(&l).is_err());
    }
}
