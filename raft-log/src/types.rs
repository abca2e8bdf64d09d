//! The Raft type vocabulary every raftmq crate shares.
//!
//! raft-log is generic over the openraft type config `C` so that the state machine crate
//! (`store`) can pick its own apply response type `C::R`; everything the log itself stores is
//! fixed here: node ids, the node address record, the standard (one leader per term) leader id,
//! and the opaque application payload whose bytes the `store` crate encodes.

use std::cell::RefCell;
use std::fmt;

use openraft::RaftTypeConfig;
use serde::Deserialize;
use serde::Serialize;

/// Identity of a node in the cluster.
pub type NodeId = u64;

/// A Raft term.
pub type Term = u64;

/// Index of an entry in the Raft log (the first entry written by `initialize` has index 0).
///
/// Transparent for serde and in memory: the bare `u64` openraft's [`LogId`] carries (convert
/// with [`LogIndex::of`] and [`LogIndex::get`] at that edge). No arithmetic operators.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct LogIndex(u64);

impl LogIndex {
    /// The index with this number.
    pub const fn new(raw: u64) -> Self {
        LogIndex(raw)
    }

    /// The index of the entry `id` names.
    pub const fn of(id: &LogId) -> Self {
        LogIndex(id.index)
    }

    /// The bare number (openraft's `u64` index, on-disk codecs, tracing fields).
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The index of the entry after this one.
    pub const fn next(self) -> Self {
        LogIndex(self.0 + 1)
    }
}

impl fmt::Debug for LogIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for LogIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A log index as a bare number, inside raft-log's internals (openraft's `u64`); the public
/// surface ([`crate::LogStore`], [`crate::Watermarks`]) takes and gives [`LogIndex`].
pub(crate) type RawIndex = u64;

/// A byte position in the CommitLog. The same log index sits at the same physical offset on
/// every replica, so a physical offset names the same bytes cluster-wide. A message's id is
/// the physical offset of its record.
///
/// Transparent for serde and in memory: encodes as the bare `u64`. Only the operations the
/// code needs: no `Add<u64>`/`Sub`, so it does not mix with queue offsets, sizes or counts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct PhysOffset(u64);

impl PhysOffset {
    /// The start of a CommitLog that never lost a segment.
    pub const ZERO: PhysOffset = PhysOffset(0);

    /// The position with this number.
    pub const fn new(raw: u64) -> Self {
        PhysOffset(raw)
    }

    /// The bare number (wire, on-disk codecs, tracing fields).
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The position `bytes` further on.
    pub const fn advance(self, bytes: u64) -> Self {
        PhysOffset(self.0 + bytes)
    }

    /// The position `bytes` further on, or `None` past `u64::MAX` (values from a peer or a
    /// client).
    pub const fn checked_advance(self, bytes: u64) -> Option<Self> {
        match self.0.checked_add(bytes) {
            Some(p) => Some(PhysOffset(p)),
            None => None,
        }
    }

    /// True if this position is a multiple of `bytes` (a segment start when `bytes` is the
    /// segment size).
    pub const fn is_aligned(self, bytes: u64) -> bool {
        self.0 % bytes == 0
    }

    /// Bytes in `[self, end)`. Panics if `end` is before `self` (a broken range invariant,
    /// never peer or client data: use [`PhysOffset::checked_bytes_to`] there).
    pub fn bytes_to(self, end: PhysOffset) -> u64 {
        end.0
            .checked_sub(self.0)
            .expect("physical range ends before it starts")
    }

    /// Bytes in `[self, end)`, or `None` if `end` is before `self`.
    pub const fn checked_bytes_to(self, end: PhysOffset) -> Option<u64> {
        end.0.checked_sub(self.0)
    }
}

impl fmt::Debug for PhysOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for PhysOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A physical offset as a bare number, inside raft-log's internals; the public surface
/// ([`crate::LogStore`], [`crate::Watermarks`], [`crate::PinnedRange`],
/// [`crate::format::payload_offset`]) takes and gives [`PhysOffset`].
pub(crate) type RawPhys = u64;

