//! Fuzz target bodies over the store's decoders of disk and network bytes (message record,
//! command payload, snapshot file and chunked transfer, ConsumeQueue files, IndexFiles, the
//! dispatch checkpoint): the cargo-fuzz binaries in `fuzz/` and the corpus replay test call
//! these same functions. Each panics only when a decoder broke its contract (a panic on bad
//! bytes, or a decoded value that does not survive a round trip).

use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::command::record_offsets;
use crate::command::Command;
use crate::command::CommandView;
use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::consume_queue::ConsumeQueueConfig;
use crate::consume_queue::ConsumeQueueSet;
use crate::consume_queue::CqUnit;
use crate::index::format::IndexHeader;
use crate::index::format::HEADER_LEN as INDEX_HEADER_LEN;
use crate::index::IndexConfig;
use crate::index::IndexStore;
use crate::message::format::decode as decode_message;
use crate::message::format::encode as encode_message;
use crate::message::MessageView;
use crate::snapshot::format::check_prefix_crc;
use crate::snapshot::format::decode_header;
use crate::snapshot::format::decode_manifest;
use crate::snapshot::format::encode_header;
use crate::snapshot::format::encode_manifest;
use crate::snapshot::format::layout;
use crate::snapshot::format::read_head;
use crate::snapshot::read_manifest;
use crate::snapshot::verify::verify;
use crate::snapshot::SnapshotFile;
use crate::snapshot::SnapshotReceiver;
use crate::state::Checkpoint;
use crate::types::PhysOffset;

/// Segment size the snapshot targets verify against (the smallest a node accepts).
pub const FUZZ_SEGMENT_BYTES: u64 = 4096;
/// Largest snapshot the chunk target's receiver accepts.
pub const FUZZ_MAX_SNAPSHOT_BYTES: u64 = 64 << 10;
/// ConsumeQueue units per file in the ConsumeQueue target.
pub const FUZZ_CQ_UNITS_PER_FILE: u32 = 8;
/// IndexFile geometry of the IndexFile target: slots and units per file.
pub const FUZZ_INDEX_GEOMETRY: (u32, u32) = (4, 8);

/// A fresh directory under the system temp dir, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> ScratchDir {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("raftmq-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("the temp dir is writable");
        ScratchDir(p)
    }

    fn write(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("the temp dir is writable");
        }
        std::fs::write(&p, bytes).expect("the temp dir is writable");
        p
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn padded(data: &[u8], len: usize) -> Vec<u8> {
    let mut v = data[..data.len().min(len)].to_vec();
    v.resize(len, 0);
    v
}

/// One message record (as inside a `SendBatch` payload or a CommitLog entry). A record that
/// parses re-encodes to exactly its bytes (the format is canonical).
pub fn message_record(data: &[u8]) {
    let _ = MessageView::parse_trusted(data).map(|v| v.to_message());
    if let Ok(v) = MessageView::parse(data) {
        let m = v.to_message();
        let bytes = encode_message(&m).expect("a decoded message re-encodes");
        assert_eq!(
            &bytes[..],
            &data[..v.record_len as usize],
            "canonical record"
        );
        assert_eq!(
            decode_message(&bytes).expect("re-encoded record decodes"),
            m
        );
    }
    if let Ok(m) = decode_message(data) {
        assert_eq!(
            encode_message(&m).expect("a decoded message re-encodes"),
            data
        );
    }
}

/// One command payload (a Raft entry's application bytes). The view, the owned decoder and
/// the record offsets agree; a decoded command re-encodes to one that decodes equal.
pub fn command_payload(data: &[u8]) {
    let view = CommandView::parse(data);
    let owned = Command::decode(data);
    assert_eq!(view.is_ok(), owned.is_ok(), "view and owned decoders agree");
    let offsets = record_offsets(data);
    let (Ok(view), Ok(cmd)) = (view, owned) else {
        return;
    };
    assert_eq!(view.to_command(), cmd);
    if let CommandView::SendBatch { messages, .. } = &view {
        let offs = offsets.expect("a batch that parses has record offsets");
        let from_view: Vec<u32> = messages.iter().map(|m| m.offset_in_payload).collect();
        assert_eq!(offs, from_view, "record offsets agree with the parse");
        for m in messages {
            let unit = m.cq_unit(PhysOffset::new(0));
            assert_eq!(unit.size, m.view.record_len);
        }
    }
    let again = cmd.encode().expect("a decoded command re-encodes");
    let back = Command::decode(&again.0).expect("a re-encoded command decodes");
    assert_eq!(back, cmd, "command round trip");
}

