//! Simulated power loss and on-disk damage of a stopped node's CommitLog.
//!
//! A power loss keeps what was fsynced and nothing else: [`cut_to_flushed`] zeroes every
//! CommitLog byte at or past the node's last flushed physical position (segments are
//! preallocated with zeros, so zero = never written), except the first `torn_bytes` bytes
//! there, which keep their content: a record whose write was torn by the power cut. An `async`
//! node's write stage file goes too: after a real power loss it is from an earlier boot, which
//! the node does not replay (raft-log's `stage_file.rs`).
//! [`flip_bit`] damages one byte of flushed data.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;

/// Segments of `data_dir/commitlog`: `(start phys offset, path)`, by start.
pub fn segments(data_dir: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(data_dir.join("commitlog"))? {
        let e = e?;
        let name = e.file_name();
        if let Some(start) = name.to_str().and_then(|n| n.parse::<u64>().ok()) {
            out.push((start, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// What a power cut discarded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerCut {
    /// The flushed end the log was cut back to.
    pub flushed_end: u64,
    /// Non-zero bytes zeroed (unflushed data lost).
    pub lost_bytes: u64,
    /// Bytes left as a torn partial record past `flushed_end`.
    pub torn_bytes: u64,
}

/// Cuts the CommitLog of the stopped node at `data_dir` back to `flushed_end`, keeping
/// `torn_bytes` bytes of the first unflushed record (if there was one) as a torn write.
pub fn cut_to_flushed(
    data_dir: &Path,
    flushed_end: u64,
    torn_bytes: u64,
) -> anyhow::Result<PowerCut> {
    let mut cut = PowerCut {
        flushed_end,
        ..PowerCut::default()
    };
    for (start, path) in segments(data_dir)? {
        let f = OpenOptions::new().read(true).write(true).open(&path)?;
        let len = f.metadata()?.len();
        if start + len <= flushed_end {
            continue;
        }
        let mut from = flushed_end.saturating_sub(start);
        let mut buf = vec![0u8; (len - from) as usize];
        f.read_exact_at(&mut buf, from)?;
        if start <= flushed_end && buf.iter().any(|&b| b != 0) && torn_bytes > 0 {
            let keep = torn_bytes.min(buf.len() as u64);
            cut.torn_bytes = keep;
            buf.drain(..keep as usize);
            from += keep;
        }
        cut.lost_bytes += buf.iter().filter(|&&b| b != 0).count() as u64;
        let zeros = vec![0u8; buf.len()];
        f.write_all_at(&zeros, from)?;
        f.sync_all()?;
    }
    match std::fs::remove_file(data_dir.join(raftmq_raft_log::stage_file::STAGE_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    Ok(cut)
}

/// Flips one bit of the CommitLog byte at physical offset `phys` of the stopped node.
pub fn flip_bit(data_dir: &Path, phys: u64) -> anyhow::Result<()> {
    let segs = segments(data_dir)?;
    let (start, path) = segs
        .iter()
        .rev()
        .find(|(s, _)| *s <= phys)
        .ok_or_else(|| anyhow::anyhow!("no segment holds phys {phys}"))?;
    let f = OpenOptions::new().read(true).write(true).open(path)?;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, phys - start)?;
    b[0] ^= 0x10;
    f.write_all_at(&b, phys - start)?;
    f.sync_all()?;
    Ok(())
}
