//! [`ManifestLock`]: the exclusive advisory lock (`flock(2)`) on `<dir>/cluster.toml.lock`
//! that every read-modify-write of a local cluster's manifest holds, so that `raftmq`
//! commands running at once (e.g. several `cluster start`) never lose each other's updates.
//!
//! The lock belongs to the open file: it is released when the guard drops, and by the kernel
//! when the process dies, so a crashed command never leaves the manifest locked.

use std::fs::File;
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;

/// File name of the lock file inside the cluster directory.
pub const LOCK_FILE: &str = "cluster.toml.lock";

/// How long a command waits for another one to release the lock before it gives up.
pub const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Held while the manifest of one cluster directory is read, changed and written.
#[derive(Debug)]
pub struct ManifestLock {
    _file: File,
}

impl ManifestLock {
    /// Takes the lock of the cluster directory `dir`, waiting up to [`LOCK_WAIT`] for another
    /// holder (polling, so the wait is bounded and the error can say what blocked it).
    pub fn acquire(dir: &Path) -> anyhow::Result<Self> {
        Self::acquire_within(dir, LOCK_WAIT)
    }

    /// [`Self::acquire`] with an explicit bound on the wait.
    pub fn acquire_within(dir: &Path, wait: Duration) -> anyhow::Result<Self> {
        let path: PathBuf = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the manifest lock {}", path.display()))?;
        let start = Instant::now();
        loop {
            // SAFETY: flock(2) on a descriptor this function owns; it touches no memory.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r == 0 {
                return Ok(Self { _file: file });
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                _ => {
                    return Err(e).with_context(|| format!("cannot lock {}", path.display()));
                }
            }
            if start.elapsed() >= wait {
                anyhow::bail!(
                    "another raftmq command has held {} for over {wait:?}; wait for it to \
                     finish (or end it) and try again",
                    path.display()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_and_gets_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let held = ManifestLock::acquire(tmp.path()).unwrap();
        // flock locks belong to the open file, so a second open in this process contends
        // like another process would.
        let err = ManifestLock::acquire_within(tmp.path(), Duration::from_millis(50))
            .unwrap_err()
            .to_string();
        assert!(err.contains("another raftmq command"), "{err}");
        assert!(err.contains(LOCK_FILE), "{err}");
        drop(held);
        ManifestLock::acquire_within(tmp.path(), Duration::from_millis(50)).unwrap();
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = ManifestLock::acquire(&tmp.path().join("nope")).unwrap_err();
        assert!(format!("{err:#}").contains(LOCK_FILE), "{err:#}");
    }
}
