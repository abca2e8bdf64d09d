use super::*;
use crate::snapshot::format::encode_header;
use crate::snapshot::format::encode_manifest;
use crate::snapshot::format::Manifest;
use crate::types::PhysOffset;

const SEGMENT: u64 = 4096;

/// A snapshot of `last` with no segments and no queues; a valid prefix CRC.
fn no_segments(last: Option<LogId>, log_end: Option<PhysOffset>) -> Vec<u8> {
    let m = Manifest {
        last_log_id: last,
        membership: Default::default(),
        topics: Default::default(),
        offsets: Default::default(),
        receive: Default::default(),
        dedup: Default::default(),
        users: Default::default(),
        dispatched_phys_end: PhysOffset::new(0),
        log_end_phys: log_end,
        segment_bytes: SEGMENT,
        queues: Vec::new(),
        segments: Vec::new(),
    };
    let mbytes = encode_manifest(&m).expect("encode");
    let mut b = encode_header(mbytes.len() as u64).to_vec();
    b.extend_from_slice(&mbytes);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| rd.count())
}

fn receive(rx: &SnapshotReceiver, bytes: &[u8]) -> SnapshotFile {
    let mut p = rx.begin().expect("begin");
    rx.write_chunk(&mut p, 0, bytes).expect("write");
    rx.finish(p).expect("finish")
}

#[test]
fn an_unfinished_transfer_removes_its_file() {
    let d = tempfile::tempdir().expect("tempdir");
    let rx = SnapshotReceiver::new(d.path().join("in"), 1 << 20, SEGMENT);
    let mut p = rx.begin().expect("begin");
    rx.write_chunk(&mut p, 0, b"abc").expect("write");
    assert_eq!(files(&d.path().join("in")), 1);
    let e = rx.write_chunk(&mut p, 7, b"x").expect_err("gap");
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    drop(p);
    assert_eq!(
        files(&d.path().join("in")),
        0,
        "dropped partial left its file"
    );
}

#[test]
fn the_cap_is_checked_as_bytes_arrive_and_names_the_setting() {
    let d = tempfile::tempdir().expect("tempdir");
    let rx = SnapshotReceiver::new(d.path().join("in"), 10, SEGMENT);
    let mut p = rx.begin().expect("begin");
    rx.write_chunk(&mut p, 0, &[0; 6]).expect("within the cap");
    let e = rx
        .write_chunk(&mut p, 6, &[0; 5])
        .expect_err("past the cap");
    assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
    assert!(e.to_string().contains("max-snapshot-bytes"), "{e}");
    drop(p);
    assert_eq!(files(&d.path().join("in")), 0);
}

#[test]
fn the_default_cap_is_half_the_free_space() {
    let d = tempfile::tempdir().expect("tempdir");
    let rx = SnapshotReceiver::new(d.path().join("in"), 0, SEGMENT);
    let p = rx.begin().expect("begin");
    let free = crate::fs_space::statvfs(d.path())
        .expect("statvfs")
        .available_bytes;
    // Free space moves a little meanwhile; the cap is about half of it, far below 64 TiB.
    assert!(p.cap <= free / 2 + (64 << 20), "cap {} free {free}", p.cap);
    assert!(
        p.cap >= free / 2 - (64 << 20).min(free / 2),
        "cap {}",
        p.cap
    );
}

#[test]
fn a_snapshot_of_an_entry_without_segments_fails_verify() {
    let d = tempfile::tempdir().expect("tempdir");
    let rx = SnapshotReceiver::new(d.path().join("in"), 1 << 20, SEGMENT);
    let last = LogId::new_term_index(3, 10_000);
    for end in [None, Some(PhysOffset::new(SEGMENT))] {
        let f = receive(&rx, &no_segments(Some(last), end));
        let e = rx.verify(f, Some(last)).expect_err("no segments");
        assert!(e.to_string().contains("no segments"), "{e}");
        assert_eq!(files(&d.path().join("in")), 0, "refused snapshot kept");
    }
    let f = receive(&rx, &no_segments(None, Some(PhysOffset::new(SEGMENT))));
    let e = rx.verify(f, None).expect_err("a log end without an entry");
    assert!(e.to_string().contains("covers no entry"), "{e}");
    let f = receive(&rx, &no_segments(None, None));
    let ok = rx
        .verify(f, None)
        .expect("the empty snapshot is consistent");
    drop(rx.leftover(&ok));
    assert_eq!(files(&d.path().join("in")), 0, "leftover not removed");
}

#[test]
fn the_leftover_guard_spares_files_outside_the_incoming_dir() {
    let d = tempfile::tempdir().expect("tempdir");
    let rx = SnapshotReceiver::new(d.path().join("in"), 1 << 20, SEGMENT);
    let other = d.path().join("kept.snap");
    std::fs::write(&other, no_segments(None, None)).expect("write");
    let f = SnapshotFile::open(&other).expect("open");
    drop(rx.leftover(&f));
    assert!(other.exists());
}
