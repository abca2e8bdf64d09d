//! The disk's own limits, measured in the directory the cluster runs in: latency and rate of
//! 1 KiB write + fdatasync (what one group commit of one small send costs) and the bandwidth of
//! 1 MiB write + fdatasync (the ceiling of a batched load). The probe file is preallocated
//! (`fallocate`, then fsync) and written in place, as CommitLog segments are: appends that
//! grow a file make every fdatasync a journal commit too (about 10 times slower on ext4).
//! Like a node (`log-cache-bytes`), the bandwidth probe drops what it synced more than
//! [`LARGE_CACHE_BYTES`] behind from the page cache, so its writes land in pages the kernel
//! just freed rather than in new ones: the figure is the disk's, not the first touch of new
//! memory described next (on the dev VM the probe read 253-577 MiB/s without the drop,
//! depending on how much free memory the host had taken back, and 1,233-1,364 with it).
//!
//! And the first write of a block against a rewrite: 32 KiB writes (an entry of about 30 sends)
//! each followed by fdatasync, into new preallocated blocks and then again over the same blocks.
//! A block written for the first time makes its fdatasync write the file system's extent
//! metadata too, and on a VM the host may have to allocate its own block behind it: a node's
//! appends pay that until its segments have all been written once (or it appends into
//! recycled ones; see the README's "recycle-segments"). A fresh cluster, as the suite's cases
//! start, pays it for every append.
//!
//! It also measures the memory side of a write: how fast buffered writes fill new pages of
//! the page cache, against rewriting the same cached pages. Every byte a node appends lands
//! in a new page-cache page first. On a VM whose host takes freed guest memory back (free
//! page reporting, a balloon), the first touch of such a page is a fault in the host,
//! about 16 us per 4 KiB page on the dev VM: it was up to 31% of a follower's CPU samples
//! in one sitting and absent in the next, with the same binaries. A fill much slower than
//! the rewrite marks a run whose figures that cost depressed.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::Latencies;

/// Bytes of one small write.
const SMALL_BYTES: usize = 1024;
/// Bytes of one large write.
const LARGE_BYTES: usize = 1 << 20;
/// Each probe stops at this much data even with time left (disk space is shared).
const SMALL_MAX_BYTES: u64 = 64 << 20;
/// See [`SMALL_MAX_BYTES`].
const LARGE_MAX_BYTES: u64 = 512 << 20;
/// Page cache the bandwidth probe keeps behind its writes (see the module docs); the
/// smaller probe writes only 64 MiB and drops nothing.
const LARGE_CACHE_BYTES: u64 = 16 << 20;
/// Bytes of one write of the first-write probe: an entry of about 30 single sends.
const ENTRY_BYTES: usize = 32 << 10;
/// The first-write probe writes at most this much in each of its two passes.
const ENTRY_MAX_BYTES: u64 = 16 << 20;
/// Bytes of one write of the page-cache probe.
const FILL_CHUNK_BYTES: usize = 64 << 10;
/// Bytes the page-cache probe writes in each of its two passes (never synced: the file is
/// removed with its dirty pages, so the disk sees none of it).
const FILL_BYTES: u64 = 64 << 20;

/// What the disk does, measured by [`measure`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DiskFigures {
    /// Median of one 1 KiB append + fdatasync, microseconds.
    pub fdatasync_p50_us: u64,
    /// 99th percentile of the same, microseconds.
    pub fdatasync_p99_us: u64,
    /// 1 KiB appends + fdatasync per second, one after the other.
    pub small_syncs_per_s: f64,
    /// MiB per second of 1 MiB appends, each followed by fdatasync (the page cache kept to
    /// [`LARGE_CACHE_BYTES`] behind them, as a node keeps its log's).
    pub write_sync_mib_per_s: f64,
    /// Median of one 32 KiB write + fdatasync into blocks written for the first time (a
    /// preallocated file), microseconds.
    pub new_block_sync_p50_us: u64,
    /// Median of the same writes over the same blocks again, microseconds.
    pub written_block_sync_p50_us: u64,
    /// MiB per second of 64 KiB buffered writes into pages not yet in the page cache.
    pub page_cache_fill_mib_per_s: f64,
    /// MiB per second of the same writes again, into the now cached pages.
    pub page_cache_rewrite_mib_per_s: f64,
}

