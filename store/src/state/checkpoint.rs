//! The durable dispatch checkpoint: `<data_dir>/store-meta/checkpoint`.
//!
//! It records the replicated state as of `last_applied` (membership, topics, consumer
//! offsets, pop state, dedup window, users). It is written atomically (tmp, fsync, rename,
//! fsync dir) and only after the log, the ConsumeQueues and the index were flushed, so every
//! entry up to `last_applied` is durable in the log and dispatched on disk. After a restart
//! openraft re-applies the committed entries after `last_applied`; re-dispatch is idempotent.
//!
//! Layout (integers little-endian):
//!
//! | size        | field      | meaning                                                    |
//! |------------:|------------|------------------------------------------------------------|
//! | 8           | `magic`    | [`CHECKPOINT_MAGIC`] (`RMQCKPT` + version 1)               |
//! | 8           | `head_len` | bytes of the head                                          |
//! | `head_len`  | head       | the checkpoint but its dedup window, as JSON (kebab-case)  |
//! |             | dedup      | the dedup window, oldest send first ([`DedupWindow::write_binary`]) |
//! | 4           | `crc`      | CRC32 of every byte before it                              |
//!
//! The dedup window is most of the state (up to `dedup-max-entries` sends, 100,000 by
//! default): as JSON it was about 190 bytes a send and most of a checkpoint's CPU; binary it
//! is about 100, written as it is encoded. Nodes before it wrote everything as JSON to
//! `checkpoint.json`: [`Checkpoint::load`] reads that file when the binary one does not exist
//! yet, and [`Checkpoint::store`] removes it once the binary one is durable.

use std::io::BufWriter;
use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use serde::Serialize;

use crate::codec::Reader;
use crate::dedup::DedupWindow;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::sync_dir;
use crate::offsets::ConsumerOffsetTable;
pub use crate::paths::checkpoint_path;
use crate::paths::legacy_checkpoint_path;
use crate::paths::store_meta_dir;
use crate::raft_types::StoredMembership;
use crate::receive::ReceiveTable;
use crate::topic::TopicTable;
use crate::types::PhysOffset;
use crate::users::UserTable;
use raftmq_raft_log::types::LogId;

/// Magic and version of the checkpoint file.
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"RMQCKPT\x01";

/// Replicated state as of `last_applied`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Checkpoint {
    /// Last entry applied (and dispatched) when this was taken.
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership,
    /// Topics.
    pub topics: TopicTable,
    /// Consumer offsets.
    pub offsets: ConsumerOffsetTable,
    /// Pop state (absent in checkpoints written before it existed: empty).
    #[serde(default)]
    pub receive: ReceiveTable,
    /// Dedup window of idempotent sends (absent in checkpoints written before it existed:
    /// empty).
    #[serde(default)]
    pub dedup: DedupWindow,
    /// Users, secrets sealed (absent in checkpoints written before it existed: none).
    #[serde(default)]
    pub users: UserTable,
    /// Physical end of the last applied normal entry.
    pub dispatched_phys_end: PhysOffset,
}

/// The head of the file: the checkpoint but its dedup window (borrowed: serialised as
/// written, no clone of the state).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Head<'a> {
    last_applied: &'a Option<LogId>,
    membership: &'a StoredMembership,
    topics: &'a TopicTable,
    offsets: &'a ConsumerOffsetTable,
    receive: &'a ReceiveTable,
    users: &'a UserTable,
    dispatched_phys_end: PhysOffset,
}

