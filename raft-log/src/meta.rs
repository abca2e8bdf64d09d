//! The `meta/` sled database: vote, committed log id, last purged log id, flush checkpoint,
//! log start, the lost-commit floor and an install swap in progress. Each setter that a caller
//! asks to be durable flushes the db before it returns; the flusher writes the flush checkpoint
//! durably once per flush cycle, right after the fdatasync it describes (a checkpoint is never
//! ahead of the synced bytes; a stale one would make flushed, later corrupted bytes look like a
//! torn tail at open).
//!
//! A sled flush alone is not durable: sled 0.34 writes its log with `pwrite` and
//! `sync_file_range`, which neither commits the file's size and block allocation nor flushes
//! the disk's write cache, and leaves the `fsync` to a background thread every 500 ms. A power
//! loss inside that window could forget a vote (two votes in one term) or a committed id. So
//! every durable write here is a sled flush followed by an `fdatasync` of sled's `db` file,
//! through a descriptor of our own (a sync acts on the file, not on the descriptor).
//!
//! The committed log id, saved on every commit advance of an `async` node, lives beside the
//! db in its own file ([`crate::committed_file`]: one `pwrite` + `fdatasync`, half the device
//! round trips of a sled flush + `fdatasync`). A meta dir without that file (written by an
//! older version) gets it at open, holding the id its sled key had; the key is not written
//! any more.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde::Serialize;

use crate::committed_file::CommittedFile;
use crate::env::Env;
use crate::env::FsEnv;
use crate::error::LogError;
use crate::error::LogResult;
use crate::types::LogId;
use crate::types::RawPhys;
use crate::types::Vote;

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_PURGED: &str = "purged";
const KEY_CHECKPOINT: &str = "flush-checkpoint";
const KEY_LOG_START: &str = "log-start";
const KEY_LOST_COMMIT: &str = "lost-commit-floor";
const KEY_INSTALL_SWAP: &str = "install-swap";
const KEY_CLEAN_END: &str = "clean-end";

/// The last flushed position recorded by the flusher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushCheckpoint {
    /// Physical end of the flushed bytes.
    pub phys_end: RawPhys,
    /// Last entry inside them.
    pub log_id: Option<LogId>,
}

/// The stored form of [`FlushCheckpoint`]: older versions wrote it without `index_synced`
/// (their raft index was not synced with it) and ignore the field when they read it.
#[derive(Serialize, Deserialize)]
struct StoredCheckpoint {
    phys_end: RawPhys,
    log_id: Option<LogId>,
    #[serde(default)]
    index_synced: bool,
}

/// A snapshot install's segment swap in progress (recorded before the first old segment goes,
/// cleared after the new log start, purged id and checkpoint are written): what the next open
/// needs to finish it (see `install.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct InstallSwap {
    /// Directory holding the staged segments not moved in yet.
    pub staged: std::path::PathBuf,
    /// Start of the first new segment (the new log start).
    pub start: RawPhys,
    /// How many new segments, contiguous from `start`.
    pub segments: u64,
    /// End of the new segments' records (the new checkpoint and append position).
    pub end: RawPhys,
    /// The snapshot's last log id (the new last purged id).
    pub purged: LogId,
}

fn get_in<T: DeserializeOwned>(db: &sled::Db, key: &str) -> LogResult<Option<T>> {
    let Some(v) = db.get(key).map_err(|e| LogError::meta("get", e))? else {
        return Ok(None);
    };
    let t = serde_json::from_slice(&v).map_err(|e| LogError::Corruption {
        file: "meta".into(),
        offset: 0,
        reason: format!("key {key}: {e}"),
    })?;
    Ok(Some(t))
}

/// Handle to the meta db.
#[derive(Clone)]
pub struct Meta {
    db: sled::Db,
    /// sled's log file, opened read-only to sync it after each flush.
    file: std::sync::Arc<std::fs::File>,
    path: std::path::PathBuf,
    /// The committed log id (`committed-id` beside the db).
    committed: std::sync::Arc<CommittedFile>,
}