fn mib_per_s(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / f64::from(1u32 << 20) / took.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Writes [`FILL_BYTES`] into a new preallocated file twice (see the module docs) and removes
/// it; returns the MiB/s of the first pass (new pages) and of the second (cached pages).
fn page_cache_probe(path: &Path) -> anyhow::Result<(f64, f64)> {
    let f = open_probe(path, FILL_BYTES)?;
    let chunk = vec![b'p'; FILL_CHUNK_BYTES];
    let pass = || -> anyhow::Result<Duration> {
        let start = Instant::now();
        for i in 0..FILL_BYTES / FILL_CHUNK_BYTES as u64 {
            f.write_all_at(&chunk, i * FILL_CHUNK_BYTES as u64)
                .with_context(|| format!("page cache probe write to {}", path.display()))?;
        }
        Ok(start.elapsed())
    };
    let (fill, rewrite) = (pass()?, pass()?);
    drop(f);
    std::fs::remove_file(path)
        .with_context(|| format!("cannot remove page cache probe {}", path.display()))?;
    Ok((mib_per_s(FILL_BYTES, fill), mib_per_s(FILL_BYTES, rewrite)))
}

/// Writes [`ENTRY_BYTES`] + fdatasync at consecutive offsets of a new preallocated file for
/// half of `budget` (at most [`ENTRY_MAX_BYTES`]), drops its pages from the page cache, writes
/// the same offsets again, and removes the file; returns the median of each pass (see the
/// module docs). Both passes write into pages new to the page cache, so they differ by the
/// disk's blocks alone.
fn first_write_probe(path: &Path, budget: Duration) -> anyhow::Result<(u64, u64)> {
    let f = open_probe(path, ENTRY_MAX_BYTES)?;
    let chunk = vec![b'e'; ENTRY_BYTES];
    let max_ops = ENTRY_MAX_BYTES / ENTRY_BYTES as u64;
    let (mut new, mut written) = (Latencies::new(), Latencies::new());
    let start = Instant::now();
    let mut ops = 0u64;
    while ops < max_ops && (ops == 0 || start.elapsed() < budget / 2) {
        write_synced(&f, &chunk, ops, path, &mut new)?;
        ops += 1;
    }
    drop_cached(&f, 0, ops * ENTRY_BYTES as u64, path)?;
    for i in 0..ops {
        write_synced(&f, &chunk, i, path, &mut written)?;
    }
    drop(f);
    std::fs::remove_file(path)
        .with_context(|| format!("cannot remove disk probe {}", path.display()))?;
    Ok((new.summary().p50_us, written.summary().p50_us))
}

/// Writes `chunk` as the `i`-th chunk of `f`, fdatasyncs, and records how long both took.
fn write_synced(
    f: &File,
    chunk: &[u8],
    i: u64,
    path: &Path,
    lat: &mut Latencies,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    f.write_all_at(chunk, i * chunk.len() as u64)
        .with_context(|| format!("disk probe write to {}", path.display()))?;
    f.sync_data()
        .with_context(|| format!("disk probe fdatasync of {}", path.display()))?;
    lat.record(t0.elapsed());
    Ok(())
}

fn open_probe(path: &Path, capacity: u64) -> anyhow::Result<File> {
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot create disk probe {}", path.display()))?;
    let len = libc::off_t::try_from(capacity).context("disk probe size")?;
    // SAFETY: fallocate(2) on an open descriptor we own; no memory is passed.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) };
    if rc != 0 {
        // No fallocate here (e.g. some network file systems): zeros written instead.
        let zeros = vec![0u8; 1 << 20];
        let mut left = capacity;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(&zeros[..n])
                .with_context(|| format!("cannot preallocate disk probe {}", path.display()))?;
            left -= n as u64;
        }
    }
    f.sync_all()
        .with_context(|| format!("cannot fsync disk probe {}", path.display()))?;
    Ok(f)
}

/// Asks the kernel to drop `[from, to)` of `f` from the page cache (synced bytes: nothing is
/// lost, and the pages go back to the kernel's free lists).
fn drop_cached(f: &File, from: u64, to: u64, path: &Path) -> anyhow::Result<()> {
    let off = libc::off_t::try_from(from).context("disk probe offset")?;
    let len = libc::off_t::try_from(to - from).context("disk probe length")?;
    // SAFETY: posix_fadvise(2) on an open descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
    anyhow::ensure!(
        rc == 0,
        "posix_fadvise(DONTNEED) of disk probe {}: {}",
        path.display(),
        std::io::Error::from_raw_os_error(rc)
    );
    Ok(())
}

