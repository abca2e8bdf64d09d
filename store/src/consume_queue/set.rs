//! All ConsumeQueues of a node under `consumequeue/`.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use crate::consume_queue::config::ConsumeQueueConfig;
use crate::consume_queue::format::CqUnit;
use crate::consume_queue::queue::ConsumeQueue;
use crate::consume_queue::queue::PutOutcome;
use crate::error::Result;
use crate::error::StoreError;
use crate::limits::validate_topic_name;
use crate::mapped_file::sync_dir;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Every `consumequeue/<topic>/<queue_id>/` of a node, in `(topic, queue_id)` order.
#[derive(Debug)]
pub struct ConsumeQueueSet {
    root: PathBuf,
    cfg: ConsumeQueueConfig,
    /// Invariant: the queue at `queues[t][q]` lives in `root/t/q` and reports topic `t`, id `q`;
    /// no inner map is empty.
    queues: BTreeMap<String, BTreeMap<QueueId, ConsumeQueue>>,
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("read dir", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("read dir", dir, e))?;
        let name = entry.file_name().into_string().map_err(|n| {
            StoreError::corruption(
                dir.display().to_string(),
                0,
                format!("non-UTF-8 entry {n:?}"),
            )
        })?;
        names.push(name);
    }
    names.sort();
    Ok(names)
}

fn parse_queue_id(dir: &Path, name: &str) -> Result<QueueId> {
    let canonical = name
        .parse::<u32>()
        .ok()
        .map(QueueId::new)
        .filter(|q| q.to_string() == name);
    canonical.ok_or_else(|| {
        StoreError::corruption(
            dir.display().to_string(),
            0,
            format!("entry '{name}' is not a queue id"),
        )
    })
}

impl ConsumeQueueSet {
    /// Opens and recovers every queue under `root` (created if missing).
    pub fn open(root: &Path, cfg: ConsumeQueueConfig) -> Result<Self> {
        cfg.validate()?;
        std::fs::create_dir_all(root).map_err(|e| StoreError::io("create dir", root, e))?;
        let mut queues = BTreeMap::new();
        for topic in read_dir_names(root)? {
            validate_topic_name(&topic).map_err(|e| {
                StoreError::corruption(root.display().to_string(), 0, format!("bad topic dir: {e}"))
            })?;
            let tdir = root.join(&topic);
            for q in read_dir_names(&tdir)? {
                let queue_id = parse_queue_id(&tdir, &q)?;
                let cq = ConsumeQueue::open(&tdir.join(&q), &topic, queue_id, &cfg)?;
                queues
                    .entry(topic.clone())
                    .or_insert_with(BTreeMap::new)
                    .insert(queue_id, cq);
            }
        }
        let count: usize = queues.values().map(BTreeMap::len).sum();
        tracing::info!(root = %root.display(), queues = count, "consume queues opened");
        Ok(ConsumeQueueSet {
            root: root.to_owned(),
            cfg,
            queues,
        })
    }

    /// A queue, if it exists.
    pub fn get(&self, topic: &str, queue_id: QueueId) -> Option<&ConsumeQueue> {
        self.queues.get(topic)?.get(&queue_id)
    }

    /// A queue for writing, created (empty, at offset 0) if missing.
    pub fn get_or_create(&mut self, topic: &str, queue_id: QueueId) -> Result<&mut ConsumeQueue> {
        let exists = self
            .queues
            .get(topic)
            .is_some_and(|t| t.contains_key(&queue_id));
        if !exists {
            validate_topic_name(topic)?;
            let dir = self.root.join(topic).join(queue_id.to_string());
            let cq = ConsumeQueue::open(&dir, topic, queue_id, &self.cfg)?;
            sync_dir(&self.root)?;
            self.queues
                .entry(topic.to_owned())
                .or_default()
                .insert(queue_id, cq);
        }
        self.queues
            .get_mut(topic)
            .and_then(|t| t.get_mut(&queue_id))
            .ok_or_else(|| StoreError::NotFound {
                what: format!("consume queue {topic}/{queue_id}"),
            })
    }

    /// [`ConsumeQueue::put`] on `topic/queue_id`, creating the queue if missing.
    pub fn put(
        &mut self,
        topic: &str,
        queue_id: QueueId,
        offset: QueueOffset,
        unit: CqUnit,
    ) -> Result<PutOutcome> {
        self.get_or_create(topic, queue_id)?.put(offset, unit)
    }

    /// Next offset of a queue (0 for a queue that does not exist yet).
    pub fn max_offset(&self, topic: &str, queue_id: QueueId) -> QueueOffset {
        self.get(topic, queue_id)
            .map_or(QueueOffset::ZERO, |q| q.max_offset())
    }

