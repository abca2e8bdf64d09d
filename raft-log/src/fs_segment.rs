//! `MmapSegment`: the real [`SegmentFile`], a preallocated file read through a shared
//! mapping and written with pwrite (or stores into the mapping), with the page-cache calls
//! of the log (writeback, drops) and its `O_DIRECT` cold reads ([`crate::cold_read`]); with a
//! write stage ([`crate::stage`]) its appends are copied into memory and written around the
//! page cache instead. Created and opened by [`crate::fs_env::FsEnv`].

use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;

use memmap2::MmapOptions;
use memmap2::MmapRaw;

use crate::cold_read::ALIGN;
use crate::env::copy_uncached;
use crate::env::write_each;
use crate::env::SegmentFile;
use crate::env::PAGE_BYTES;
use crate::env::ZEROS;
use crate::stage::Files;
use crate::stage::Stage;
use crate::stage_file::FileId;

/// A segment file, always read through a shared mapping and written with pwrite (unless
/// [`FsEnv::mapped_writes`]), from measurements on the dev VM (ext4, 2 cores):
///
/// - `sync`: a first store through a mapping after writeback goes through `page_mkwrite`,
///   which journals an mtime update, so every flush then commits the journal: 1 KiB store +
///   msync ≈ 1,200/s against pwrite + fdatasync ≈ 5,000/s.
/// - `async`: a store into a fresh page of a preallocated file costs a read fault that
///   zero-fills the page and a write fault (`page_mkwrite`); prefaulting the mapping
///   (MAP_POPULATE) only moves that cost to another thread, and makes every *pwrite* into the
///   populated pages ≈ 3x slower. pwrite of whole batches into unmapped-so-far pages is the
///   cheapest: 1 KiB x 64 appenders reached 72% of raw page-cache write bandwidth against
///   36% for stores into the mapping (`cargo bench -p raftmq-raft-log`).
///
/// Linux's unified page cache makes pwritten bytes visible to the mapping at once.
///
/// With a write stage ([`FsEnv::with_stage`], which `LogStore::open` uses; never with mapped
/// writes nor where `O_DIRECT` is refused), writes go to the stage and reads
/// of what it holds come from it (`stage.rs`).
struct MmapSegment {
    map: MmapRaw,
    len: u64,
    file: Arc<File>,
    mapped_writes: bool,
    /// The `O_DIRECT` descriptor of cold reads (`None`: refused), opened on first use.
    direct: OnceLock<Option<Arc<File>>>,
    /// The log's write stage and this segment's descriptors for it.
    stage: Option<(Arc<Stage>, Files)>,
    /// This segment's name in the stage.
    id: u64,
    /// Reused from an earlier segment: every block written before (`recycle.rs`).
    recycled: bool,
}

/// Ids of segments in their stage.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn out_of_range(offset: u64, len: usize, cap: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("range {offset}+{len} outside segment of {cap} bytes"),
    )
}

fn check_range(offset: u64, len: usize, cap: u64) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= cap => Ok(()),
        _ => Err(out_of_range(offset, len, cap)),
    }
}

impl SegmentFile for MmapSegment {
    fn capacity(&self) -> u64 {
        self.len
    }