/// Writes `chunk` at the next offset of a preallocated file and fdatasyncs, until `budget`
/// passes or `max_bytes` were written; the latency of each write + fdatasync goes into the
/// returned recorder, with the time it all took. With `cache_bytes`, what lies more than that
/// behind the synced end is dropped from the page cache after each fdatasync (timed too: a
/// node pays it as well).
fn probe(
    path: &Path,
    chunk: &[u8],
    budget: Duration,
    max_bytes: u64,
    cache_bytes: Option<u64>,
) -> anyhow::Result<(Latencies, Duration)> {
    let f = open_probe(path, max_bytes)?;
    let mut lat = Latencies::new();
    let max_ops = max_bytes / chunk.len() as u64;
    let start = Instant::now();
    let mut ops = 0u64;
    let mut dropped = 0u64;
    while ops < max_ops && (ops == 0 || start.elapsed() < budget) {
        write_synced(&f, chunk, ops, path, &mut lat)?;
        ops += 1;
        let synced = ops * chunk.len() as u64;
        if let Some(behind) = cache_bytes.filter(|&b| synced > dropped + b) {
            drop_cached(&f, dropped, synced - behind, path)?;
            dropped = synced - behind;
        }
    }
    let took = start.elapsed();
    drop(f);
    std::fs::remove_file(path)
        .with_context(|| format!("cannot remove disk probe {}", path.display()))?;
    Ok((lat, took))
}

/// Measures the disk under `dir` (a probe file is written there and removed), spending about
/// `budget` on each of the two disk probes and at most as much on the first-write probe, then
/// the page cache (64 MiB twice, unsynced).
pub fn measure(dir: &Path, budget: Duration) -> anyhow::Result<DiskFigures> {
    let path = dir.join("disk-probe");
    let small = vec![b's'; SMALL_BYTES];
    let (lat, took) = probe(&path, &small, budget, SMALL_MAX_BYTES, None)?;
    let s = lat.summary();
    let large = vec![b'l'; LARGE_BYTES];
    let (big, big_took) = probe(
        &path,
        &large,
        budget,
        LARGE_MAX_BYTES,
        Some(LARGE_CACHE_BYTES),
    )?;
    let (new_block, written_block) = first_write_probe(&path, budget)?;
    let (fill, rewrite) = page_cache_probe(&path)?;
    Ok(DiskFigures {
        fdatasync_p50_us: s.p50_us,
        fdatasync_p99_us: s.p99_us,
        small_syncs_per_s: s.count as f64 / took.as_secs_f64().max(f64::MIN_POSITIVE),
        write_sync_mib_per_s: mib_per_s(big.count() * LARGE_BYTES as u64, big_took),
        new_block_sync_p50_us: new_block,
        written_block_sync_p50_us: written_block,
        page_cache_fill_mib_per_s: fill,
        page_cache_rewrite_mib_per_s: rewrite,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_real_directory_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let d = measure(dir.path(), Duration::from_millis(50)).unwrap();
        assert!(
            d.fdatasync_p50_us > 0 && d.fdatasync_p50_us <= d.fdatasync_p99_us,
            "{d:?}"
        );
        assert!(
            d.small_syncs_per_s > 0.0 && d.write_sync_mib_per_s > 0.0,
            "{d:?}"
        );
        assert!(
            d.page_cache_fill_mib_per_s > 0.0 && d.page_cache_rewrite_mib_per_s > 0.0,
            "{d:?}"
        );
        assert!(
            d.new_block_sync_p50_us > 0 && d.written_block_sync_p50_us > 0,
            "{d:?}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_first_write_probe_rewrites_what_it_wrote_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let (new, written) = first_write_probe(&path, Duration::from_millis(40)).unwrap();
        assert!(new > 0 && written > 0, "{new} {written}");
        assert!(!path.exists());
    }

    #[test]
    fn the_bandwidth_probe_with_a_cache_window_writes_every_chunk_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let chunk = vec![b'l'; 256 << 10];
        let (lat, _) = probe(
            &path,
            &chunk,
            Duration::from_secs(60),
            4 << 20,
            Some(1 << 20),
        )
        .unwrap();
        assert_eq!(lat.count(), 16);
        assert!(!path.exists());
    }

    #[test]
    fn a_missing_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = measure(&dir.path().join("gone"), Duration::from_millis(10)).unwrap_err();
        assert!(
            err.to_string().contains("cannot create disk probe"),
            "{err}"
        );
    }
}
