//! Throughput of the store's building blocks (no timed assertions; prints figures).
//!
//! `cargo bench -p raftmq-store --bench structures`
//!
//! Measures, on one core: decoding a 16-message batch payload (the apply path's parse),
//! ConsumeQueue appends, IndexFile puts, the two tag filter stages, and apply's dedup window
//! (key, expire, look up, remember) at its default size.

use raftmq_store::types::PhysOffset;
use raftmq_store::types::QueueId;
use raftmq_store::types::QueueOffset;
use std::time::Duration;
use std::time::Instant;

use raftmq_store::command::Command;
use raftmq_store::command::CommandView;
use raftmq_store::consume_queue::ConsumeQueue;
use raftmq_store::consume_queue::ConsumeQueueConfig;
use raftmq_store::consume_queue::CqUnit;
use raftmq_store::dedup::DedupParams;
use raftmq_store::dedup::DedupWindow;
use raftmq_store::dedup::Identity;
use raftmq_store::dedup::StoredSend;
use raftmq_store::dedup::PRODUCER_ID_PROPERTY;
use raftmq_store::dedup::SEQUENCE_PROPERTY;
use raftmq_store::filter::TagFilter;
use raftmq_store::hash::tag_hash;
use raftmq_store::index::IndexConfig;
use raftmq_store::index::IndexStore;
use raftmq_store::message::Message;

fn report(what: &str, n: u64, bytes: u64, d: Duration) {
    let s = d.as_secs_f64();
    println!(
        "{what:<48} {:>12.0} ops/s {:>9.1} MB/s ({n} in {:.3} s)",
        n as f64 / s,
        bytes as f64 / s / 1e6,
        s
    );
}

fn batch(body: usize, count: usize) -> Vec<u8> {
    let ms = (0..count)
        .map(|i| {
            let mut m = Message::new(
                "bench-topic",
                QueueId::new((i % 16) as u32),
                vec![7u8; body],
            );
            m.tags = "TagA".into();
            m.keys = vec![format!("key-{i}")];
            m.born_host = "10.0.0.1:5000".into();
            m
        })
        .collect();
    Command::batch(ms).encode().expect("encode").0.to_vec()
}

fn bench_parse(body: usize) {
    let p = batch(body, 16);
    let rounds = 20_000u64;
    let t = Instant::now();
    let mut total = 0usize;
    for _ in 0..rounds {
        if let CommandView::SendBatch { messages: ms, .. } = CommandView::parse(&p).expect("parse")
        {
            total += ms.len();
        }
    }
    let name = format!("parse 16-msg batch, {body} B bodies (per msg)");
    report(&name, total as u64, rounds * p.len() as u64, t.elapsed());
}

fn bench_cq() {
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = ConsumeQueueConfig::default();
    let mut q = ConsumeQueue::open(d.path(), "t", QueueId::new(0), &cfg).expect("open");
    let n = 1_000_000u64;
    let t = Instant::now();
    for i in 0..n {
        let u = CqUnit {
            phys_offset: PhysOffset::new(1 + i * 1100),
            size: 1100,
            tag_hash: 5,
        };
        q.put(QueueOffset::new(i), u).expect("put");
    }
    q.flush().expect("flush");
    report("consume queue put + flush", n, n * 20, t.elapsed());
    let t = Instant::now();
    let mut seen = 0usize;
    let mut o = 0;
    while o < n {
        seen += q.read(QueueOffset::new(o), 32).expect("read").len();
        o += 32;
    }
    report(
        "consume queue read (32 per call)",
        seen as u64,
        seen as u64 * 20,
        t.elapsed(),
    );
}

fn bench_index() {
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = IndexConfig {
        slots_per_file: 1_000_000,
        max_units_per_file: 4_000_000,
    };
    let mut s = IndexStore::open(d.path(), cfg).expect("open");
    let keys: Vec<String> = (0..500_000).map(|i| format!("order-{i}")).collect();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        s.put(
            k,
            PhysOffset::new(1 + i as u64 * 1100),
            1_700_000_000_000 + i as u64,
        )
        .expect("put");
    }
    s.flush().expect("flush");
    report("index put + flush", keys.len() as u64, 0, t.elapsed());
    let t = Instant::now();
    let mut hits = 0usize;
    for k in keys.iter().step_by(5) {
        hits += s.query(k, 0, u64::MAX, 32).len();
    }
    report("index query", hits as u64, 0, t.elapsed());
}

fn bench_filter() {
    let f = TagFilter::parse("TagA || TagB || TagC").expect("parse");
    let hashes: Vec<u64> = ["TagA", "TagX", "TagC", "TagY"]
        .iter()
        .map(|t| tag_hash(t))
        .collect();
    let n = 10_000_000u64;
    let t = Instant::now();
    let mut hits = 0u64;
    for i in 0..n {
        hits += u64::from(f.matches_hash(hashes[(i % 4) as usize]));
    }
    report("tag filter, hash stage", n, 0, t.elapsed());
    assert_eq!(hits, n / 2);
}

/// Apply's per-message dedup work in the steady state: the window holds its default 100,000
/// sends, so every new send evicts one (four producers, sequences counting up).
fn bench_dedup() {
    const PRODUCERS: [&str; 4] = [
        "4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a",
        "0b9f3c1d2e4a5b6c7d8e9f0a1b2c3d4e",
        "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d",
        "1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f",
    ];
    let params = DedupParams {
        window_ms: 300_000,
        max_entries: 100_000,
    };
    let mut w = DedupWindow::default();
    let send = |i: u64| StoredSend {
        queue_id: QueueId::new((i % 16) as u32),
        queue_offset: QueueOffset::new(i),
        phys_offset: PhysOffset::new(1 + i * 1100),
        store_timestamp_ms: 1_700_000_000_000 + i / 100,
        log_id: raftmq_raft_log::types::LogId::new_term_index(1, i / 32),
    };
    let mut step = |i: u64| {
        let seq = (i / 4).to_string();
        let props = [
            (PRODUCER_ID_PROPERTY, PRODUCERS[(i % 4) as usize]),
            (SEQUENCE_PROPERTY, seq.as_str()),
        ];
        let s = send(i);
        w.expire(s.store_timestamp_ms, params);
        let identity = Identity::of(&props).expect("identity");
        match w.lookup_with(|keys| identity.write_key(keys, "bench")) {
            Err(unseen) => w.remember(unseen, s),
            Ok(_) => panic!("send {i} seen twice"),
        }
    };
    (0..200_000).for_each(&mut step);
    let n = 1_000_000u64;
    let t = Instant::now();
    (200_000..200_000 + n).for_each(&mut step);
    report(
        "dedup window, full (key+expire+lookup+remember)",
        n,
        0,
        t.elapsed(),
    );
    assert_eq!(w.len(), 100_000);
    // Apply copies the window for each background checkpoint, under the state lock.
    let rounds = 20;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(w.clone());
    }
    report(
        "dedup window, full: copy (checkpoint)",
        rounds,
        0,
        t.elapsed(),
    );
}

fn main() {
    bench_parse(128);
    bench_parse(1024);
    bench_cq();
    bench_index();
    bench_filter();
    bench_dedup();
}
