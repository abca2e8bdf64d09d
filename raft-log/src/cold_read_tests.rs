use std::path::Path;

use super::*;
use crate::env::Env;
use crate::fs_env::FsEnv;
use crate::mem_env::MemEnv;

const SEG: u64 = (SLOTS as u64 + 2) * CHUNK as u64;

/// A segment at physical `SEG` holding byte `i % 251` at offset `i`.
fn patterned(env: &dyn Env, path: &Path) -> Arc<dyn SegmentFile> {
    let seg = env.create_segment(path, SEG).unwrap();
    let bytes: Vec<u8> = (0..SEG).map(|i| (i % 251) as u8).collect();
    seg.write_at(0, &bytes).unwrap();
    seg.sync_range(0, SEG).unwrap();
    seg
}

/// [`patterned`] in memory.
fn mem_segment() -> Arc<dyn SegmentFile> {
    patterned(&MemEnv::new(), Path::new("/seg"))
}

fn expected(phys: RawPhys, len: usize) -> Vec<u8> {
    (phys - SEG..phys - SEG + len as u64)
        .map(|i| (i % 251) as u8)
        .collect()
}

fn at(limit: RawPhys, epoch: u64) -> ColdAt {
    ColdAt {
        segment_start: SEG,
        limit,
        epoch,
    }
}

#[test]
fn reads_return_the_files_bytes_also_across_chunks() {
    let seg = mem_segment();
    let cold = ColdReads::default();
    let a = at(2 * SEG, 1);
    for (phys, len) in [
        (SEG, 1000),
        (SEG + 5000, 1100),
        (SEG + CHUNK as u64 - 100, 300),
        (SEG + 3 * CHUNK as u64 - 7, 2 * CHUNK + 20),
        (2 * SEG - 10, 10),
    ] {
        assert_eq!(cold.read(&seg, a, phys, len), Some(expected(phys, len)));
    }
}

#[test]
fn a_read_outside_the_cold_range_is_left_to_the_mapping() {
    let seg = mem_segment();
    let cold = ColdReads::default();
    let limit = SEG + CHUNK as u64;
    assert_eq!(cold.read(&seg, at(limit, 1), limit - 10, 11), None);
    assert_eq!(cold.read(&seg, at(limit, 1), SEG - 1, 10), None);
    assert_eq!(cold.read(&seg, at(limit, 1), u64::MAX - 3, 10), None);
}

#[test]
fn chunks_are_kept_until_the_epoch_changes() {
    let seg = mem_segment();
    let cold = ColdReads::without_read_ahead();
    assert_eq!(
        cold.read(&seg, at(2 * SEG, 1), SEG, 4),
        Some(expected(SEG, 4))
    );
    // The file changes under the chunk (as a truncation and new appends would): the same
    // epoch still reads the chunk, a new epoch reads the file again.
    seg.write_at(0, &[9, 9, 9, 9]).unwrap();
    assert_eq!(
        cold.read(&seg, at(2 * SEG, 1), SEG, 4),
        Some(expected(SEG, 4))
    );
    assert_eq!(cold.read(&seg, at(2 * SEG, 2), SEG, 4), Some(vec![9; 4]));
    // A reader of the older epoch (it raced the change) is left to the mapping.
    assert_eq!(cold.read(&seg, at(2 * SEG, 1), SEG, 4), None);
    assert_eq!(cold.chunks.lock().slots.len(), 1, "one chunk kept");
}

#[test]
fn at_most_slots_buffers_are_kept_and_the_least_recently_used_goes() {
    let seg = mem_segment();
    let cold = ColdReads::without_read_ahead();
    let a = at(2 * SEG, 1);
    let chunk = |i: u64| SEG + i * CHUNK as u64;
    for i in 0..SLOTS as u64 {
        assert!(cold.read(&seg, a, chunk(i), 8).is_some());
    }
    assert_eq!(cold.chunks.lock().slots.len(), SLOTS);
    // Chunk 0 used again, then one more: it takes chunk 1's buffer.
    assert!(cold.read(&seg, a, chunk(0) + 8, 8).is_some());
    seg.write_at(0, &[1; 8]).unwrap();
    seg.write_at(CHUNK as u64, &[1; 8]).unwrap();
    let last = chunk(SLOTS as u64);
    assert_eq!(cold.read(&seg, a, last, 8), Some(expected(last, 8)));
    let c = cold.chunks.lock();
    assert_eq!(c.slots.len(), SLOTS);
    assert!(
        c.slots.iter().any(|k| k.start == chunk(0)),
        "recently used kept"
    );
    assert!(
        !c.slots.iter().any(|k| k.start == chunk(1)),
        "least recently used gone"
    );
    drop(c);
    assert_eq!(cold.read(&seg, a, chunk(0), 8), Some(expected(chunk(0), 8)));
    assert_eq!(
        cold.read(&seg, a, chunk(1), 8),
        Some(vec![1; 8]),
        "read again"
    );
}

#[test]
fn a_real_file_reads_around_the_page_cache_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let seg = patterned(&FsEnv::default(), &dir.path().join("seg"));
    let cold = ColdReads::default();
    let a = at(2 * SEG, 1);
    for (phys, len) in [(SEG + 123, 1100), (SEG + CHUNK as u64 - 1, 2)] {
        assert_eq!(cold.read(&seg, a, phys, len), Some(expected(phys, len)));
    }
    // Unaligned asks are served by a copy, not refused.
    let mut buf = vec![0u8; 10];
    assert_eq!(seg.read_uncached(3, &mut buf).unwrap(), 10);
    assert_eq!(buf, expected(SEG + 3, 10));
    // At the file's end the read is short.
    let mut buf = HugeBuf::new(CHUNK).unwrap();
    let n = seg.read_uncached(SEG - ALIGN as u64, &mut buf[..]).unwrap();
    assert_eq!(n, ALIGN);
}

#[test]
fn the_first_use_of_a_chunk_has_the_next_one_read_ahead() {
    let seg = mem_segment();
    let cold = ColdReads::default();
    let a = at(SEG + 2 * CHUNK as u64, 1);
    assert_eq!(
        cold.read(&seg, a, SEG + 10, 10),
        Some(expected(SEG + 10, 10))
    );
    let next = SEG + CHUNK as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cached(&cold.chunks, 1, next) {
        assert!(
            std::time::Instant::now() < deadline,
            "chunk 1 never read ahead"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Its bytes are the file's; the chunk after it is past the limit: never asked for.
    assert_eq!(cold.read(&seg, a, next + 5, 5), Some(expected(next + 5, 5)));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(!cached(&cold.chunks, 1, next + CHUNK as u64));
    assert_eq!(cold.chunks.lock().slots.len(), 2);
}

#[test]
fn a_chunk_read_before_the_dropped_end_passed_it_is_read_once_more() {
    let seg = mem_segment();
    let cold = ColdReads::without_read_ahead();
    let short = at(SEG + 4096, 1);
    assert_eq!(cold.read(&seg, short, SEG, 8), Some(expected(SEG, 8)));
    // The dropped end moved on: a read past the chunk's old end reads it again, once.
    let longer = at(SEG + CHUNK as u64, 1);
    let past = SEG + 10_000;
    assert_eq!(cold.read(&seg, longer, past, 8), Some(expected(past, 8)));
    assert_eq!(
        cold.read(&seg, longer, past + 8, 8),
        Some(expected(past + 8, 8))
    );
    assert_eq!(cold.chunk_reads(), 2);
    let c = cold.chunks.lock();
    assert_eq!(c.slots.len(), 1);
}
