//! How much room a file system has (statvfs): the one place that asks, for the disk-usage
//! ratio of retention and the size cap of incoming snapshots.

use crate::error::Result;
use crate::error::StoreError;

/// A file system's size figures (statvfs): blocks in all, free, free for users.
pub(crate) struct FsSpace {
    /// Blocks of the file system.
    pub blocks: u64,
    /// Free blocks (root's reserve included).
    pub free: u64,
    /// Free blocks an unprivileged process may use.
    pub available: u64,
    /// `available` in bytes.
    pub available_bytes: u64,
}

/// statvfs of the file system holding `path`.
pub(crate) fn statvfs(path: &std::path::Path) -> Result<FsSpace> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| StoreError::invalid("data dir path contains NUL"))?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    if rc != 0 {
        return Err(StoreError::io(
            "statvfs",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    #[allow(clippy::unnecessary_cast)] // the field widths differ between targets
    let (blocks, free, available, frsize) = (
        s.f_blocks as u64,
        s.f_bfree as u64,
        s.f_bavail as u64,
        s.f_frsize as u64,
    );
    Ok(FsSpace {
        blocks,
        free,
        available,
        available_bytes: available.saturating_mul(frsize),
    })
}