    /// All queues in `(topic, queue_id)` order.
    pub fn iter(&self) -> impl Iterator<Item = &ConsumeQueue> {
        self.queues.values().flat_map(BTreeMap::values)
    }

    fn all_mut(&mut self) -> impl Iterator<Item = &mut ConsumeQueue> {
        self.queues.values_mut().flat_map(BTreeMap::values_mut)
    }

    /// Crash recovery: [`ConsumeQueue::truncate_phys_beyond`] on every queue. Returns units cut.
    pub fn truncate_phys_beyond(&mut self, phys: PhysOffset) -> Result<u64> {
        let mut cut = 0;
        for q in self.all_mut() {
            cut += q.truncate_phys_beyond(phys)?;
        }
        Ok(cut)
    }

    /// Retention: [`ConsumeQueue::delete_below_phys`] on every queue. Returns files removed.
    pub fn delete_below_phys(&mut self, min_phys: PhysOffset) -> Result<usize> {
        let mut n = 0;
        for q in self.all_mut() {
            n += q.delete_below_phys(min_phys)?;
        }
        Ok(n)
    }

    /// Deletes every queue of `topic` and its directory (topic deletion).
    pub fn remove_topic(&mut self, topic: &str) -> Result<()> {
        validate_topic_name(topic)?;
        self.queues.remove(topic);
        let dir = self.root.join(topic);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| StoreError::io("remove dir", &dir, e))?;
            sync_dir(&self.root)?;
        }
        tracing::info!(topic = %topic, "consume queues of topic removed");
        Ok(())
    }

    /// msyncs every queue.
    pub fn flush(&mut self) -> Result<()> {
        self.all_mut().try_for_each(|q| q.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(phys: u64) -> CqUnit {
        CqUnit {
            phys_offset: PhysOffset::new(phys),
            size: 5,
            tag_hash: 0,
        }
    }

    #[test]
    fn open_put_reopen_truncate_remove() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().join("consumequeue");
        let cfg = ConsumeQueueConfig { units_per_file: 2 };
        let mut s = ConsumeQueueSet::open(&root, cfg.clone()).expect("open");
        for i in 0..5u64 {
            s.put("a", QueueId::new(0), QueueOffset::new(i), u(100 + i * 10))
                .expect("put");
            s.put("b", QueueId::new(3), QueueOffset::new(i), u(105 + i * 10))
                .expect("put");
        }
        assert_eq!(
            s.put("a", QueueId::new(0), QueueOffset::new(0), u(100))
                .expect("replay"),
            PutOutcome::AlreadyPresent
        );
        assert!(s
            .put("bad topic", QueueId::new(0), QueueOffset::new(0), u(1))
            .is_err());
        s.flush().expect("flush");
        drop(s);
        let mut s = ConsumeQueueSet::open(&root, cfg.clone()).expect("reopen");
        let ids: Vec<_> = s
            .iter()
            .map(|q| (q.topic().to_owned(), q.queue_id()))
            .collect();
        assert_eq!(
            ids,
            [
                ("a".to_owned(), QueueId::new(0)),
                ("b".to_owned(), QueueId::new(3))
            ]
        );
        assert_eq!(s.max_offset("a", QueueId::new(0)).get(), 5);
        assert_eq!(s.max_offset("zz", QueueId::new(0)).get(), 0);
        assert_eq!(
            s.truncate_phys_beyond(PhysOffset::new(125))
                .expect("truncate"),
            5
        );
        assert_eq!(
            (
                s.max_offset("a", QueueId::new(0)).get(),
                s.max_offset("b", QueueId::new(3)).get()
            ),
            (3, 2)
        );
        assert_eq!(
            s.delete_below_phys(PhysOffset::new(120)).expect("delete"),
            2
        );
        assert_eq!(
            s.get("a", QueueId::new(0)).expect("a").min_offset().get(),
            2
        );
        s.remove_topic("a").expect("remove");
        assert!(s.get("a", QueueId::new(0)).is_none());
        assert!(!root.join("a").exists());
        drop(s);
        let s = ConsumeQueueSet::open(&root, cfg).expect("reopen");
        assert_eq!(s.iter().count(), 1);
    }

    #[test]
    fn open_rejects_foreign_entries() {
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = ConsumeQueueConfig { units_per_file: 2 };
        std::fs::create_dir_all(d.path().join("t").join("01")).expect("mkdir");
        assert!(ConsumeQueueSet::open(d.path(), cfg.clone()).is_err());
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(d.path().join("a b")).expect("mkdir");
        assert!(ConsumeQueueSet::open(d.path(), cfg).is_err());
    }
}
