//! [`Ring`]: memory aligned for `O_DIRECT`, addressed by file offset modulo its length, that
//! the write stage (`stage.rs`) copies appends into and writes out from (the process's own
//! memory, or a shared mapping of the stage file, `stage_file.rs`); and the copy with
//! streaming stores it fills it with.

use std::fs::File;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use memmap2::MmapRaw;

use crate::cold_read::ALIGN;
use crate::huge::HugeBuf;
use crate::vectored::write_all_iovecs;

/// Alignment and unit of a write-out: the `O_DIRECT` alignment the cold reads use too.
pub(crate) const BLOCK: u64 = ALIGN as u64;

/// Memory of `len` bytes aligned to [`BLOCK`], read and written through raw pointers.
pub(crate) struct Ring {
    ptr: NonNull<u8>,
    len: usize,
    /// What holds the memory.
    _backing: Backing,
}

/// Where a [`Ring`]'s memory comes from (kept alive, never read through: `ptr` is).
enum Backing {
    /// A mapping of its own (`huge.rs`: huge pages for a stage's ring in the process's
    /// memory, ordinary ones for the write-out's block).
    Own { _buf: HugeBuf },
    /// A mapping of the stage file.
    Map { _map: Arc<MmapRaw> },
}

// SAFETY: the ring is plain memory; who touches which bytes when is its owner's protocol
// (module docs), enforced by its locks.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// A ring of `len` (> 0) zeroed bytes in memory of its own (`huge.rs`: huge pages from
    /// [`HUGE_PAGE`](crate::huge::HUGE_PAGE) on).
    pub(crate) fn new(len: usize) -> io::Result<Ring> {
        let buf = HugeBuf::new(len)?;
        Ok(Ring {
            ptr: buf.as_ptr(),
            len,
            _backing: Backing::Own { _buf: buf },
        })
    }

    /// The `len` bytes at `offset` of `map` (a multiple of [`BLOCK`]), which the ring keeps.
    pub(crate) fn in_map(map: Arc<MmapRaw>, offset: usize, len: usize) -> io::Result<Ring> {
        if offset % BLOCK as usize != 0 || offset.checked_add(len) != Some(map.len()) {
            return Err(io::Error::other(format!(
                "write stage: a ring of {len} bytes at {offset} does not end a mapping of {}",
                map.len()
            )));
        }
        // SAFETY: offset < map.len() (checked above, len > 0 by the stage), so inside the
        // mapping, which the ring keeps alive.
        let ptr = unsafe { map.as_mut_ptr().add(offset) };
        NonNull::new(ptr)
            .map(|ptr| Ring {
                ptr,
                len,
                _backing: Backing::Map { _map: map },
            })
            .ok_or_else(|| io::Error::other("write stage: null mapping"))
    }

    /// All of the memory, for its only user.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the ring's `len` bytes, and `&mut self` excludes every other use.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The ring's two pieces (the second empty unless it wraps) of file bytes `[at, at+len)`,
    /// as (slot, length); `len` is at most the ring's length.
    fn pieces(&self, at: u64, len: usize) -> [(usize, usize); 2] {
        let slot = (at % self.len as u64) as usize;
        let first = len.min(self.len - slot);
        [(slot, first), (0, len - first)]
    }

    /// Copies `data` into the slots of `[at, at + data.len())`.
    ///
    /// # Safety
    /// No one else reads or writes those slots meanwhile.
    pub(crate) unsafe fn copy_in(&self, at: u64, data: &[u8]) {
        let mut done = 0;
        for (slot, n) in self.pieces(at, data.len()) {
            // SAFETY: slot + n <= len (pieces), and the caller owns the slots.
            unsafe { stream_copy(data.as_ptr().add(done), self.ptr.as_ptr().add(slot), n) };
            done += n;
        }
    }

    /// Copies the slots of `[at, at + buf.len())` into `buf`.
    ///
    /// # Safety
    /// No one writes those slots meanwhile.
    pub(crate) unsafe fn copy_out(&self, at: u64, buf: &mut [u8]) {
        let mut done = 0;
        for (slot, n) in self.pieces(at, buf.len()) {
            // SAFETY: slot + n <= len (pieces); no writer, per the caller.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr().add(slot),
                    buf.as_mut_ptr().add(done),
                    n,
                )
            };
            done += n;
        }
    }

    /// The iovecs of the slots of `[at, at + len)`, for the kernel to read.
    pub(crate) fn iovecs(&self, at: u64, len: usize) -> impl Iterator<Item = libc::iovec> + '_ {
        self.pieces(at, len)
            .into_iter()
            .filter(|p| p.1 > 0)
            .map(|(slot, n)| libc::iovec {
                // SAFETY: slot < len: inside the allocation.
                iov_base: unsafe { self.ptr.as_ptr().add(slot) }.cast(),
                iov_len: n,
            })
    }

    /// Writes the file bytes `[start, high)` the ring holds (`start` a multiple of [`BLOCK`])
    /// to `start` of the file with one vectored write: the whole blocks straight from the
    /// ring, `high`'s block from `block` (taken on first use) padded with zeros, since the
    /// bytes after `high` may be the next append being copied. Through `direct` (`O_DIRECT`),
    /// or `plain` where the file system refuses that write. Returns the bytes written.
    ///
    /// # Safety
    /// No one writes the slots of `[start, high)` meanwhile.
    pub(crate) unsafe fn write_blocks(
        &self,
        block: &mut Option<Ring>,
        direct: &File,
        plain: &File,
        start: u64,
        high: u64,
    ) -> io::Result<u64> {
        let full = high / BLOCK * BLOCK;
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(3);
        if full > start {
            iov.extend(self.iovecs(start, (full - start) as usize));
        }
        if high > full {
            if block.is_none() {
                *block = Some(Ring::new(BLOCK as usize)?);
            }
            let Some(b) = block.as_mut() else {
                return Err(io::Error::other("write stage block"));
            };
            let tail = b.bytes_mut();
            let n = (high - full) as usize;
            // SAFETY: [full, high) lies in [start, high), which no one writes (the caller).
            unsafe { self.copy_out(full, &mut tail[..n]) };
            tail[n..].fill(0);
            iov.extend(b.iovecs(0, BLOCK as usize));
        }
        // SAFETY (both calls): the iovecs point into the ring, or into `block`, which this
        // call holds; neither is freed meanwhile, and the kernel only reads them.
        match unsafe { write_all_iovecs(direct, start, &mut iov.clone()) } {
            // A file system that opens with O_DIRECT but refuses this write: the same bytes
            // through the page cache (the fdatasync after covers them either way).
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::debug!(error = %e, "direct write refused; writing through the page cache");
                unsafe { write_all_iovecs(plain, start, &mut iov) }
            }
            r => r,
        }
    }
}

