//! The replicated user table: who may call the node's APIs, with which role and on which topics
//! and groups.
//!
//! Like the [`crate::topic::TopicTable`] it changes only by applying committed `PutUser` /
//! `DeleteUser` commands, in log order, so every replica enforces the same users; it is in the
//! dispatch checkpoint and in snapshots. The secret key is held only as a [`SealedSecret`]:
//! the leader encrypts it (with the cluster key, which never enters the log) before proposing,
//! so the log, checkpoints and snapshots hold ciphertext only. Authorization itself (what a
//! role may do) is the node's; this module defines the data and the pattern language.
//!
//! **Patterns.** A topic or group pattern is a name in which `*` matches any run of characters
//! (also none); every other character matches itself. `*` alone matches every name,
//! `orders*` matches `orders` and `orders-eu`, `*-audit` matches `billing-audit`. Allowed
//! characters: those of topic names plus `*`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::Serialize;

use crate::error::Result;
use crate::error::StoreError;

/// Most users in the table.
pub const MAX_USERS: usize = 10_000;
/// Longest user name.
pub const MAX_USER_NAME_LEN: usize = 64;
/// Longest access key.
pub const MAX_ACCESS_KEY_LEN: usize = 128;
/// Most topic (and, separately, group) patterns of one user.
pub const MAX_PATTERNS: usize = 64;
/// Longest pattern.
pub const MAX_PATTERN_LEN: usize = 255;
/// Most bytes of a sealed secret (nonce + ciphertext + tag of a secret of at most 128 bytes).
pub const MAX_SEALED_SECRET_LEN: usize = 256;

/// What a user may do (the node's `authorize` gives each role its RPCs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Everything: membership, leader transfer, topics, users, and all data.
    Admin,
    /// Sends to its topics.
    Producer,
    /// Reads, receives, acks and commits offsets for its groups and topics.
    Consumer,
}

impl Role {
    /// The on-disk byte.
    pub fn to_u8(self) -> u8 {
        match self {
            Role::Admin => 1,
            Role::Producer => 2,
            Role::Consumer => 3,
        }
    }

    /// Parses the on-disk byte.
    pub fn from_u8(v: u8) -> Option<Role> {
        Some(match v {
            1 => Role::Admin,
            2 => Role::Producer,
            3 => Role::Consumer,
            _ => return None,
        })
    }

    /// The name users type (`admin`, `producer`, `consumer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Producer => "producer",
            Role::Consumer => "consumer",
        }
    }

    /// Parses a role name.
    pub fn parse(s: &str) -> Result<Role> {
        match s {
            "admin" => Ok(Role::Admin),
            "producer" => Ok(Role::Producer),
            "consumer" => Ok(Role::Consumer),
            other => Err(StoreError::invalid(format!(
                "role '{}' is not one of admin, producer, consumer",
                other.chars().take(64).collect::<String>()
            ))),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret key encrypted with the cluster key (nonce + AEAD ciphertext, opaque to the store).
/// `Debug` shows only its length; serde writes it as hex.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(pub Vec<u8>);

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedSecret(<{} bytes>)", self.0.len())
    }
}

impl Serialize for SealedSecret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }
}

impl<'de> Deserialize<'de> for SealedSecret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom("sealed secret is not hex"));
        }
        let bytes = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(serde::de::Error::custom)?;
        Ok(SealedSecret(bytes))
    }
}

/// One user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct User {
    /// Unique name.
    pub name: String,
    /// Unique access key (the `Credential=` of a signature).
    pub access_key: String,
    /// The secret key, encrypted with the cluster key.
    pub secret: SealedSecret,
    /// Role.
    pub role: Role,
    /// Topic patterns (ignored for `admin`).
    pub topics: Vec<String>,
    /// Group patterns (ignored for `admin`).
    pub groups: Vec<String>,
}