impl Meta {
    /// Opens (or creates) the db at `dir`.
    ///
    /// sled releases its file lock asynchronously after the previous handle is dropped, so a
    /// lock conflict is retried for up to two seconds (an in-process reopen). The directory
    /// entries of the db file and of `dir` are synced before this returns.
    pub fn open(dir: &Path) -> LogResult<Self> {
        let mut attempts = 0;
        loop {
            match sled::Config::new().path(dir).open() {
                Ok(db) => return Self::with_file(db, dir),
                Err(e) if attempts < 200 && e.to_string().contains("could not acquire lock") => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(LogError::meta("open", e)),
            }
        }
    }

    fn with_file(db: sled::Db, dir: &Path) -> LogResult<Self> {
        let path = dir.join("db");
        let file = std::fs::File::open(&path).map_err(|e| LogError::io("open", &path, e))?;
        // sled creates the directory and the file; their entries must survive a power loss.
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
        for d in [dir, parent.unwrap_or(Path::new("."))] {
            FsEnv::default()
                .sync_dir(d)
                .map_err(|e| LogError::io("fsync dir", d, e))?;
        }
        let committed = CommittedFile::open(dir, || {
            get_in::<Option<LogId>>(&db, KEY_COMMITTED).map(Option::flatten)
        })?;
        Ok(Meta {
            db,
            file: std::sync::Arc::new(file),
            path,
            committed: std::sync::Arc::new(committed),
        })
    }

    fn get<T: DeserializeOwned>(&self, key: &str) -> LogResult<Option<T>> {
        get_in(&self.db, key)
    }

    fn put<T: Serialize>(&self, key: &str, value: &T, flush: bool) -> LogResult<()> {
        let bytes = serde_json::to_vec(value).map_err(|e| LogError::meta("encode", e))?;
        self.db
            .insert(key, bytes)
            .map_err(|e| LogError::meta("insert", e))?;
        if flush {
            self.flush()?;
        }
        Ok(())
    }

    /// Saved vote.
    pub fn vote(&self) -> LogResult<Option<Vote>> {
        self.get(KEY_VOTE)
    }

    /// Saves the vote durably.
    pub fn set_vote(&self, v: &Vote) -> LogResult<()> {
        self.put(KEY_VOTE, v, true)
    }

    /// Saved committed log id.
    pub fn committed(&self) -> LogResult<Option<LogId>> {
        Ok(self.committed.get())
    }

    /// Saves the committed log id durably.
    pub fn set_committed(&self, c: &Option<LogId>) -> LogResult<()> {
        self.committed.set(c)
    }

    /// Last purged log id.
    pub fn purged(&self) -> LogResult<Option<LogId>> {
        self.get(KEY_PURGED)
    }

    /// Saves the last purged log id durably.
    pub fn set_purged(&self, p: &LogId) -> LogResult<()> {
        self.put(KEY_PURGED, p, true)
    }

    /// Flush checkpoint, and whether the raft index was fdatasynced before it was written
    /// (true for every checkpoint this version writes; false for older versions' and none).
    pub fn checkpoint(&self) -> LogResult<(FlushCheckpoint, bool)> {
        let Some(c) = self.get::<StoredCheckpoint>(KEY_CHECKPOINT)? else {
            return Ok((FlushCheckpoint::default(), false));
        };
        let cp = FlushCheckpoint {
            phys_end: c.phys_end,
            log_id: c.log_id,
        };
        Ok((cp, c.index_synced))
    }

    /// Records the flush checkpoint (`durable`: flush the db before returning). The caller
    /// fdatasynced the raft index first (its records below `c` are durable).
    pub fn set_checkpoint(&self, c: &FlushCheckpoint, durable: bool) -> LogResult<()> {
        let stored = StoredCheckpoint {
            phys_end: c.phys_end,
            log_id: c.log_id,
            index_synced: true,
        };
        self.put(KEY_CHECKPOINT, &stored, durable)
    }

    /// Physical offset where the log starts (segment-aligned).
    pub fn log_start(&self) -> LogResult<Option<RawPhys>> {
        self.get(KEY_LOG_START)
    }