/// A snapshot file as received or stored: header and manifest codecs over the bytes, then
/// `verify` over the same bytes as a file (the check every received snapshot passes before
/// openraft sees it). A decoded header and manifest re-encode to values that decode equal.
pub fn snapshot_file(data: &[u8]) {
    if let Ok(h) = decode_header(data) {
        assert_eq!(&encode_header(h.manifest_len)[..], &data[..16]);
    }
    if let Ok((h, m)) = read_head(data) {
        let bytes = encode_manifest(&m).expect("a decoded manifest re-encodes");
        assert_eq!(
            decode_manifest(&bytes).expect("re-encoded manifest decodes"),
            m
        );
        if let Ok(l) = layout(data, &h, &m) {
            assert!(l.units_at <= l.crc_at && l.crc_at < l.segments_at && l.segments_at <= l.end);
            let _ = check_prefix_crc(data, &l);
        }
    }
    let dir = ScratchDir::new();
    let path = dir.write("incoming.snap", data);
    let f = SnapshotFile::open(&path).expect("a written file opens");
    let last = read_manifest(&f).ok().and_then(|m| m.last_log_id);
    if let Ok(v) = verify(&f, last, FUZZ_SEGMENT_BYTES) {
        assert_eq!(
            v.layout.end,
            data.len() as u64,
            "a verified snapshot is whole"
        );
    }
}

/// The receiving side of a chunked snapshot transfer. Input: frames of `op` u8, `len` u16 LE
/// and `len` bytes; `op & 1` sends the chunk at a wrong offset (`op >> 1` past the right one).
/// Then the receiver finishes and verifies; byte 0 of the first frame's data picks the
/// snapshot's meta: the manifest's own last log id (even) or none (odd). A refused chunk
/// changes nothing; a snapshot that fails `verify` leaves no file behind.
pub fn snapshot_chunks(data: &[u8]) {
    let dir = ScratchDir::new();
    let rx = SnapshotReceiver::new(
        dir.0.join("incoming"),
        FUZZ_MAX_SNAPSHOT_BYTES,
        FUZZ_SEGMENT_BYTES,
    );
    let mut p = rx.begin().expect("the temp dir is writable");
    let mut written: u64 = 0;
    let mut rest = data;
    let mut meta_none = false;
    let mut first = true;
    while rest.len() >= 3 {
        let op = rest[0];
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        let chunk = &rest[3..rest.len().min(3 + len)];
        rest = &rest[3 + chunk.len()..];
        if first {
            meta_none = chunk.first().is_some_and(|b| b & 1 == 1);
            first = false;
        }
        let offset = match op & 1 {
            0 => written,
            _ => written + 1 + u64::from(op >> 1),
        };
        match rx.write_chunk(&mut p, offset, chunk) {
            Ok(()) => {
                assert_eq!(offset, written, "a chunk at a wrong offset is refused");
                written += chunk.len() as u64;
                assert!(written <= FUZZ_MAX_SNAPSHOT_BYTES, "the size cap holds");
            }
            Err(_) => {
                let over = written + chunk.len() as u64 > FUZZ_MAX_SNAPSHOT_BYTES;
                assert!(offset != written || over, "a good chunk was refused");
            }
        }
    }
    let f = rx.finish(p).expect("a received snapshot opens");
    assert_eq!(
        f.len(),
        written,
        "the file holds exactly the accepted chunks"
    );
    let path = f.path().to_owned();
    let last = match meta_none {
        true => None,
        false => read_manifest(&f).ok().and_then(|m| m.last_log_id),
    };
    if rx.verify(f, last).is_err() {
        assert!(!path.exists(), "a refused snapshot is removed");
    }
}