/// Copies below this many bytes go through the cache as usual.
const STREAM_MIN: usize = 4096;

/// `copy_nonoverlapping` of `n` bytes, with non-temporal stores (around the CPU's caches) on
/// x86-64 from [`STREAM_MIN`] bytes on. What the ring holds is next read by the disk's DMA
/// (the write-out), not by the CPU: filling cache lines for it first (a read for ownership
/// per line, and the lines evicted later) made the copy 9% of a follower's samples at
/// batch-32 (BENCHMARKS, thirty-first sitting).
///
/// # Safety
/// As `copy_nonoverlapping`: `src` readable and `dst` writable for `n` bytes, not overlapping.
pub(crate) unsafe fn stream_copy(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n >= STREAM_MIN {
        use std::arch::x86_64::__m128i;
        use std::arch::x86_64::_mm_loadu_si128;
        use std::arch::x86_64::_mm_sfence;
        use std::arch::x86_64::_mm_stream_si128;
        let head = dst.align_offset(16).min(n);
        // SAFETY: the caller's contract; `head <= n`.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let mut i = head;
        while i + 64 <= n {
            // SAFETY: [i, i + 64) lies within both ranges; `dst + i` is 16-byte aligned (i
            // starts at the aligning offset and grows by 64); unaligned loads are allowed.
            // SSE2 is part of x86-64.
            unsafe {
                let s = src.add(i) as *const __m128i;
                let d = dst.add(i) as *mut __m128i;
                let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
                let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            }
            i += 64;
        }
        // SAFETY: the rest of both ranges. The fence orders the streamed stores before every
        // later store (the lock release that publishes them).
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), n - i);
            _mm_sfence();
        }
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}
