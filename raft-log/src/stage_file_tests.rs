use std::os::unix::fs::FileExt;
use std::path::Path;

use super::*;
use crate::stage::Files;
use crate::stage::Stage;

const CAP: u64 = 1 << 20;
const RING: u64 = 64 << 10;

/// A stage in a stage file under `dir`, and one zeroed segment `commitlog/<start 0>`.
struct Setup {
    dir: tempfile::TempDir,
    stage: Stage,
    files: Files,
}

fn setup_with(boot: BootId) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("commitlog")).unwrap();
    let files = crate::stage::test_files(&seg_path(dir.path()), CAP);
    let stage = Stage::in_file(RING, dir.path().join(STAGE_FILE), boot);
    Setup { dir, stage, files }
}

fn setup() -> Setup {
    setup_with(boot_id().expect("this kernel gives a boot id"))
}

fn seg_path(dir: &Path) -> std::path::PathBuf {
    dir.join("commitlog").join(crate::segments::segment_name(0))
}

impl Setup {
    fn write(&self, offset: u64, data: &[u8]) {
        let plain = self.files.plain.clone();
        let seed = move |o: u64, b: &mut [u8]| plain.read_exact_at(b, o);
        assert!(self
            .stage
            .write(1, &self.files, offset, &[data], &seed)
            .unwrap());
    }

    fn on_disk(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        std::fs::File::open(seg_path(self.dir.path()))
            .unwrap()
            .read_exact_at(&mut buf, offset)
            .unwrap();
        buf
    }

    /// The process "dies" (halted: the header stays), then the next open's replay.
    fn crash_and_replay(self) -> Setup {
        self.stage.halt();
        self.stage.forget(1);
        let Setup { dir, stage, files } = self;
        drop(stage);
        replay(&dir.path().join(STAGE_FILE), &dir.path().join("commitlog")).unwrap();
        let stage = Stage::new(RING);
        Setup { dir, stage, files }
    }
}

fn bytes(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8) | 1).collect()
}

#[test]
fn a_killed_process_s_appends_are_replayed_into_their_segment() {
    let s = setup();
    let a = bytes(3, 10_000);
    let b = bytes(7, 3_000);
    s.write(0, &a);
    s.stage.flush(1).unwrap();
    s.write(10_000, &b);
    // Only the ring holds `b` (and the end of `a`'s last block is on disk).
    assert_eq!(s.on_disk(10_000, 3_000), vec![0u8; 3_000]);
    let s = s.crash_and_replay();
    assert_eq!(s.on_disk(0, 10_000), a);
    assert_eq!(s.on_disk(10_000, 3_000), b);
    // The owner is cleared: a second replay changes nothing.
    std::fs::OpenOptions::new()
        .write(true)
        .open(seg_path(s.dir.path()))
        .unwrap()
        .write_all_at(&[9u8; 16], 10_000)
        .unwrap();
    replay(
        &s.dir.path().join(STAGE_FILE),
        &s.dir.path().join("commitlog"),
    )
    .unwrap();
    assert_eq!(s.on_disk(10_000, 16), vec![9u8; 16]);
}

#[test]
fn appends_that_wrap_the_ring_are_replayed_in_order() {
    let s = setup();
    let mut at = 0;
    let mut all = Vec::new();
    // Three rings' worth, written out now and then (the ring needs room), the last part not.
    for i in 0..24u8 {
        let d = bytes(i, 7_777);
        s.write(at, &d);
        at += d.len() as u64;
        all.extend_from_slice(&d);
        if i % 3 == 2 && i < 21 {
            s.stage.flush(1).unwrap();
        }
    }
    let s = s.crash_and_replay();
    assert_eq!(s.on_disk(0, all.len()), all);
}

#[test]
fn written_out_bytes_and_a_clean_close_leave_nothing_to_replay() {
    let s = setup();
    s.write(0, &bytes(1, 5_000));
    s.stage.release(1).unwrap();
    // The segment changes after (as a later append through the page cache would).
    s.files.plain.write_all_at(&[4u8; 100], 200).unwrap();
    let s = s.crash_and_replay();
    assert_eq!(s.on_disk(200, 100), vec![4u8; 100]);
}

#[test]
fn a_segment_dropped_while_running_is_disowned() {
    let s = setup();
    s.write(0, &bytes(1, 5_000));
    // Not halted: the segment went away (truncation, install); its ring bytes are void.
    s.stage.forget(1);
    let Setup { dir, stage, .. } = s;
    drop(stage);
    replay(&dir.path().join(STAGE_FILE), &dir.path().join("commitlog")).unwrap();
    let mut buf = vec![0u8; 5_000];
    File::open(seg_path(dir.path()))
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .unwrap();
    assert_eq!(buf, vec![0u8; 5_000]);
}

#[test]
fn a_stage_file_from_an_earlier_boot_or_for_a_recreated_segment_is_not_replayed() {
    // Another boot: after a power loss the file is a mix of old pages.
    let s = setup_with([b'x'; 40]);
    s.write(0, &bytes(1, 5_000));
    let s = s.crash_and_replay();
    assert_eq!(s.on_disk(0, 5_000), vec![0u8; 5_000]);

    // The owner's file replaced by another at the same name.
    let s = setup();
    s.write(0, &bytes(1, 5_000));
    s.stage.halt();
    let seg = seg_path(s.dir.path());
    let keep = s.dir.path().join("old");
    std::fs::rename(&seg, &keep).unwrap();
    let fresh = crate::stage::test_files(&seg, CAP).plain;
    drop(s.stage);
    replay(
        &s.dir.path().join(STAGE_FILE),
        &s.dir.path().join("commitlog"),
    )
    .unwrap();
    let mut buf = vec![0u8; 5_000];
    fresh.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, vec![0u8; 5_000]);
}

#[test]
fn a_damaged_header_fails_the_replay_and_keeps_the_file() {
    let s = setup();
    s.write(0, &bytes(1, 5_000));
    s.stage.halt();
    let path = s.dir.path().join(STAGE_FILE);
    drop(s.stage);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&7u64.to_le_bytes(), (W_VERSION * 8) as u64)
        .unwrap();
    let e = replay(&path, &s.dir.path().join("commitlog")).unwrap_err();
    assert!(
        e.to_string().contains("write stage header not understood"),
        "{e}"
    );
    assert!(e.to_string().contains("version 7"), "{e}");
    assert!(path.exists());
    // A file cut short is ignored (it cannot be one this log wrote in full).
    f.set_len(100).unwrap();
    replay(&path, &s.dir.path().join("commitlog")).unwrap();
}

#[test]
fn a_stage_file_that_cannot_be_made_leaves_the_appends_to_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let files = crate::stage::test_files(&dir.path().join("seg"), CAP);
    let boot = boot_id().expect("this kernel gives a boot id");
    let stage = Stage::in_file(RING, dir.path().join("missing").join(STAGE_FILE), boot);
    let plain = files.plain.clone();
    let seed = move |o: u64, b: &mut [u8]| plain.read_exact_at(b, o);
    for _ in 0..2 {
        assert!(!stage.write(1, &files, 0, &[&[1u8; 100]], &seed).unwrap());
    }
    assert!(!stage.holds(1, 0, 100));
}