/// ConsumeQueue files: the input fills (up to) two files of one queue `t/0`, which the
/// store opens and recovers as after a crash. Every unit it keeps decodes, is in range and
/// re-encodes to its bytes.
pub fn consume_queue(data: &[u8]) {
    if let Some(u) = CqUnit::decode(data) {
        assert_eq!(&u.encode()[..], &data[..CQ_UNIT_LEN]);
    }
    let file_len = FUZZ_CQ_UNITS_PER_FILE as usize * CQ_UNIT_LEN;
    let dir = ScratchDir::new();
    let (a, b) = data.split_at(data.len().min(file_len));
    dir.write("cq/t/0/00000000000000000000", &padded(a, file_len));
    if !b.is_empty() {
        let name = format!("cq/t/0/{:020}", FUZZ_CQ_UNITS_PER_FILE);
        dir.write(&name, &padded(b, file_len));
    }
    let cfg = ConsumeQueueConfig {
        units_per_file: FUZZ_CQ_UNITS_PER_FILE,
    };
    let Ok(set) = ConsumeQueueSet::open(&dir.0.join("cq"), cfg) else {
        return;
    };
    for q in set.iter() {
        assert!(q.min_offset() <= q.max_offset());
        let n = q.min_offset().count_to(q.max_offset()) as usize;
        let units = q.read(q.min_offset(), n + 1).expect("recovered units read");
        assert_eq!(units.len(), n, "every unit in range reads");
        let mut prev: Option<CqUnit> = None;
        for u in &units {
            assert!(!u.is_blank(), "a recovered unit is written");
            assert!(
                prev.is_none_or(|p| p.phys_offset < u.phys_offset),
                "units ascend"
            );
            prev = Some(*u);
        }
        assert_eq!(q.last_unit(), units.last().copied());
    }
}

fn first_byte_hash(key: &str) -> u64 {
    key.bytes().next().map_or(0, u64::from)
}

/// One IndexFile (the active one, replayed at open) of a small geometry, with a key hash of
/// the key's first byte so queries reach the fuzzed chains. A header that decodes re-encodes
/// to its bytes; every query answers within its bounds.
pub fn index_file(data: &[u8]) {
    if let Ok(h) = IndexHeader::decode(data) {
        let back = IndexHeader::decode(&h.encode()).expect("a re-encoded header decodes");
        assert_eq!(back, h);
        assert_eq!(&h.encode()[..], &data[..INDEX_HEADER_LEN]);
    }
    let (slots, units) = FUZZ_INDEX_GEOMETRY;
    let cfg = IndexConfig {
        slots_per_file: slots,
        max_units_per_file: units,
    };
    let len = IndexHeader::empty(slots, units).file_len() as usize;
    let dir = ScratchDir::new();
    dir.write("index/00000000000000000000", &padded(data, len));
    let Ok(store) = IndexStore::open_with_hasher(&dir.0.join("index"), cfg, first_byte_hash) else {
        return;
    };
    for key in ["", "a", "b", "c", "d"] {
        let found = store.query(key, 0, u64::MAX, 16);
        assert!(found.len() <= 16, "a query stops at its max");
        let narrow = store.query(key, 1000, 2000, 4);
        assert!(narrow.len() <= 4);
    }
}

/// The dispatch checkpoint as `Checkpoint::load` reads it: input that starts with `{` as the
/// JSON file of older nodes (`store-meta/checkpoint.json`), any other as the binary file
/// (`store-meta/checkpoint`). A decoded checkpoint re-encodes (binary) to one that decodes
/// equal.
pub fn checkpoint(data: &[u8]) {
    let dir = ScratchDir::new();
    let file = if data.first() == Some(&b'{') {
        "store-meta/checkpoint.json"
    } else {
        "store-meta/checkpoint"
    };
    dir.write(file, data);
    let Ok(c) = Checkpoint::load(Path::new(&dir.0)) else {
        return;
    };
    let mut bytes = Vec::new();
    c.encode(&mut bytes)
        .expect("a decoded checkpoint re-encodes");
    let back = Checkpoint::decode(&bytes).expect("re-encoded checkpoint decodes");
    assert_eq!(back, c, "checkpoint round trip");
}