impl Checkpoint {
    /// Loads the checkpoint (the binary file, else the JSON one older nodes wrote), or the
    /// empty one if none was written yet.
    pub fn load(data_dir: &Path) -> Result<Checkpoint> {
        let path = checkpoint_path(data_dir);
        if let Some(bytes) = read_if_exists(&path)? {
            return Checkpoint::decode(&bytes).map_err(|e| e.locate(path.display().to_string(), 0));
        }
        let legacy = legacy_checkpoint_path(data_dir);
        let Some(bytes) = read_if_exists(&legacy)? else {
            return Ok(Checkpoint::default());
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::corruption(
                legacy.display().to_string(),
                e.column() as u64,
                e.to_string(),
            )
        })
    }

    /// Decodes the bytes of a checkpoint file (layout in the module docs).
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint> {
        let crc_at = bytes.len().saturating_sub(4);
        let mut r = Reader::new(&bytes[..crc_at], "dispatch checkpoint");
        if !bytes.starts_with(&CHECKPOINT_MAGIC) {
            return Err(r.corrupt(0, "not a dispatch checkpoint (bad magic or version)"));
        }
        let stored = crate::codec::le_u32_at(bytes, crc_at)
            .ok_or_else(|| r.corrupt(bytes.len(), "truncated: no CRC"))?;
        let computed = crc32fast::hash(&bytes[..crc_at]);
        if stored != computed {
            return Err(r.corrupt(
                crc_at,
                format!("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            ));
        }
        r.take(CHECKPOINT_MAGIC.len(), "magic")?;
        let head_len = r.u64("head length")?;
        let head_at = r.pos();
        let head = usize::try_from(head_len)
            .ok()
            .and_then(|len| r.take(len, "head").ok())
            .ok_or_else(|| {
                r.corrupt(
                    head_at,
                    format!("head of {head_len} bytes runs past the end"),
                )
            })?;
        let mut c: Checkpoint = serde_json::from_slice(head)
            .map_err(|e| r.corrupt(head_at + e.column(), format!("head: {e}")))?;
        c.dedup = DedupWindow::read_binary(&mut r)?;
        r.finish("the dedup window")?;
        Ok(c)
    }

    /// Encodes into `out` as the file holds it (layout in the module docs).
    pub fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        let head = serde_json::to_vec(&Head {
            last_applied: &self.last_applied,
            membership: &self.membership,
            topics: &self.topics,
            offsets: &self.offsets,
            receive: &self.receive,
            users: &self.users,
            dispatched_phys_end: self.dispatched_phys_end,
        })?;
        let mut out = CrcWriter {
            inner: out,
            crc: crc32fast::Hasher::new(),
        };
        out.write_all(&CHECKPOINT_MAGIC)?;
        out.write_all(&(head.len() as u64).to_le_bytes())?;
        out.write_all(&head)?;
        self.dedup.write_binary(&mut out)?;
        let crc = out.crc.finalize();
        out.inner.write_all(&crc.to_le_bytes())
    }

    /// Writes atomically: tmp file, fsync, rename, fsync dir; then removes the JSON file of
    /// older nodes, if any (the binary one is read first; a failed removal is only logged).
    pub fn store(&self, data_dir: &Path) -> Result<()> {
        let path = checkpoint_path(data_dir);
        let dir = store_meta_dir(data_dir);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io("create dir", &dir, e))?;
        let tmp = path.with_extension("tmp");
        let file = std::fs::File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
        let mut out = BufWriter::with_capacity(256 << 10, file);
        self.encode(&mut out)
            .map_err(|e| StoreError::io("write", &tmp, e))?;
        let file = out
            .into_inner()
            .map_err(|e| StoreError::io("write", &tmp, e.into_error()))?;
        publish(file, &tmp, &path)?;
        // The binary file is durable and read first: a JSON file left behind is harmless, so
        // failing to remove it is not a failed checkpoint.
        let legacy = legacy_checkpoint_path(data_dir);
        match std::fs::remove_file(&legacy) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(path = %legacy.display(), error = %e,
                    "could not remove the JSON checkpoint of an older version (unused)");
            }
            _ => {}
        }
        tracing::debug!(last_applied = ?self.last_applied, "dispatch checkpoint written");
        Ok(())
    }
}

/// Passes writes through to `inner`, keeping the CRC32 of every byte.
struct CrcWriter<'a, W: Write> {
    inner: &'a mut W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The bytes of `path`, or None if it does not exist.
fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", path, e)),
    }
}

/// Writes `bytes` to `path` atomically (tmp + fsync + rename + dir fsync).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    f.write_all(bytes)
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    publish(f, &tmp, path)
}

