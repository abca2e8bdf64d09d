//! Fuzz target bodies over raft-log's decoders of disk bytes (the entry record, the raft
//! index record, the recovery scan of segments, the committed-id file): the cargo-fuzz binaries in `fuzz/` and the
//! corpus replay test call these same functions. Each panics only when a decoder broke its
//! contract (a panic on bad bytes, or a decoded value that does not survive a round trip).

use std::path::PathBuf;
use std::sync::Arc;

use crate::committed_file::decode_file;
use crate::committed_file::decode_slot;
use crate::committed_file::encode_slot;
use crate::committed_file::slot_offset;
use crate::committed_file::FILE_BYTES;
use crate::config::LogConfig;
use crate::config::MIN_SEGMENT_BYTES;
use crate::env::Env;
use crate::format::decode_record;
use crate::format::encode_entry;
use crate::format::ENTRY_HEADER_LEN;
use crate::mem_env::MemEnv;
use crate::meta::FlushCheckpoint;
use crate::raft_index::EntryLocation;
use crate::raft_index::INDEX_RECORD_LEN;
use crate::recovery::recover;
use crate::recovery::Persisted;
use crate::recycle::Recycler;
use crate::segments::segment_name;
use crate::types::LogId;
use crate::types::Payload;

/// Segment size of the scan target: the smallest a node accepts.
pub const SCAN_SEGMENT_BYTES: u64 = MIN_SEGMENT_BYTES;
/// Segments the scan target fills at most (the rest of the input is ignored).
const SCAN_MAX_SEGMENTS: usize = 3;

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = data.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// One CommitLog entry record. Input: the record's physical offset (u64 LE), then the bytes
/// at that offset (the segment room is their length). A decoded entry re-encodes to a record
/// that decodes equal, byte-identical unless it holds a membership (JSON may be respelled).
pub fn entry_record(data: &[u8]) {
    let Some(buf) = data.get(8..) else { return };
    let phys = u64_at(data, 0);
    let room = buf.len() as u64;
    let Ok(Some(entry)) = decode_record(buf, phys, room) else {
        return;
    };
    let mut out = Vec::new();
    let len = encode_entry(&entry, phys, &mut out).expect("a decoded entry re-encodes");
    let back = decode_record(&out, phys, out.len() as u64).expect("a re-encoded entry decodes");
    assert_eq!(back.as_ref(), Some(&entry), "entry record round trip");
    if !matches!(entry.payload, Payload::Membership(_)) {
        assert_eq!(&buf[..len], &out[..], "entry records are canonical");
    }
}

/// One raft index record (`raft-index/index`). A decoded record re-encodes to the same bytes.
pub fn index_record(data: &[u8]) {
    let Some(loc) = EntryLocation::decode(data) else {
        return;
    };
    let mut out = Vec::new();
    loc.encode(&mut out);
    assert_eq!(
        &out[..],
        &data[..INDEX_RECORD_LEN],
        "index record round trip"
    );
}

/// The committed-id file (`meta/committed-id`, read whole at open). The newest valid slot it
/// yields re-encodes to a slot that decodes to the same sequence number and id.
pub fn committed_id(data: &[u8]) {
    let Ok((seq, id)) = decode_file(data, std::path::Path::new("committed-id")) else {
        return;
    };
    let slot = encode_slot(seq, &id).expect("a decoded id re-encodes");
    assert_eq!(
        decode_slot(&slot),
        Ok(Some((seq, id))),
        "committed id round trip"
    );
}

/// A committed-id file whose slot `seq % 2` holds `(seq, id)` for each pair (corpus seeds).
pub fn committed_id_file(slots: &[(u64, Option<LogId>)]) -> Vec<u8> {
    let mut file = vec![0u8; FILE_BYTES as usize];
    for (seq, id) in slots {
        let at = slot_offset(*seq) as usize;
        let slot = encode_slot(*seq, id).expect("an id encodes");
        file[at..at + slot.len()].copy_from_slice(&slot);
    }
    file
}

