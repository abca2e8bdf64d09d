//! [`MemberSpec`]: one initial member, written "id=raft_host:port/client_host:port".

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;

/// One member of the bootstrap membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    /// Node id.
    pub id: u64,
    /// host:port of its Raft (peer) service.
    pub raft_addr: String,
    /// host:port of its client service.
    pub client_addr: String,
}

impl FromStr for MemberSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not id=raft_host:port/client_host:port");
        let (id, addrs) = s.trim().split_once('=').ok_or_else(bad)?;
        let (raft, client) = addrs.split_once('/').ok_or_else(bad)?;
        let id: u64 = id.trim().parse().map_err(|_| bad())?;
        let ok = |a: &str| {
            a.rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        };
        if id == 0 || !ok(raft) || !ok(client) {
            return Err(bad());
        }
        Ok(Self {
            id,
            raft_addr: raft.to_string(),
            client_addr: client.to_string(),
        })
    }
}

impl fmt::Display for MemberSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}/{}", self.id, self.raft_addr, self.client_addr)
    }
}

impl Serialize for MemberSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MemberSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
