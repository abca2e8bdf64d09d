//! Little-endian, bounds-checked primitives shared by the byte formats of this crate.
//!
//! Every multi-byte integer on disk and in payloads is little-endian. Strings are UTF-8 with a
//! `u16` length prefix; byte blobs carry a `u32` length prefix. The [`Reader`] never panics: every
//! read checks the remaining length and returns [`StoreError::Corruption`] naming the position.

use crate::error::Result;
use crate::error::StoreError;

/// Appends little-endian fields to a `Vec<u8>`.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Writer { out }
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
    }

    /// A `u16`-length-prefixed UTF-8 string. `what` names the field in the error.
    pub(crate) fn str16(&mut self, what: &str, v: &str) -> Result<()> {
        let len = u16::try_from(v.len()).map_err(|_| {
            StoreError::invalid(format!(
                "{what} is {} bytes; the format allows at most {}",
                v.len(),
                u16::MAX
            ))
        })?;
        self.u16(len);
        self.bytes(v.as_bytes());
        Ok(())
    }

    /// A `u32`-length-prefixed blob.
    pub(crate) fn blob32(&mut self, what: &str, v: &[u8]) -> Result<()> {
        let len = u32::try_from(v.len()).map_err(|_| {
            StoreError::invalid(format!(
                "{what} is {} bytes; the format allows at most {}",
                v.len(),
                u32::MAX
            ))
        })?;
        self.u32(len);
        self.bytes(v);
        Ok(())
    }
}

/// Reads little-endian fields from a byte slice; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    source: &'static str,
}

impl<'a> Reader<'a> {
    /// `source` names the format in corruption errors until the caller locates them.
    pub(crate) fn new(buf: &'a [u8], source: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            source,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[cold]
    pub(crate) fn corrupt(&self, at: usize, reason: impl Into<String>) -> StoreError {
        StoreError::corruption(self.source, at as u64, reason)
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.truncated(n, what)),
        }
    }

    /// The error of a read past the end: built out of line, so that the reads themselves stay
    /// small enough to inline (apply parses every record of every entry with them).
    #[cold]
    #[inline(never)]
    fn truncated(&self, n: usize, what: &str) -> StoreError {
        let left = self.remaining();
        self.corrupt(
            self.pos,
            format!("truncated {what}: need {n} bytes, {left} left"),
        )
    }

    #[inline]
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    #[inline]
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    #[inline]
    pub(crate) fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    #[inline]
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    #[inline]
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A `u16`-length-prefixed UTF-8 string, borrowed.
    #[inline]
    pub(crate) fn str16(&mut self, what: &str) -> Result<&'a str> {
        let len = self.u16(what)? as usize;
        let at = self.pos;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s),
            Err(e) => Err(self.not_utf8(at, what, e)),
        }
    }

    #[cold]
    #[inline(never)]
    fn not_utf8(&self, at: usize, what: &str, e: std::str::Utf8Error) -> StoreError {
        self.corrupt(at, format!("{what} is not UTF-8: {e}"))
    }

    /// A `u32`-length-prefixed blob, borrowed.
    #[inline]
    pub(crate) fn blob32(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.corrupt(
                self.pos,
                format!("{} trailing bytes after {what}", self.remaining()),
            ));
        }
        Ok(())
    }
}

/// Reads a little-endian `u32` at `at` of `buf`, or `None` if out of bounds.
pub(crate) fn le_u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let s = buf.get(at..at.checked_add(4)?)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Some(u32::from_le_bytes(a))
}

/// Reads a little-endian `u64` at `at` of `buf`, or `None` if out of bounds.
pub(crate) fn le_u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let s = buf.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// The cache line of the CPUs we tune for.
pub(crate) const CACHE_LINE: usize = 64;

/// A hint to load the cache line of `bytes[at]` (nothing when `at` is past the end): it reads
/// nothing the program sees and never faults.
#[inline]
pub(crate) fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = bytes.get(at) {
        use std::arch::x86_64::_mm_prefetch;
        use std::arch::x86_64::_MM_HINT_T0;
        // SAFETY: a prefetch of an address inside `bytes`; the instruction changes no state
        // the program can observe and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(b).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut v = Vec::new();
        let mut w = Writer::new(&mut v);
        w.u8(1);
        w.u16(2);
        w.u32(3);
        w.u64(4);
        w.str16("s", "héllo").expect("short string fits");
        w.blob32("b", b"xyz").expect("short blob fits");
        let mut r = Reader::new(&v, "test");
        assert_eq!(r.u8("a").expect("ok"), 1);
        assert_eq!(r.u16("a").expect("ok"), 2);
        assert_eq!(r.u32("a").expect("ok"), 3);
        assert_eq!(r.u64("a").expect("ok"), 4);
        assert_eq!(r.str16("s").expect("ok"), "héllo");
        assert_eq!(r.blob32("b").expect("ok"), b"xyz");
        r.finish("all").expect("consumed");

        for cut in 0..v.len() {
            let mut r = Reader::new(&v[..cut], "test");
            let res = (|| -> Result<()> {
                r.u8("a")?;
                r.u16("a")?;
                r.u32("a")?;
                r.u64("a")?;
                r.str16("s")?;
                r.blob32("b")?;
                Ok(())
            })();
            assert!(res.expect_err("truncated").is_corruption());
        }
    }

    #[test]
    fn bad_utf8_is_corruption() {
        let v = [2u8, 0, 0xff, 0xfe];
        let mut r = Reader::new(&v, "test");
        let e = r.str16("topic").expect_err("not utf8");
        assert!(e.to_string().contains("topic is not UTF-8"), "{e}");
    }

    #[test]
    fn le_at_bounds() {
        assert_eq!(le_u32_at(&[1, 0, 0, 0], 0), Some(1));
        assert_eq!(le_u32_at(&[1, 0, 0], 0), None);
        assert_eq!(le_u64_at(&[0; 8], usize::MAX), None);
    }
}