/// Standard Raft leader id: at most one leader per term, so a committed leader id is a term.
pub type LeaderId = openraft::vote::leader_id_std::LeaderId<Term, NodeId>;

/// The committed part of a leader id: the term.
pub type CommittedLeaderId = openraft::vote::leader_id_std::CommittedLeaderId<Term>;

/// `(term, index)` of a log entry.
pub type LogId = openraft::LogId<CommittedLeaderId>;

/// A vote record (term, candidate, committed flag).
pub type Vote = openraft::Vote<LeaderId>;

/// Entry payload as stored in the CommitLog.
pub type Payload = openraft::EntryPayload<AppPayload, NodeId, PeerNode>;

/// A Raft log entry.
pub type LogEntry = openraft::Entry<CommittedLeaderId, Payload>;

/// Cluster membership with our node record.
pub type Membership = openraft::Membership<NodeId, PeerNode>;

/// Where a member can be reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerNode {
    /// `host:port` of the peer (Raft) gRPC service.
    pub raft_addr: String,
    /// `host:port` of the client gRPC service.
    pub client_addr: String,
}

impl fmt::Display for PeerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft={} client={}", self.raft_addr, self.client_addr)
    }
}

/// Application data of a normal entry: bytes the state machine encoded (a message batch or an
/// admin command). The log stores them verbatim; their layout is the `store` crate's format.
///
/// serde sees it as a byte string (`serialize_bytes`), not as a sequence of `u8`: formats with
/// a native byte string (postcard on the peer wire) copy it in one go instead of visiting every
/// byte. In postcard both forms are the same bytes (varint length, then the raw bytes), so the
/// peer wire format is unchanged; self-describing formats without byte strings (JSON) still
/// write an array of numbers, and both forms are accepted when reading.
///
/// The bytes are shared (`Bytes`): a clone is a reference count, so the log's recent-entries
/// cache, openraft's replication and apply hold the one buffer the leader encoded (or the
/// follower received) instead of copies read back from the CommitLog.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct AppPayload(pub bytes::Bytes);

impl From<Vec<u8>> for AppPayload {
    fn from(v: Vec<u8>) -> Self {
        AppPayload(v.into())
    }
}

impl Serialize for AppPayload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_newtype_struct("AppPayload", &Bytes(&self.0))
    }
}

/// A byte slice serialized as a byte string.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl<'de> Deserialize<'de> for AppPayload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct("AppPayload", PayloadVisitor)
    }
}

/// Reads an [`AppPayload`]: the newtype wrapper, then a byte string or a sequence of `u8`.
struct PayloadVisitor;

impl<'de> serde::de::Visitor<'de> for PayloadVisitor {
    type Value = AppPayload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("entry payload bytes")
    }

    fn visit_newtype_struct<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> Result<AppPayload, D::Error> {
        d.deserialize_byte_buf(PayloadVisitor)
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<AppPayload, E> {
        let shared = SOURCE.with_borrow(|parts| parts.iter().find_map(|s| slice_of(s, v)));
        Ok(AppPayload(
            shared.unwrap_or_else(|| bytes::Bytes::copy_from_slice(v)),
        ))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<AppPayload, E> {
        Ok(AppPayload::from(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<AppPayload, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(AppPayload::from(out))
    }
}

thread_local! {
    /// The buffers the [`decode_sharing`]s running on this thread decode from (the outer
    /// ones' too: a slice of any of them is a valid share). Kept, not reallocated, between
    /// decodes: a follower decodes every AppendEntries request through it.
    static SOURCE: RefCell<Vec<bytes::Bytes>> = const { RefCell::new(Vec::new()) };
}

/// Runs `decode`, a decode of bytes inside `source`, with every [`AppPayload`] it reads from
/// within `source` taken as a slice of it (a reference count) instead of a copy. A follower
/// decodes each AppendEntries request so: its entries' payloads then share the one buffer the
/// request arrived in, which holds little else (a few bytes of framing per entry).
pub fn decode_sharing<R>(source: &bytes::Bytes, decode: impl FnOnce() -> R) -> R {
    decode_sharing_parts(std::slice::from_ref(source), decode)
}

/// [`decode_sharing`] from a message in several buffers (the HTTP/2 frames it arrived in): a
/// payload that lies within one of `parts` is taken as a slice of it.
pub fn decode_sharing_parts<R>(parts: &[bytes::Bytes], decode: impl FnOnce() -> R) -> R {
    /// Drops this decode's buffers again, also when `decode` panics.
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            SOURCE.with_borrow_mut(|s| s.truncate(self.0));
        }
    }
    let _restore = Restore(SOURCE.with_borrow_mut(|s| {
        let outer = s.len();
        s.extend_from_slice(parts);
        outer
    }));
    decode()
}

/// `part` as a slice of `source` if it lies within it (an empty `part` anywhere).
fn slice_of(source: &bytes::Bytes, part: &[u8]) -> Option<bytes::Bytes> {
    let (start, at) = (source.as_ptr() as usize, part.as_ptr() as usize);
    // `slice_ref` panics on a part from elsewhere (and takes an empty one from anywhere).
    let within = part.is_empty() || (at >= start && at - start + part.len() <= source.len());
    within.then(|| source.slice_ref(part))
}

impl fmt::Debug for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppPayload({} bytes)", self.0.len())
    }
}

