//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use crate::types::RawIndex;
use crate::types::RawPhys;

/// Everything the log can fail with. Converted to `std::io::Error` (message preserved) at the
/// openraft boundary, where any error is fatal for the Raft core.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Bytes on disk that were flushed are not a valid record (or a file is missing).
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        /// File holding the bad bytes.
        file: PathBuf,
        /// Offset inside the file (for segments: from the segment start).
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An operating system call failed.
    #[error("i/o error during {op} on {path}: {source}")]
    Io {
        /// The operation (`msync`, `create segment`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A caller passed a value the log cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A [`crate::LogConfig`] field has an invalid value.
    #[error("invalid config field `{field}`: {reason}")]
    Config {
        /// Kebab-case field name, as in a config file.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// An entry record does not fit in one segment.
    #[error("entry record of {size} bytes is larger than the maximum {max} (one segment)")]
    EntryTooLarge {
        /// Record bytes (header included).
        size: u64,
        /// Maximum record bytes.
        max: u64,
    },
    /// `truncate_after` would remove an entry at or below the persisted committed id.
    #[error("refusing to truncate after index {requested:?}: entries up to committed index {committed} are committed")]
    TruncateCommitted {
        /// First index that would be removed minus one (`None`: everything).
        requested: Option<RawIndex>,
        /// The persisted committed index.
        committed: RawIndex,
    },
    /// Deleting segments that hold entries not yet purged.
    #[error("refusing to delete segments below phys offset {requested}: only data below {allowed} is purged")]
    DeleteUnpurged {
        /// Requested bound.
        requested: RawPhys,
        /// Physical end of the last purged entry.
        allowed: RawPhys,
    },
    /// No space left to preallocate the next segment.
    #[error("disk full while creating {path}")]
    DiskFull {
        /// The segment being created.
        path: PathBuf,
    },
    /// The metadata database failed.
    #[error("meta db error during {op}: {reason}")]
    Meta {
        /// The operation.
        op: &'static str,
        /// The sled error.
        reason: String,
    },
    /// An earlier I/O error stopped the log; it accepts no more writes.
    #[error("log is stopped after an earlier error: {0}")]
    Stopped(String),
    /// The log was closed.
    #[error("log is closed")]
    Closed,
}

impl LogError {
    /// Wraps an OS error, turning ENOSPC into [`LogError::DiskFull`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.raw_os_error() == Some(28) || source.kind() == io::ErrorKind::StorageFull {
            return LogError::DiskFull { path };
        }
        LogError::Io { op, path, source }
    }

    /// A meta db error.
    pub fn meta(op: &'static str, e: impl std::fmt::Display) -> Self {
        LogError::Meta {
            op,
            reason: e.to_string(),
        }
    }
}

impl From<LogError> for io::Error {
    fn from(e: LogError) -> Self {
        let kind = match &e {
            LogError::Io { source, .. } => source.kind(),
            LogError::Corruption { .. } => io::ErrorKind::InvalidData,
            LogError::InvalidArgument(_)
            | LogError::Config { .. }
            | LogError::EntryTooLarge { .. } => io::ErrorKind::InvalidInput,
            LogError::TruncateCommitted { .. } | LogError::DeleteUnpurged { .. } => {
                io::ErrorKind::InvalidInput
            }
            LogError::DiskFull { .. } => io::ErrorKind::StorageFull,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// Result alias.
pub type LogResult<T> = Result<T, LogError>;
