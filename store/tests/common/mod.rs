//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use std::path::Path;

use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::Payload;
use raftmq_store::command::Command;
use raftmq_store::message::Message;
use raftmq_store::topic::TopicConfig;
use raftmq_store::types::QueueId;
use raftmq_store::ApplyResponse;
use raftmq_store::LogStore;
use raftmq_store::PullRequest;
use raftmq_store::SnapshotFile;
use raftmq_store::StateMachine;
use raftmq_store::Store;
use raftmq_store::StoreConfig;

/// Small files everywhere so tests roll segments, CQ files and index files.
pub fn small_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.consume_queue.units_per_file = 8;
    c.index.slots_per_file = 16;
    c.index.max_units_per_file = 32;
    c.checkpoint_every_entries = 1_000_000;
    c
}

pub fn log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        flush: FlushPolicy::Sync,
        preallocate: false,
        ..LogConfig::default()
    }
}

/// One node: its log, read handle and state machine, plus the next log index to append.
pub struct Node {
    pub log: LogStore,
    pub store: Store,
    pub sm: StateMachine,
    pub next_index: u64,
    pub term: u64,
}

pub fn open_node(dir: &Path, cfg: StoreConfig, segment_bytes: u64) -> Node {
    let log = LogStore::open(dir, log_config(segment_bytes)).expect("open log");
    let next_index = log
        .watermarks()
        .appended
        .map_or(0, |l| l.index + 1)
        .max(log.watermarks().last_purged.map_or(0, |l| l.index + 1));
    let (store, sm) = raftmq_store::open(dir, cfg, log.clone()).expect("open store");
    Node {
        log,
        store,
        sm,
        next_index,
        term: 1,
    }
}

pub fn msg(topic: &str, queue_id: u32, i: u64, tag: &str, key: &str, ts: u64) -> Message {
    let mut m = Message::new(
        topic,
        QueueId::new(queue_id),
        format!("body-{i}").into_bytes(),
    );
    m.tags = tag.to_owned();
    if !key.is_empty() {
        m.keys = vec![key.to_owned()];
    }
    m.store_timestamp_ms = ts;
    m.born_timestamp_ms = ts;
    m
}

impl Node {
    /// Appends `cmd` as the next entry (durably) without applying it.
    pub fn append(&mut self, cmd: &Command) -> LogEntry {
        let e = LogEntry {
            log_id: LogId::new_term_index(self.term, self.next_index),
            payload: Payload::Normal(cmd.encode().expect("encode")),
        };
        self.append_entry(e)
    }

    pub fn append_entry(&mut self, e: LogEntry) -> LogEntry {
        let (tx, rx) = std::sync::mpsc::channel();
        self.log
            .append_entries(vec![e.clone()], Box::new(move |r| drop(tx.send(r))))
            .expect("append");
        rx.recv().expect("callback").expect("durable");
        self.next_index += 1;
        e
    }

    /// Appends and applies.
    pub fn propose(&mut self, cmd: &Command) -> ApplyResponse {
        let e = self.append(cmd);
        self.sm.apply_entry(&e).expect("apply")
    }

    pub fn blank(&mut self) -> ApplyResponse {
        let e = LogEntry {
            log_id: LogId::new_term_index(self.term, self.next_index),
            payload: Payload::Blank,
        };
        let e = self.append_entry(e);
        self.sm.apply_entry(&e).expect("apply")
    }

    pub fn create_topic(&mut self, name: &str, queues: u32) {
        let r = self.propose(&Command::CreateTopic(TopicConfig::new(name, queues)));
        assert!(matches!(r, ApplyResponse::Topic(_)), "{r:?}");
    }

    pub fn send(&mut self, ms: Vec<Message>) -> ApplyResponse {
        self.propose(&Command::batch(ms))
    }
}

pub fn raw_entry(term: u64, index: u64, bytes: Vec<u8>) -> LogEntry {
    LogEntry {
        log_id: LogId::new_term_index(term, index),
        payload: Payload::Normal(AppPayload::from(bytes)),
    }
}

/// Every message of `topic`/`q` as (queue offset, message id, body).
pub fn all_messages(n: &Node, topic: &str, q: u32) -> Vec<(u64, u64, Vec<u8>)> {
    let (min, max) = n.store.queue_offsets(topic, QueueId::new(q));
    let mut out = Vec::new();
    let mut o = min;
    while o < max {
        let r = n
            .store
            .pull(&PullRequest {
                topic: topic.into(),
                queue_id: QueueId::new(q),
                offset: o,
                max_count: 32,
                max_bytes: u64::MAX,
                tag_expr: "*".into(),
            })
            .expect("pull");
        for m in &r.messages {
            out.push((
                m.queue_offset.get(),
                m.msg_id.get(),
                m.message.body.to_vec(),
            ));
        }
        o = r.next_offset;
    }
    out
}

/// `[min, max)` queue offsets of `topic`/`q` as bare numbers.
pub fn queue_offsets(n: &Node, topic: &str, q: u32) -> (u64, u64) {
    let (min, max) = n.store.queue_offsets(topic, QueueId::new(q));
    (min.get(), max.get())
}

/// Moves a snapshot to `to`'s receiver in 1000-byte chunks (checking a gap is refused).
pub async fn transfer(from: &SnapshotFile, to: &Node) -> SnapshotFile {
    let rx = to.store.snapshot_receiver(1 << 30);
    let mut p = rx.begin().expect("begin");
    let mut off = 0u64;
    loop {
        let c = from.read_chunk(off, 1000).expect("read");
        if c.is_empty() {
            break;
        }
        rx.write_chunk(&mut p, off, &c).expect("write");
        off += c.len() as u64;
    }
    assert!(
        rx.write_chunk(&mut p, off + 1, b"x").is_err(),
        "gap refused"
    );
    rx.finish(p).expect("finish")
}

/// `count` batches of two messages over queues 0..3 of topic `t`.
pub fn fill(a: &mut Node, count: u64) {
    for i in 0..count {
        a.send(vec![
            msg("t", (i % 3) as u32, i, "tag", &format!("key{i}"), 1000 + i),
            msg("t", 0, 10_000 + i, "", "", 1000 + i),
        ]);
    }
}

/// Builds a snapshot of `n`'s applied state (openraft's builder).
pub async fn build_snapshot(n: &mut Node) -> raftmq_store::sm::Snapshot {
    use openraft::storage::RaftSnapshotBuilder;
    use openraft::storage::RaftStateMachine;
    n.sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build")
}
