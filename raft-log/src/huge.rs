//! [`HugeBuf`]: zeroed anonymous memory aligned to [`HUGE_PAGE`] and advised for transparent
//! huge pages, for the big buffers the log hands to `O_DIRECT`: the write stage's ring
//! (`ring.rs`) and the cold reads' chunks (`cold_read.rs`); a small one (the write-out's block)
//! is a mapping of ordinary pages. And [`advise_huge`] for the stage
//! file's mapping, where the file system's large folios can map the ring's page cache in huge
//! pages too (ext4 since Linux 6.16: an `async` node's ring then pins as few pages).
//!
//! Why: an `O_DIRECT` write or read pins every page of its buffer for the I/O and unpins it
//! after. With 4 KiB pages a follower's 1 MiB write-out pinned 256 of them: at batches of 32 ×
//! 1 KiB, `bio_iov_iter_get_pages` (under it `gup_fast_fallback`) took 5.6% of a follower's
//! samples, and the copies into the ring missed the TLB once per page (BENCHMARKS, thirty-seventh
//! sitting). Over a huge page the pin is one per 2 MiB: 0.6%.
//!
//! The node turns transparent huge pages off for the process except where advised
//! (`node/src/main.rs`), so these buffers get them and the allocator's arenas do not. Where the
//! kernel or the system's setting (`never`) gives none, the buffer is ordinary pages, as a heap
//! allocation's were: nothing here depends on getting them.

use std::io;
use std::ptr::NonNull;

use memmap2::MmapMut;
use memmap2::MmapOptions;

/// The size (and alignment) of a transparent huge page on x86-64 and of the common arm64 one.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// `len` bytes in an anonymous mapping of their own (at a [`HUGE_PAGE`] boundary if that big).
pub(crate) struct HugeBuf {
    /// Keeps the mapping (`len` bytes, + [`HUGE_PAGE`] of room to align a big one) alive.
    _map: MmapMut,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value; shared access only reads through
// `&self` (and `Ring`'s raw pointers, under its owner's protocol).
unsafe impl Send for HugeBuf {}
// SAFETY: as above.
unsafe impl Sync for HugeBuf {}

impl HugeBuf {
    /// `len` (> 0) zeroed bytes, page-aligned; from [`HUGE_PAGE`] on aligned to it and in huge
    /// pages where the kernel gives them (asked for, not promised). A smaller buffer is one
    /// mapping of ordinary pages: a huge page would back a few KiB with 2 MiB.
    pub(crate) fn new(len: usize) -> io::Result<HugeBuf> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty huge buffer",
            ));
        }
        let huge = len >= HUGE_PAGE;
        let total = match huge {
            true => len
                .checked_add(HUGE_PAGE)
                .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "huge buffer size"))?,
            false => len,
        };
        let mut map = MmapOptions::new().len(total).map_anon()?;
        let base = map.as_mut_ptr();
        let skip = match huge {
            true => base.align_offset(HUGE_PAGE),
            false => 0,
        };
        // SAFETY: `skip` < HUGE_PAGE (a mapping is page-aligned, so the offset exists), and
        // skip + len <= total: inside the mapping.
        let ptr = unsafe { base.add(skip) };
        if huge {
            advise_huge(ptr, len);
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| io::Error::other("null anonymous mapping"))?;
        Ok(HugeBuf {
            _map: map,
            ptr,
            len,
        })
    }

    /// The first byte.
    pub(crate) fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

/// Asks for huge pages over the `len` bytes at `ptr`, a page-aligned range of a live mapping of
/// this process. A refusal (no transparent huge pages in the kernel, a file system without
/// large folios) leaves ordinary pages, so it is not reported.
pub(crate) fn advise_huge(ptr: *mut u8, len: usize) {
    // SAFETY: madvise(2) with MADV_HUGEPAGE only changes how the kernel backs the pages of the
    // range (the caller's live mapping); no byte of it changes.
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
}

impl std::ops::Deref for HugeBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialized (zeroed) bytes of the mapping `_map` keeps alive; writes
        // need `&mut self` (or `Ring`'s own protocol, which never hands out this slice).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for HugeBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` excludes every other use.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        let mut b = HugeBuf::new(HUGE_PAGE + 4096).unwrap();
        assert_eq!(b.as_ptr().as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(b.len(), HUGE_PAGE + 4096);
        assert!(b.iter().all(|&x| x == 0));
        b[HUGE_PAGE + 4095] = 7;
        b[0] = 1;
        assert_eq!((b[0], b[HUGE_PAGE + 4095]), (1, 7));
    }

    #[test]
    fn a_small_buffer_is_page_aligned() {
        let mut b = HugeBuf::new(4096).unwrap();
        assert_eq!(b.as_ptr().as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 4096);
        assert!(b.iter().all(|&x| x == 0));
        b[4095] = 9;
        assert_eq!(b[4095], 9);
    }

    #[test]
    fn an_empty_buffer_is_an_error() {
        let e = HugeBuf::new(0)
            .err()
            .expect("an empty buffer must be refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
