//! Helpers for the scenario tests.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

use raftmq_raft_log::store::LogStore;
use raftmq_raft_log::types::AppPayload;
use raftmq_raft_log::types::LogEntry;
use raftmq_raft_log::types::LogId;
use raftmq_raft_log::types::LogIndex;
use raftmq_raft_log::types::Payload;
use raftmq_raft_log::FlushCallback;

use super::TestConfig;

/// A normal entry with `size` payload bytes derived from the index.
pub fn entry(term: u64, index: u64, size: usize) -> LogEntry {
    let bytes: Vec<u8> = (0..size).map(|i| (index as usize * 7 + i) as u8).collect();
    LogEntry {
        log_id: LogId::new_term_index(term, index),
        payload: Payload::Normal(AppPayload::from(bytes)),
    }
}

/// A callback and the receiver of its result.
pub fn waiter() -> (FlushCallback, mpsc::Receiver<std::io::Result<()>>) {
    let (tx, rx) = mpsc::channel();
    (Box::new(move |r| drop(tx.send(r))), rx)
}

/// Waits for a callback result.
pub fn wait(rx: &mpsc::Receiver<std::io::Result<()>>) -> std::io::Result<()> {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("callback completed")
}

/// A callback that ignores its result.
pub fn ignore() -> FlushCallback {
    Box::new(|_| {})
}

/// The indexes of every entry in the log, in order.
pub fn indexes(s: &LogStore<TestConfig>) -> Vec<u64> {
    s.read_entries(LogIndex::new(0), LogIndex::new(u64::MAX))
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect()
}
