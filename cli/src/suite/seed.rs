//! `bench suite --written-segments N`: each node's pool of free segments (`recycle-segments`)
//! seeded with N segment files written through once, before the node first starts, so a case
//! runs as on nodes past their first retention.
//!
//! A fresh node appends into preallocated blocks written for the first time, and every such
//! fdatasync also writes the file system's extent metadata (on a VM, over blocks the host
//! allocates then); a node that has run through its retention takes its next segments from
//! the pool instead, whose blocks were all written before (the README's `recycle-segments`).
//! The log adopts any `*.free` file of its `commitlog/` directory at open, and every segment
//! after its first comes from that pool while it holds one of the right size. The first is
//! always new (a reused file's old records are told from the new life's by the offsets they
//! name, which lie below any later segment's but could equal the first one's), so a small
//! `--segment-bytes` makes nearly all of a case's appends go to written blocks. Issue 14's
//! targets are measured on fresh nodes (the default, 0); this shows the other state.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::Context;

/// Bytes of one write of a seed.
const WRITE_BYTES: usize = 1 << 20;

/// Writes `count` zero-filled files of `segment_bytes` each, named `seed-<i>.free`, into
/// `<node_dir>/data/commitlog/` (created if missing), each fdatasynced, then fsyncs the
/// directory.
pub fn seed_free_segments(node_dir: &Path, count: u32, segment_bytes: u64) -> anyhow::Result<()> {
    let dir = node_dir.join("data").join("commitlog");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let zeros = vec![0u8; WRITE_BYTES];
    for i in 1..=count {
        let path = dir.join(format!("seed-{i}.free"));
        let f = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut at = 0u64;
        while at < segment_bytes {
            let n = (segment_bytes - at).min(WRITE_BYTES as u64) as usize;
            f.write_all_at(&zeros[..n], at)
                .with_context(|| format!("cannot write {}", path.display()))?;
            at += n as u64;
        }
        f.sync_data()
            .with_context(|| format!("cannot fdatasync {}", path.display()))?;
    }
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot fsync {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_whole_segments_in_the_commitlog_directory() {
        let dir = tempfile::tempdir().unwrap();
        seed_free_segments(dir.path(), 2, (3 << 20) + 4096).unwrap();
        let commitlog = dir.path().join("data/commitlog");
        let mut names: Vec<String> = std::fs::read_dir(&commitlog)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["seed-1.free", "seed-2.free"]);
        for n in names {
            let len = std::fs::metadata(commitlog.join(n)).unwrap().len();
            assert_eq!(len, (3 << 20) + 4096);
        }
    }

    #[test]
    fn an_unwritable_place_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let err = seed_free_segments(&file, 1, 4096).unwrap_err();
        assert!(err.to_string().contains("cannot create"), "{err}");
    }
}
