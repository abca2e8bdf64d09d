//! The crate's one error type.

use std::path::PathBuf;

use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Everything that can go wrong in the store crate.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Bytes on disk (or in a payload) do not decode. `file` names the file or the byte source
    /// (e.g. `"message record"` until the caller [`locate`](StoreError::locate)s it), `offset`
    /// is the byte position of the bad field in that file or source.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        /// File or byte source.
        file: String,
        /// Byte offset of the bad field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },

    /// An I/O operation failed.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        /// The operation (`"open"`, `"mmap"`, `"flush"`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A named thing does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked up, e.g. `"topic 'orders'"`.
        what: String,
    },

    /// A named thing exists already.
    #[error("already exists: {what}")]
    AlreadyExists {
        /// What was to be created, e.g. `"topic 'orders'"`.
        what: String,
    },

    /// A caller passed a value this crate rejects (names, sizes, limits, expressions).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// Exactly what is wrong and what is allowed.
        reason: String,
    },

    /// A configuration field is out of range.
    #[error("invalid config field '{field}': {reason}")]
    Config {
        /// The kebab-case field name.
        field: &'static str,
        /// What is wrong and the allowed range.
        reason: String,
    },

    /// A configured bound on a resource (topics, bytes, waiters) would be passed; the request
    /// is refused and nothing changed.
    #[error("limit reached: {what}; {setting} is {max}")]
    LimitReached {
        /// What the request would exceed, e.g. `"10000 topics exist"`.
        what: String,
        /// The kebab-case setting that sets the bound.
        setting: &'static str,
        /// Its value.
        max: u64,
    },

    /// The disk is (nearly) full; writes are refused.
    #[error("disk full: {reason}")]
    DiskFull {
        /// Which bound was passed.
        reason: String,
    },

    /// A queue offset outside `[min, max]` of a queue.
    #[error("queue offset {offset} of {topic}/{queue_id} is out of range [{min}, {max}]")]
    OffsetOutOfRange {
        /// Topic of the queue.
        topic: String,
        /// Queue id.
        queue_id: QueueId,
        /// Requested offset.
        offset: QueueOffset,
        /// Smallest readable offset.
        min: QueueOffset,
        /// Next offset to be written (one past the last unit).
        max: QueueOffset,
    },

    /// The CommitLog failed (I/O, corruption, closed, stopped).
    #[error("commitlog: {0}")]
    Log(#[from] raftmq_raft_log::error::LogError),

    /// A write would overwrite different data at a position that is already written.
    #[error("conflict in {what}: {reason}")]
    Conflict {
        /// The structure and position.
        what: String,
        /// The existing and the new value.
        reason: String,
    },

    /// A physical offset a structure cannot accept (e.g. not increasing).
    #[error("physical offset {phys_offset} rejected by {what}: {reason}")]
    PhysOffsetOrder {
        /// The structure.
        what: String,
        /// The offending physical offset.
        phys_offset: PhysOffset,
        /// Why.
        reason: String,
    },
}

impl From<StoreError> for std::io::Error {
    fn from(e: StoreError) -> Self {
        let kind = match &e {
            StoreError::Io { source, .. } => source.kind(),
            StoreError::Corruption { .. } => std::io::ErrorKind::InvalidData,
            StoreError::NotFound { .. } => std::io::ErrorKind::NotFound,
            StoreError::DiskFull { .. } => std::io::ErrorKind::StorageFull,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    }
}

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// A corruption error in a byte source.
    pub fn corruption(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Self {
        StoreError::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// An I/O error.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// An invalid-argument error.
    pub fn invalid(reason: impl Into<String>) -> Self {
        StoreError::InvalidArgument {
            reason: reason.into(),
        }
    }

    /// Re-anchor a corruption error found while decoding a buffer: the buffer starts at byte
    /// `base` of `file`. Other errors are returned unchanged.
    pub fn locate(self, file: impl Into<String>, base: u64) -> Self {
        match self {
            StoreError::Corruption { offset, reason, .. } => StoreError::Corruption {
                file: file.into(),
                offset: base.saturating_add(offset),
                reason,
            },
            other => other,
        }
    }

    /// True for [`StoreError::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, StoreError::Corruption { .. })
    }

    /// True when the disk is full: [`StoreError::DiskFull`], or an I/O error with ENOSPC or
    /// EDQUOT (a write that found no room). Such a write can succeed once space returns.
    pub fn is_disk_full(&self) -> bool {
        let no_room = |e: &std::io::Error| {
            matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
                || e.kind() == std::io::ErrorKind::StorageFull
        };
        match self {
            StoreError::DiskFull { .. } => true,
            StoreError::Io { source, .. } => no_room(source),
            StoreError::Log(raftmq_raft_log::error::LogError::DiskFull { .. }) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_rebases_corruption_only() {
        let e = StoreError::corruption("message record", 12, "bad crc").locate("commitlog/0", 100);
        assert_eq!(
            e.to_string(),
            "corruption in commitlog/0 at offset 112: bad crc"
        );
        let e = StoreError::invalid("x").locate("f", 1);
        assert!(matches!(e, StoreError::InvalidArgument { .. }));
    }
}
