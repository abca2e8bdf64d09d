use std::os::unix::fs::FileExt;
use std::path::Path;

use super::*;
use crate::env::Env;
use crate::fs_env::FsEnv;
use crate::ring::stream_copy;

const CAP: u64 = 1 << 20;

/// A zeroed file of `CAP` bytes and its descriptors.
fn files(path: &Path) -> Files {
    test_files(path, CAP)
}

fn on_disk(f: &Files, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    f.plain.read_exact_at(&mut buf, offset).unwrap();
    buf
}

/// The stage over one file, the file read as the segment's mapping would be.
struct Seg {
    stage: Arc<Stage>,
    id: u64,
    files: Files,
}

impl Seg {
    /// Segment `id` of `stage`, a new file at `path`.
    fn new(stage: &Arc<Stage>, id: u64, path: &Path) -> Seg {
        Seg {
            stage: stage.clone(),
            id,
            files: files(path),
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> bool {
        let plain = self.files.plain.clone();
        let seed = move |o: u64, b: &mut [u8]| plain.read_exact_at(b, o);
        let staged = self
            .stage
            .write(self.id, &self.files, offset, &[data], &seed)
            .unwrap();
        if !staged {
            self.files.plain.write_all_at(data, offset).unwrap();
        }
        staged
    }

    fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        let plain = self.files.plain.clone();
        let file_read = move |o: u64, b: &mut [u8]| plain.read_exact_at(b, o);
        self.stage
            .read(self.id, offset, &mut buf, &file_read)
            .unwrap();
        buf
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((seed * 31 + i) % 251) as u8)
        .collect()
}

#[test]
fn bytes_are_read_from_the_stage_until_written_out_then_from_the_file() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(64 << 10));
    let s = Seg::new(&stage, 1, &d.path().join("a"));
    let a = pattern(1, 5000);
    assert!(s.write(100, &a));
    assert_eq!(s.read(100, a.len()), a);
    assert_eq!(on_disk(&s.files, 100, a.len()), vec![0; a.len()]);
    stage.flush(1).unwrap();
    assert_eq!(on_disk(&s.files, 100, a.len()), a);
    // The partial last block went out padded with zeros.
    assert_eq!(on_disk(&s.files, 5100, 8192 - 5100), vec![0; 8192 - 5100]);
    // The next append rewrites that block with what follows.
    let b = pattern(2, 300);
    assert!(s.write(5100, &b));
    stage.flush(1).unwrap();
    assert_eq!(on_disk(&s.files, 100, 5000), a);
    assert_eq!(on_disk(&s.files, 5100, 300), b);
    // Nothing new: nothing written.
    let before = stage.written_bytes();
    stage.flush(1).unwrap();
    assert_eq!(stage.written_bytes(), before);
}

#[test]
fn the_ring_wraps_writing_out_what_it_reuses() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(4 * BLOCK));
    let s = Seg::new(&stage, 7, &d.path().join("a"));
    let mut all = Vec::new();
    let mut at = 0u64;
    for i in 0..40 {
        let p = pattern(i, 1000 + (i as usize * 97) % 1000);
        assert!(s.write(at, &p));
        at += p.len() as u64;
        all.extend_from_slice(&p);
        // Every byte so far reads back, from the ring or from the file below it.
        let from = at.saturating_sub(3 * BLOCK);
        assert_eq!(s.read(from, (at - from) as usize), all[from as usize..]);
        assert_eq!(s.read(0, 500), all[..500]);
    }
    stage.flush(7).unwrap();
    assert_eq!(on_disk(&s.files, 0, all.len()), all);
}

#[test]
fn a_rewrite_below_the_end_is_written_out_again() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(64 << 10));
    let s = Seg::new(&stage, 3, &d.path().join("a"));
    assert!(s.write(0, &pattern(1, 10_000)));
    stage.flush(3).unwrap();
    // A truncation back to 6000 writes zeros there, then new appends.
    assert!(s.write(6000, &[0; 4000]));
    assert!(s.write(6000, &pattern(9, 1500)));
    assert_eq!(s.read(6000, 1500), pattern(9, 1500));
    stage.flush(3).unwrap();
    assert_eq!(on_disk(&s.files, 0, 6000), pattern(1, 10_000)[..6000]);
    assert_eq!(on_disk(&s.files, 6000, 1500), pattern(9, 1500));
    assert_eq!(on_disk(&s.files, 7500, 2500), vec![0; 2500]);
}

#[test]
fn handing_the_ring_over_writes_the_old_owners_bytes_out() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(64 << 10));
    let a = Seg::new(&stage, 1, &d.path().join("a"));
    let b = Seg::new(&stage, 2, &d.path().join("b"));
    assert!(a.write(0, &pattern(1, 3000)));
    // b starts mid-block: the block's head is read from b's file.
    b.files.plain.write_all_at(&pattern(5, 10), 4096).unwrap();
    assert!(b.write(4106, &pattern(2, 700)));
    assert_eq!(on_disk(&a.files, 0, 3000), pattern(1, 3000));
    assert_eq!(a.read(0, 3000), pattern(1, 3000));
    stage.flush(2).unwrap();
    assert_eq!(on_disk(&b.files, 4096, 10), pattern(5, 10));
    assert_eq!(on_disk(&b.files, 4106, 700), pattern(2, 700));
    // Flushing a segment that no longer owns the ring writes nothing.
    let before = stage.written_bytes();
    stage.flush(1).unwrap();
    assert_eq!(stage.written_bytes(), before);
}

