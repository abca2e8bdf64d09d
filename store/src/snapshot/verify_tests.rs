//! Tests of `verify` on manifests whose numbers come from a hostile sender.

use super::*;
use crate::consume_queue::CqUnit;
use crate::snapshot::format::encode_header;
use crate::snapshot::format::encode_manifest;
use crate::snapshot::format::QueueManifest;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

const SEG: u64 = 4096;

fn manifest(segments: Vec<SegmentManifest>, log_end: Option<PhysOffset>) -> Manifest {
    Manifest {
        last_log_id: Some(LogId::new_term_index(1, 1)),
        membership: Default::default(),
        topics: Default::default(),
        offsets: Default::default(),
        receive: Default::default(),
        dedup: Default::default(),
        users: Default::default(),
        dispatched_phys_end: PhysOffset::new(0),
        log_end_phys: log_end,
        segment_bytes: SEG,
        queues: Vec::new(),
        segments,
    }
}

/// A snapshot file of `m`, `units` and `tail` with a correct prefix CRC.
fn file(dir: &tempfile::TempDir, m: &Manifest, units: &[u8], tail: &[u8]) -> SnapshotFile {
    let manifest = encode_manifest(m).expect("encodes");
    let mut b = encode_header(manifest.len() as u64).to_vec();
    b.extend_from_slice(&manifest);
    b.extend_from_slice(units);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(tail);
    let path = dir.path().join("s.snap");
    std::fs::write(&path, &b).expect("writes");
    SnapshotFile::open(&path).expect("opens")
}

#[test]
fn a_segment_ending_past_u64_max_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = PhysOffset::new(u64::MAX / SEG * SEG);
    let m = manifest(
        vec![SegmentManifest {
            start,
            len: SEG,
            crc: 0,
        }],
        Some(start),
    );
    let f = file(&dir, &m, &[], &[]);
    let e = verify(&f, m.last_log_id, SEG).expect_err("refused");
    assert!(matches!(e, StoreError::Corruption { .. }), "{e}");
}

#[test]
fn a_second_segment_past_u64_max_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = PhysOffset::new(u64::MAX / SEG * SEG);
    let seg = |start| SegmentManifest {
        start,
        len: SEG,
        crc: 0,
    };
    let m = manifest(vec![seg(start), seg(PhysOffset::new(0))], None);
    let f = file(&dir, &m, &[], &[]);
    let e = verify(&f, m.last_log_id, SEG).expect_err("refused");
    assert!(matches!(e, StoreError::Corruption { .. }), "{e}");
}

#[test]
fn a_unit_ending_past_u64_max_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tail = vec![7u8; 100];
    let mut m = manifest(
        vec![SegmentManifest {
            start: PhysOffset::new(0),
            len: 100,
            crc: crc32fast::hash(&tail),
        }],
        Some(PhysOffset::new(100)),
    );
    m.queues.push(QueueManifest {
        topic: "t".into(),
        queue_id: QueueId::new(0),
        min_offset: QueueOffset::new(0),
        max_offset: QueueOffset::new(1),
    });
    let unit = CqUnit {
        phys_offset: PhysOffset::new(u64::MAX - 1),
        size: 10,
        tag_hash: 0,
    };
    let f = file(&dir, &m, &unit.encode(), &tail);
    let e = verify(&f, m.last_log_id, SEG).expect_err("refused");
    assert!(matches!(e, StoreError::Corruption { .. }), "{e}");
}