    fn blocks_written(&self) -> bool {
        self.recycled
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(offset, data.len(), self.len)?;
        if self.staged(offset, &[data])? {
            return Ok(());
        }
        if !self.mapped_writes {
            return std::os::unix::fs::FileExt::write_all_at(&*self.file, data, offset);
        }
        // SAFETY: the range is inside the mapping (checked above), the file is preallocated
        // (no SIGBUS on a full disk) and, by the trait's contract, no other thread reads or
        // writes this range concurrently.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.as_mut_ptr().add(offset as usize),
                data.len(),
            )
        };
        Ok(())
    }

    fn write_vectored_at(&self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        if self.mapped_writes {
            return write_each(self, offset, parts);
        }
        check_range(offset, parts.iter().map(|p| p.len()).sum(), self.len)?;
        if self.staged(offset, parts)? {
            return Ok(());
        }
        crate::vectored::write_all_vectored_at(&self.file, offset, parts)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match &self.stage {
            Some((stage, _)) => stage.read(self.id, offset, buf, &|o, b| self.map_read(o, b)),
            None => self.map_read(offset, buf),
        }
    }

    fn read_vec(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        check_range(offset, len, self.len)?;
        if let Some((stage, _)) = &self.stage {
            if stage.holds(self.id, offset, len) {
                let mut buf = vec![0u8; len];
                self.read_at(offset, &mut buf)?;
                return Ok(buf);
            }
        }
        // SAFETY: as in `map_read`: the range is inside the mapping and below the published
        // append position, so the pages exist and no writer touches them.
        let src =
            unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(offset as usize), len) };
        Ok(src.to_vec())
    }

    fn sync_range(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if let Some((stage, _)) = &self.stage {
            stage.flush(self.id)?;
        }
        if self.mapped_writes {
            return self.map.flush_range(offset as usize, len as usize);
        }
        // fdatasync writes only this file's dirty pages: the range is implied.
        self.file.sync_data()
    }

    /// pwrite of the zeros (whatever the write mode: the page cache is shared with the
    /// mapping), then `sync_file_range` waiting for their writeback, so the log's next
    /// fdatasync does not find them dirty.
    fn zero_fill(&self, offset: u64, len: u64) -> io::Result<()> {
        let n = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "zero range"))?;
        check_range(offset, n, self.len)?;
        let mut parts = Vec::with_capacity(n.div_ceil(ZEROS.len()));
        let mut left = n;
        while left > 0 {
            let k = left.min(ZEROS.len());
            parts.push(&ZEROS[..k]);
            left -= k;
        }
        crate::vectored::write_all_vectored_at(&self.file, offset, &parts)?;
        self.sync_file_range(
            offset,
            len,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
    }

    /// `sync_file_range` with only SYNC_FILE_RANGE_WRITE: queues the range's dirty pages;
    /// with a stage, its bytes written out (no wait for the device's cache).
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        if let Some((stage, _)) = &self.stage {
            return stage.flush(self.id);
        }
        self.sync_file_range(offset, len, libc::SYNC_FILE_RANGE_WRITE)
    }

    /// `madvise(DONTNEED)` of the range's whole pages in this segment's mapping, then
    /// `posix_fadvise(DONTNEED)`: the kernel frees clean pages that no process maps, and
    /// every page a reader copied out of the mapping stays mapped (so cached) until unmapped.
    /// With mapped writes nothing is asked (the writer's own stores map every page).
    fn drop_cache(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.mapped_writes || len == 0 {
            return Ok(());
        }
        let (off, n) = self.os_range(offset, len, "cache drop range")?;
        let start = offset.next_multiple_of(PAGE_BYTES);
        let end = (offset + len) / PAGE_BYTES * PAGE_BYTES;
        if start < end {
            // SAFETY: a shared mapping of a file: MADV_DONTNEED only unmaps the pages from
            // this process, and the next access maps them again from the file (the page
            // cache, else the disk) with the same bytes, so a reader copying from the range
            // meanwhile reads what it would have. The range is inside the mapping (checked
            // above) and page-aligned.
            unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start as usize,
                    (end - start) as usize,
                )
            }?;
        }
        // SAFETY: posix_fadvise(2) on a descriptor this segment owns; no memory is passed.
        let rc = unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), off, n, libc::POSIX_FADV_DONTNEED)
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// `pread` through a second descriptor of the file opened with `O_DIRECT` (on first use),
    /// so the bytes go from the disk straight into `buf`; a copy from the mapping where the
    /// file system refuses `O_DIRECT` (tmpfs), or with mapped writes (nothing is dropped).
    fn read_uncached(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let aligned = offset % ALIGN as u64 == 0
            && buf.len() % ALIGN == 0
            && (buf.as_ptr() as usize) % ALIGN == 0;
        let direct = match self.direct.get_or_init(|| open_direct(&self.file, false)) {
            Some(f) if aligned && !self.mapped_writes => f,
            _ => return copy_uncached(self, offset, buf),
        };
        let mut done = 0;
        while done < buf.len() {
            match direct.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A file system that opens with O_DIRECT but refuses this read.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && done == 0 => {
                    return copy_uncached(self, offset, buf)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

impl MmapSegment {
    /// Copies the `buf.len()` bytes at `offset` from the mapping into `buf`.
    fn map_read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(offset, buf.len(), self.len)?;
        // SAFETY: the range is inside the mapping (checked above) and the file is never
        // shortened while mapped, so the pages exist; concurrent writers only touch ranges
        // above the log's published append position, which readers do not read.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.map.as_ptr().add(offset as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Ok(())
    }

    /// Writes `parts` at `offset` (checked) into the stage; `false`: there is none, or it
    /// gave the write back, for the page cache.
    fn staged(&self, offset: u64, parts: &[&[u8]]) -> io::Result<bool> {
        let Some((stage, files)) = &self.stage else {
            return Ok(false);
        };
        stage.write(self.id, files, offset, parts, &|o, b| self.map_read(o, b))
    }

    /// `[offset, offset + len)` checked to lie inside the segment, as the (offset, length)
    /// pair of a system call; `what` names the range in the error.
    fn os_range(
        &self,
        offset: u64,
        len: u64,
        what: &str,
    ) -> io::Result<(libc::off_t, libc::off_t)> {
        let too_big = |_| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
        check_range(offset, usize::try_from(len).map_err(too_big)?, self.len)?;
        Ok((
            libc::off_t::try_from(offset).map_err(too_big)?,
            libc::off_t::try_from(len).map_err(too_big)?,
        ))
    }

    fn sync_file_range(&self, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (off, n) = self.os_range(offset, len, "writeback range")?;
        // SAFETY: sync_file_range(2) on a descriptor this segment owns; no memory is passed.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, flags) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The file again, opened with `O_DIRECT` (through `/proc/self/fd`, so a rename since does
/// not matter), for reading (and writing, with `write`); `None` where that is refused.
fn open_direct(file: &File, write: bool) -> Option<Arc<File>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => Some(Arc::new(f)),
        Err(e) => {
            tracing::debug!(error = %e, write, "no O_DIRECT here; using the page cache");
            None
        }
    }
}

impl Drop for MmapSegment {
    fn drop(&mut self) {
        if let Some((stage, _)) = &self.stage {
            stage.forget(self.id);
        }
    }
}

/// Maps `file` as a segment (`populate`: prefault the mapping, for mapped writes), written
/// through `stage` where there is one, writes are not mapped and `O_DIRECT` is allowed;
/// `recycled`: a segment reused from an earlier one ([`SegmentFile::blocks_written`]).
pub(crate) fn map_segment(
    file: File,
    populate: bool,
    mapped_writes: bool,
    stage: Option<&Arc<Stage>>,
    recycled: bool,
) -> io::Result<Arc<dyn SegmentFile>> {
    let len = file.metadata()?.len();
    let mut opts = MmapOptions::new();
    if populate {
        opts.populate();
    }
    let map = opts.map_raw(&file)?;
    // Readers go through the log in order (a consumer, a follower catching up), and the
    // pages older than `log-cache-bytes` come from the disk: sequential readahead for the
    // mapping's faults instead of read-around. Measured (twentieth sitting): a follower's
    // pull from the disk at 200-209k msg/s without, 287-292k with (326-345k from the cache).
    if let Err(e) = map.advise(memmap2::Advice::Sequential) {
        tracing::debug!(error = %e, "madvise(SEQUENTIAL) of a segment failed");
    }
    let id = FileId::of(&file)?;
    let file = Arc::new(file);
    let direct = OnceLock::new();
    let stage = match stage {
        Some(stage) if !mapped_writes => open_direct(&file, true).map(|d| {
            let _ = direct.set(Some(d.clone()));
            let files = Files {
                direct: d,
                plain: file.clone(),
                id,
            };
            (stage.clone(), files)
        }),
        _ => None,
    };
    Ok(Arc::new(MmapSegment {
        map,
        len,
        file,
        mapped_writes,
        direct,
        stage,
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        recycled,
    }))
}