fn check_chars(kind: &str, s: &str, max: usize, extra: &[char]) -> Result<()> {
    if s.is_empty() {
        return Err(StoreError::invalid(format!("{kind} is empty")));
    }
    if s.len() > max {
        return Err(StoreError::invalid(format!(
            "{kind} is {} bytes; at most {max} allowed",
            s.len()
        )));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || extra.contains(&c);
    if let Some((pos, c)) = s.chars().enumerate().find(|(_, c)| !ok(*c)) {
        return Err(StoreError::invalid(format!(
            "{kind} '{s}' contains {c:?} at position {pos}; allowed: a-z A-Z 0-9 {}",
            extra
                .iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(" ")
        )));
    }
    Ok(())
}

/// Checks a pattern (see the module docs).
pub fn validate_pattern(kind: &str, p: &str) -> Result<()> {
    check_chars(kind, p, MAX_PATTERN_LEN, &['%', '|', '_', '-', '*'])
}

/// True if `name` matches `pattern` (`*` matches any run of characters; see the module docs).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    // Greedy match with one backtrack point (the last `*`): O(len(p) * len(n)) worst case.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

impl User {
    /// Checks every field's form (the leader before proposing; apply again).
    pub fn check(&self) -> Result<()> {
        check_chars("user name", &self.name, MAX_USER_NAME_LEN, &['.', '_', '-'])?;
        check_chars(
            "access key",
            &self.access_key,
            MAX_ACCESS_KEY_LEN,
            &['.', '_', '-'],
        )?;
        if self.secret.0.is_empty() || self.secret.0.len() > MAX_SEALED_SECRET_LEN {
            return Err(StoreError::invalid(format!(
                "sealed secret is {} bytes; 1..={MAX_SEALED_SECRET_LEN} allowed",
                self.secret.0.len()
            )));
        }
        for (kind, list) in [
            ("topic pattern", &self.topics),
            ("group pattern", &self.groups),
        ] {
            if list.len() > MAX_PATTERNS {
                return Err(StoreError::invalid(format!(
                    "{} {kind}s; at most {MAX_PATTERNS} allowed",
                    list.len()
                )));
            }
            for p in list {
                validate_pattern(kind, p)?;
            }
        }
        Ok(())
    }

    /// True if one of the user's topic patterns matches `topic`.
    pub fn may_topic(&self, topic: &str) -> bool {
        self.topics.iter().any(|p| pattern_matches(p, topic))
    }

    /// True if one of the user's group patterns matches `group`.
    pub fn may_group(&self, group: &str) -> bool {
        self.groups.iter().any(|p| pattern_matches(p, group))
    }
}

/// The users, by name (a `BTreeMap`: deterministic order in snapshots).
///
/// Invariant: names and access keys are unique; every user passes [`User::check`]; at most
/// [`MAX_USERS`] users.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserTable {
    users: BTreeMap<String, User>,
}

impl UserTable {
    /// Adds or replaces the user of that name. Refused: a bad field, an access key another user
    /// holds, or a full table.
    pub fn put(&mut self, user: User) -> Result<()> {
        user.check()?;
        if let Some(other) = self
            .users
            .values()
            .find(|u| u.access_key == user.access_key && u.name != user.name)
        {
            return Err(StoreError::invalid(format!(
                "access key '{}' belongs to user '{}'",
                user.access_key, other.name
            )));
        }
        if !self.users.contains_key(&user.name) && self.users.len() >= MAX_USERS {
            return Err(StoreError::invalid(format!(
                "the cluster has {MAX_USERS} users, the most allowed"
            )));
        }
        self.users.insert(user.name.clone(), user);
        Ok(())
    }

    /// Removes a user.
    pub fn delete(&mut self, name: &str) -> Result<User> {
        self.users.remove(name).ok_or_else(|| StoreError::NotFound {
            what: format!("user '{name}'"),
        })
    }

    /// The user of a name.
    pub fn get(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// The user holding an access key.
    pub fn by_access_key(&self, access_key: &str) -> Option<&User> {
        self.users.values().find(|u| u.access_key == access_key)
    }

    /// Every user, by name.
    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True if there is no user.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Checks the invariants.
    pub fn validate(&self) -> Result<()> {
        if self.users.len() > MAX_USERS {
            return Err(StoreError::invalid(format!("{} users", self.users.len())));
        }
        let mut keys = std::collections::BTreeSet::new();
        for (name, u) in &self.users {
            if name != &u.name {
                return Err(StoreError::invalid(format!(
                    "user '{}' filed as '{name}'",
                    u.name
                )));
            }
            u.check()?;
            if !keys.insert(u.access_key.as_str()) {
                return Err(StoreError::invalid(format!(
                    "access key '{}' held twice",
                    u.access_key
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