#[test]
fn writes_that_do_not_continue_the_ring_go_around_it() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(64 << 10));
    let s = Seg::new(&stage, 4, &d.path().join("a"));
    assert!(s.write(8192, &pattern(1, 100)));
    // A gap past the end, one below the ring's start, and one over half the ring.
    assert!(!s.write(20_000, &pattern(2, 10)));
    assert_eq!(on_disk(&s.files, 8192, 100), pattern(1, 100));
    assert!(s.write(20_010, &pattern(3, 10)));
    assert!(!s.write(0, &pattern(4, 10)));
    assert!(!s.write(100_000, &vec![7; 40 << 10]));
    for (at, want) in [
        (8192, pattern(1, 100)),
        (20_000, pattern(2, 10)),
        (20_010, pattern(3, 10)),
        (0, pattern(4, 10)),
        (100_000, vec![7; 40 << 10]),
    ] {
        assert_eq!(s.read(at, want.len()), want);
        assert_eq!(on_disk(&s.files, at, want.len()), want);
    }
}

#[test]
fn readers_see_every_append_while_the_flusher_writes_out() {
    let d = tempfile::tempdir().unwrap();
    let stage = Arc::new(Stage::new(8 * BLOCK));
    let s = Arc::new(Seg::new(&stage, 9, &d.path().join("a")));
    let end = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let byte = |i: u64| ((i * 7 + i / 4096) % 253) as u8;
    let flusher = {
        let (stage, done) = (stage.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                stage.flush(9).unwrap();
            }
        })
    };
    let reader = {
        let (s, end, done) = (s.clone(), end.clone(), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let e = end.load(std::sync::atomic::Ordering::Acquire);
                let from = (n * 977) % e.max(1);
                let len = (e - from).min(5000) as usize;
                let got = s.read(from, len);
                for (k, b) in got.iter().enumerate() {
                    assert_eq!(*b, byte(from + k as u64), "byte {}", from + k as u64);
                }
                n += 1;
            }
        })
    };
    let mut at = 0u64;
    while at < CAP - 4000 {
        let len = 1 + (at % 3000);
        let data: Vec<u8> = (at..at + len).map(byte).collect();
        assert!(s.write(at, &data));
        at += len;
        end.store(at, std::sync::atomic::Ordering::Release);
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    flusher.join().unwrap();
    reader.join().unwrap();
    stage.flush(9).unwrap();
    let want: Vec<u8> = (0..at).map(byte).collect();
    assert_eq!(on_disk(&s.files, 0, at as usize), want);
}

#[test]
fn a_segment_with_a_stage_writes_reads_and_syncs_through_it() {
    let d = tempfile::tempdir().unwrap();
    let env = FsEnv::with_stage(1 << 20);
    let path = d.path().join("seg");
    let seg = env.create_segment(&path, CAP).unwrap();
    let a = pattern(1, 3000);
    seg.write_vectored_at(10, &[&a[..1000], &a[1000..]])
        .unwrap();
    assert_eq!(seg.read_vec(10, 3000).unwrap(), a);
    let mut buf = vec![0u8; 3000];
    seg.read_at(10, &mut buf).unwrap();
    assert_eq!(buf, a);
    // Zeros ahead, as the zero-ahead thread writes them: from the next whole page on.
    seg.zero_fill(4096, 10_000).unwrap();
    seg.sync_range(10, 3000).unwrap();
    let on_file = std::fs::read(&path).unwrap();
    assert_eq!(on_file[10..3010], a);
    let stage = env.stage.as_ref().unwrap();
    assert!(stage.written_bytes() >= 4096);
    // Out of range: an error, nothing written.
    assert!(seg.write_at(CAP - 10, &[1; 20]).is_err());
    drop(seg);
    // The dropped segment gave the ring up; a new one takes it.
    let seg = env.open_segment(&path).unwrap();
    seg.write_at(3010, &[9; 10]).unwrap();
    seg.sync_range(3010, 10).unwrap();
    assert_eq!(std::fs::read(&path).unwrap()[3010..3020], [9; 10]);
    assert_eq!(std::fs::read(&path).unwrap()[10..3010], a);
}

#[test]
fn the_streaming_copy_copies_every_byte_at_any_alignment() {
    let src = pattern(3, 70_000);
    for n in [0, 1, 4095, 4096, 4097, 5000, 8191, 65_549] {
        for skew in [0, 1, 7, 15, 16, 63] {
            let mut dst = vec![0xEEu8; n + 128];
            // SAFETY: both ranges are inside their vectors and do not overlap.
            unsafe { stream_copy(src[skew..].as_ptr(), dst[skew + 1..].as_mut_ptr(), n) };
            assert!(
                dst[skew + 1..skew + 1 + n] == src[skew..skew + n],
                "{n} at {skew}"
            );
            assert!(
                dst[..skew + 1].iter().all(|b| *b == 0xEE),
                "{n} at {skew}: before"
            );
            assert!(
                dst[skew + 1 + n..].iter().all(|b| *b == 0xEE),
                "{n} at {skew}: after"
            );
        }
    }
}