impl fmt::Display for AppPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

/// The type configs raft-log can store: everything fixed except the apply response `R` (and
/// the runtime plumbing openraft defaults).
pub trait LogTypes:
    RaftTypeConfig<
    D = AppPayload,
    NodeId = NodeId,
    Node = PeerNode,
    Term = Term,
    LeaderId = LeaderId,
    Vote = Vote,
    Payload = Payload,
    Entry = LogEntry,
>
{
}

impl<C> LogTypes for C where
    C: RaftTypeConfig<
        D = AppPayload,
        NodeId = NodeId,
        Node = PeerNode,
        Term = Term,
        LeaderId = LeaderId,
        Vote = Vote,
        Payload = Payload,
        Entry = LogEntry,
    >
{
}

#[cfg(test)]
pub(crate) mod test_types {
    use super::*;

    openraft::declare_raft_types!(
        /// Type config used by raft-log's own tests.
        pub TestConfig:
            D = AppPayload,
            R = (),
            Node = PeerNode,
            LeaderId = LeaderId,
    );

    fn _assert_log_types<C: LogTypes>() {}

    #[test]
    fn test_config_is_log_types() {
        _assert_log_types::<TestConfig>();
    }
}

#[cfg(test)]
mod tests {
    use super::AppPayload;
    use super::LogId;
    use super::LogIndex;
    use super::PhysOffset;

    #[test]
    fn offsets_and_indexes_are_bare_numbers_in_json_and_debug() {
        let json = serde_json::to_string(&(PhysOffset::new(4096), LogIndex::new(7))).expect("json");
        assert_eq!(json, "[4096,7]");
        let back: (PhysOffset, LogIndex) = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back, (PhysOffset::new(4096), LogIndex::new(7)));
        assert_eq!(
            format!("{:?} {}", PhysOffset::new(5), LogIndex::new(6)),
            "5 6"
        );
        assert_eq!(LogIndex::of(&LogId::new_term_index(2, 9)), LogIndex::new(9));
    }

    #[test]
    fn phys_offset_arithmetic_says_what_it_means() {
        let p = PhysOffset::new(100);
        assert_eq!(p.advance(28).get(), 128);
        assert_eq!(p.bytes_to(PhysOffset::new(150)), 50);
        assert_eq!(PhysOffset::new(150).checked_bytes_to(p), None);
        assert_eq!(PhysOffset::new(u64::MAX).checked_advance(1), None);
        assert!(PhysOffset::new(8192).is_aligned(4096) && !p.is_aligned(4096));
    }

    #[test]
    fn app_payload_in_json_is_an_array_of_numbers() {
        let json = serde_json::to_string(&AppPayload::from(vec![1, 2, 255])).expect("encodes");
        assert_eq!(json, "[1,2,255]");
        let back: AppPayload = serde_json::from_str(&json).expect("decodes");
        assert_eq!(back.0, vec![1, 2, 255]);
    }
}