/// Makes the written `tmp` durable and renames it to `path` (fsync, rename, dir fsync).
fn publish(f: std::fs::File, tmp: &Path, path: &Path) -> Result<()> {
    f.sync_all().map_err(|e| StoreError::io("fsync", tmp, e))?;
    std::fs::rename(tmp, path).map_err(|e| StoreError::io("rename", path, e))?;
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::invalid(format!("{} has no parent", path.display())))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::StoredSend;
    use crate::topic::TopicConfig;
    use crate::types::QueueId;
    use crate::types::QueueOffset;

    /// A checkpoint with a topic and `sends` remembered sends.
    fn sample(sends: u64) -> Checkpoint {
        let mut c = Checkpoint {
            last_applied: Some(LogId::new_term_index(2, 7)),
            dispatched_phys_end: PhysOffset::new(999),
            ..Checkpoint::default()
        };
        c.topics.create(TopicConfig::new("t", 4)).expect("create");
        for i in 0..sends {
            let send = StoredSend {
                queue_id: QueueId::new(i as u32 % 4),
                queue_offset: QueueOffset::new(i),
                phys_offset: PhysOffset::new(1000 + i * 300),
                store_timestamp_ms: 1_700_000_000_000 + i,
                log_id: LogId::new_term_index(2, 3 + i / 8),
            };
            c.dedup
                .insert(&format!("p1:t32:{:032x}{i}", i * 7919), send);
        }
        c
    }

    #[test]
    fn round_trip_and_missing_is_empty() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            Checkpoint::load(d.path()).expect("load"),
            Checkpoint::default()
        );
        for sends in [0, 1, 1000] {
            let c = sample(sends);
            c.store(d.path()).expect("store");
            let back = Checkpoint::load(d.path()).expect("load");
            assert_eq!(back, c);
            assert_eq!(back.dedup.len(), sends as usize);
            back.dedup
                .validate_all()
                .expect("a loaded window keeps its invariant");
        }
        std::fs::write(checkpoint_path(d.path()), b"{").expect("write");
        assert!(Checkpoint::load(d.path()).expect_err("bad").is_corruption());
    }

    /// A node upgraded from the JSON checkpoint starts from it; its first binary checkpoint
    /// replaces it, and the binary one wins when both exist (a crash before the removal).
    #[test]
    fn reads_the_json_file_of_older_nodes_until_the_binary_one_exists() {
        let d = tempfile::tempdir().expect("tempdir");
        let old = sample(10);
        std::fs::create_dir_all(store_meta_dir(d.path())).expect("dir");
        let json = serde_json::to_vec(&old).expect("json");
        std::fs::write(legacy_checkpoint_path(d.path()), &json).expect("write");
        assert_eq!(Checkpoint::load(d.path()).expect("load json"), old);

        let mut new = sample(20);
        new.last_applied = Some(LogId::new_term_index(3, 50));
        new.store(d.path()).expect("store");
        assert!(
            !legacy_checkpoint_path(d.path()).exists(),
            "the JSON file is gone"
        );
        std::fs::write(legacy_checkpoint_path(d.path()), &json).expect("write");
        assert_eq!(Checkpoint::load(d.path()).expect("load"), new);
    }

    /// Every damaged file is a corruption error naming the file, never a panic or a
    /// silently shorter window.
    #[test]
    fn damage_is_a_corruption_error() {
        let c = sample(50);
        let mut bytes = Vec::new();
        c.encode(&mut bytes).expect("encode");
        assert_eq!(Checkpoint::decode(&bytes).expect("decode"), c);
        for cut in [
            0,
            4,
            8,
            15,
            16,
            40,
            bytes.len() / 2,
            bytes.len() - 5,
            bytes.len() - 1,
        ] {
            let e = Checkpoint::decode(&bytes[..cut]).expect_err("truncated");
            assert!(e.is_corruption(), "cut at {cut}: {e}");
        }
        for at in [0, 9, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            let e = Checkpoint::decode(&bad).expect_err("flipped");
            assert!(e.is_corruption(), "flip at {at}: {e}");
        }
        // Damage behind a valid CRC (a bug, not the disk): a count the bytes cannot hold, a
        // head length past the end, a key that is not UTF-8.
        let resealed = |mut b: Vec<u8>| {
            let at = b.len() - 4;
            let crc = crc32fast::hash(&b[..at]);
            b[at..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let head_len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) as usize;
        let count_at = 16 + head_len;
        let mut huge = bytes.clone();
        huge[count_at..count_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = Checkpoint::decode(&resealed(huge)).expect_err("count");
        assert!(e.to_string().contains("truncated"), "{e}");
        let mut long = bytes.clone();
        long[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = Checkpoint::decode(&resealed(long)).expect_err("head length");
        assert!(e.to_string().contains("runs past the end"), "{e}");
        let mut key = bytes.clone();
        key[count_at + 8 + 4] = 0xff;
        let e = Checkpoint::decode(&resealed(key)).expect_err("key");
        assert!(e.to_string().contains("not UTF-8"), "{e}");

        let d = tempfile::tempdir().expect("tempdir");
        c.store(d.path()).expect("store");
        let path = checkpoint_path(d.path());
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("write");
        let e = Checkpoint::load(d.path()).expect_err("truncated file");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
}