    /// Saves the log start durably.
    pub fn set_log_start(&self, p: RawPhys) -> LogResult<()> {
        self.put(KEY_LOG_START, &p, true)
    }

    /// The committed log id this node held before a crash lost the entries up to it, if it
    /// has not caught up past it since.
    pub fn lost_commit_floor(&self) -> LogResult<Option<LogId>> {
        self.get::<Option<LogId>>(KEY_LOST_COMMIT)
            .map(Option::flatten)
    }

    /// Records (or clears, `None`) the lost-commit floor durably.
    pub fn set_lost_commit_floor(&self, f: &Option<LogId>) -> LogResult<()> {
        self.put(KEY_LOST_COMMIT, f, true)
    }

    /// The interrupted install swap, if any.
    pub fn install_swap(&self) -> LogResult<Option<InstallSwap>> {
        self.get::<Option<InstallSwap>>(KEY_INSTALL_SWAP)
            .map(Option::flatten)
    }

    /// Records (or clears, `None`) the install swap in progress durably.
    pub fn set_install_swap(&self, s: Option<&InstallSwap>) -> LogResult<()> {
        self.put(KEY_INSTALL_SWAP, &s, true)
    }

    /// Where the log ended when it was last closed cleanly (everything flushed, nothing
    /// written after), if it was and no open cleared it since.
    pub fn clean_end(&self) -> LogResult<Option<RawPhys>> {
        self.get::<Option<RawPhys>>(KEY_CLEAN_END)
            .map(Option::flatten)
    }

    /// Records (or clears, `None`) the clean close's end durably.
    pub fn set_clean_end(&self, end: Option<RawPhys>) -> LogResult<()> {
        self.put(KEY_CLEAN_END, &end, true)
    }

    /// Makes everything written so far durable: a sled flush, then an fdatasync of its file.
    pub fn flush(&self) -> LogResult<()> {
        self.db.flush().map_err(|e| LogError::meta("flush", e))?;
        self.file
            .sync_data()
            .map_err(|e| LogError::io("fdatasync", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reopens until sled released the previous handle's lock (see [`Meta::open`]).
    fn reopen(dir: &Path) -> Meta {
        Meta::open(dir).expect("meta reopens")
    }

    #[test]
    fn a_db_of_an_older_version_keeps_its_committed_id_in_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let meta_dir = dir.path().join("meta");
        let old = Some(LogId::new_term_index(3, 17));
        {
            // What an older version left: the id under the sled key, no committed-id file.
            let db = sled::Config::new().path(&meta_dir).open().unwrap();
            db.insert(KEY_COMMITTED, serde_json::to_vec(&old).unwrap())
                .unwrap();
            db.flush().unwrap();
        }
        let meta = reopen(&meta_dir);
        assert_eq!(meta.committed().unwrap(), old);
        assert!(meta_dir.join(crate::committed_file::FILE_NAME).exists());
        let new = Some(LogId::new_term_index(4, 30));
        meta.set_committed(&new).unwrap();
        drop(meta);
        let meta = reopen(&meta_dir);
        assert_eq!(meta.committed().unwrap(), new);
        // The sled key is left as it was; the file is what counts from now on.
        assert_eq!(meta.get::<Option<LogId>>(KEY_COMMITTED).unwrap(), Some(old));
        meta.set_vote(&Vote::new(4, 1)).unwrap();
        drop(meta);
        let meta = reopen(&meta_dir);
        assert_eq!(meta.vote().unwrap(), Some(Vote::new(4, 1)));
        assert_eq!(meta.committed().unwrap(), new);
    }

    #[test]
    fn a_new_db_starts_with_no_committed_id() {
        let dir = tempfile::tempdir().unwrap();
        let meta = reopen(dir.path());
        assert_eq!(meta.committed().unwrap(), None);
        meta.set_committed(&Some(LogId::new_term_index(1, 1)))
            .unwrap();
        assert_eq!(meta.committed().unwrap(), Some(LogId::new_term_index(1, 1)));
    }
}