/// The open-time recovery scan of a CommitLog. Input: byte 0 the number of raft index
/// records given as trusted (`& 3`), byte 1 flags (bit 0: a purged id, bit 1: repair
/// truncates corruption), bytes 2..10 the purged index, 10..18 the flush checkpoint's end;
/// then the trusted records (32 bytes each); the rest fills up to three 4 KiB segments from
/// physical offset 0. Recovery must return an error or a log whose every entry decodes from
/// the input where it says, and a second open of what it left must find the same log.
pub fn segment_scan(data: &[u8]) {
    let Some(head) = data.get(..18) else { return };
    let trusted_n = usize::from(head[0] & 3);
    let flags = head[1];
    let purged = (flags & 1 != 0).then(|| LogId::new_term_index(0, u64_at(head, 2)));
    let checkpoint = FlushCheckpoint {
        phys_end: u64_at(head, 10) % (SCAN_SEGMENT_BYTES * SCAN_MAX_SEGMENTS as u64 + 1),
        log_id: None,
    };
    let config = LogConfig {
        segment_bytes: SCAN_SEGMENT_BYTES,
        repair_truncate_corruption: flags & 2 != 0,
        preallocate: false,
        ..LogConfig::default()
    };
    let rest = &data[18..];
    let split = (trusted_n * INDEX_RECORD_LEN).min(rest.len());
    let trusted: Vec<EntryLocation> = rest[..split]
        .chunks(INDEX_RECORD_LEN)
        .filter_map(EntryLocation::decode)
        .collect();
    let log = &rest[split..];
    let seg = SCAN_SEGMENT_BYTES as usize;
    let log = &log[..log.len().min(seg * SCAN_MAX_SEGMENTS)];

    let env = Arc::new(MemEnv::new());
    let dir = PathBuf::from("/fuzz/commitlog");
    env.create_dir_all(&dir).expect("mem env creates dirs");
    for (i, bytes) in log.chunks(seg).enumerate() {
        let path = dir.join(segment_name((i * seg) as u64));
        let f = env
            .create_segment(&path, SCAN_SEGMENT_BYTES)
            .expect("mem env creates segments");
        f.write_at(0, bytes).expect("mem env writes");
    }
    let open = |checkpoint: FlushCheckpoint, trusted: &[EntryLocation]| {
        recover(
            env.clone(),
            dir.clone(),
            &config,
            Persisted {
                checkpoint,
                purged,
                ..Persisted::default()
            },
            trusted,
            Arc::new(Recycler::new(env.clone(), dir.clone(), 0)),
        )
    };
    let Ok(first) = open(checkpoint, &trusted) else {
        return;
    };
    for (i, l) in first.locations.iter().enumerate() {
        assert!(
            l.end() <= first.end,
            "entry {} ends past the log end",
            l.index
        );
        if let Some(prev) = i.checked_sub(1).map(|p| &first.locations[p]) {
            assert!(l.phys >= prev.end(), "entries overlap");
            assert!(l.term >= prev.term, "terms decrease");
        }
        if trusted.contains(l) {
            // Taken from the raft index instead of the bytes (only its ends are checked).
            continue;
        }
        let at = l.phys as usize;
        let room = (seg - at % seg) as u64;
        let rec = log.get(at..).expect("a recovered entry lies in the input");
        let e = decode_record(rec, l.phys, room)
            .expect("a recovered entry decodes")
            .expect("a recovered entry is an entry");
        assert_eq!((e.log_id.index, *e.log_id.leader_id), (l.index, l.term));
        assert_eq!(l.size as usize, ENTRY_HEADER_LEN + rec_payload_len(rec));
    }
    if !trusted.is_empty() {
        return;
    }
    drop(first.segments);
    let again = open(FlushCheckpoint::default(), &[]).expect("a recovered log opens again");
    assert_eq!(again.end, first.end, "second open finds the same end");
    assert_eq!(
        again.locations, first.locations,
        "second open finds the same entries"
    );
}

fn rec_payload_len(rec: &[u8]) -> usize {
    let mut a = [0u8; 4];
    a.copy_from_slice(&rec[12..16]);
    u32::from_le_bytes(a) as usize
}
