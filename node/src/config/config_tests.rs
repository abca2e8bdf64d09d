//! Tests of [`NodeConfig`] and [`NodeArgs`].

use std::path::Path;

use clap::Parser;

use super::*;

fn field_of(err: ConfigError) -> &'static str {
    match err {
        ConfigError::Invalid { field, .. } => field,
        other => panic!("expected Invalid, got {other}"),
    }
}

#[test]
fn defaults_are_valid() {
    NodeConfig::default().validate().expect("defaults valid");
    let from_empty = NodeConfig::from_toml_str("", Path::new("empty.toml")).expect("parses");
    assert_eq!(from_empty, NodeConfig::default());
}

#[test]
fn each_invalid_field_is_named() {
    type Breaker = fn(&mut NodeConfig);
    let cases: Vec<(&str, Breaker)> = vec![
        ("node-id", |c| c.node_id = 0),
        ("cluster-id", |c| c.cluster_id = String::new()),
        ("cluster-id", |c| c.cluster_id = "a b".into()),
        ("data-dir", |c| c.data_dir = "".into()),
        ("raft-advertised-addr", |c| {
            c.raft_listen_addr = "0.0.0.0:9101".parse().unwrap()
        }),
        ("raft-advertised-addr", |c| {
            c.raft_advertised_addr = Some("nohost".into())
        }),
        ("client-advertised-addr", |c| {
            c.client_listen_addr = "0.0.0.0:1".parse().unwrap()
        }),
        ("client-advertised-addr", |c| {
            c.client_advertised_addr = Some(":80".into())
        }),
        ("client-listen-addr", |c| {
            c.client_listen_addr = c.raft_listen_addr
        }),
        ("rocketmq-advertised-addr", |c| {
            c.rocketmq_listen_addr = Some("0.0.0.0:9401".parse().unwrap())
        }),
        ("rocketmq-advertised-addr", |c| {
            c.rocketmq_advertised_addr = Some("nohost".into())
        }),
        ("rocketmq-listen-addr", |c| {
            c.rocketmq_listen_addr = Some(c.client_listen_addr)
        }),
        ("join-addr", |c| c.join_addr = Some("x".into())),
        ("rocketmq-fifo-groups", |c| {
            c.rocketmq_fifo_groups = vec!["ok".into(), "bad group".into()];
        }),
        ("rocketmq-fifo-groups", |c| {
            c.rocketmq_fifo_groups = vec![String::new()]
        }),
        ("initial-members", |c| {
            c.initial_members = vec!["2=a:1/a:2".parse().unwrap()];
        }),
        ("initial-members", |c| {
            c.initial_members = vec!["1=a:1/a:2".parse().unwrap(), "1=b:1/b:2".parse().unwrap()];
        }),
        ("initial-members", |c| {
            c.initial_members = vec!["1=a:1/a:2".parse().unwrap()];
            c.join_addr = Some("h:1".into());
        }),
        ("flush-interval-ms", |c| c.log.flush_interval_ms = 0),
        ("segment-bytes", |c| c.log.segment_bytes = 1000),
        ("segment-bytes", |c| c.log.segment_bytes = 20 << 20),
        ("segment-bytes", |c| c.log.segment_bytes = 32 << 10),
        ("segment-bytes", |c| c.log.segment_bytes = 8 << 30),
        ("election-timeout-min-ms", |c| {
            c.election_timeout_min_ms = 10
        }),
        ("election-timeout-max-ms", |c| {
            c.election_timeout_max_ms = c.election_timeout_min_ms
        }),
        ("heartbeat-ms", |c| c.heartbeat_ms = 600),
        ("heartbeat-ms", |c| c.heartbeat_ms = 5),
        ("heartbeat-ms", |c| {
            c.heartbeat_ms = c.election_timeout_min_ms / 2 + 1
        }),
        ("send-timeout-ms", |c| c.send_timeout_ms = 10),
        ("replication-timeout-ms", |c| c.replication_timeout_ms = 99),
        ("replication-timeout-ms", |c| {
            c.replication_timeout_ms = 600_001
        }),
        ("max-message-bytes", |c| {
            c.store.limits.max_message_bytes = 10
        }),
        ("max-batch-messages", |c| {
            c.store.limits.max_batch_messages = 0
        }),
        ("max-batch-bytes", |c| c.store.limits.max_batch_bytes = 1024),
        ("grpc-max-message-bytes", |c| {
            c.grpc_max_message_bytes = 16 << 20
        }),
        ("default-queue-count", |c| c.default_queue_count = 0),
        ("file-reserved-hours", |c| c.store.file_reserved_hours = 0),
        ("cq-units-per-file", |c| {
            c.store.consume_queue.units_per_file = 0
        }),
        ("index-slots-per-file", |c| c.store.index.slots_per_file = 0),
        ("index-units-per-file", |c| {
            c.store.index.max_units_per_file = 100_000_001
        }),
        ("disk-clean-ratio", |c| c.store.disk_clean_ratio = 1.5),
        ("disk-reject-ratio", |c| c.store.disk_reject_ratio = 0.5),
        ("disk-reject-ratio", |c| c.store.disk_reject_ratio = 1.01),
        ("disk-reject-ratio", |c| {
            c.store.disk_clean_ratio = 1.0;
            c.store.disk_reject_ratio = 0.95
        }),
        ("log-level", |c| c.log_level = "info,[".into()),
        ("worker-threads", |c| c.worker_threads = 1025),
        ("dedup-window-ms", |c| c.store.dedup_window_ms = 86_400_001),
        ("dedup-max-entries", |c| c.store.dedup_max_entries = 0),
        ("max-topics", |c| c.store.limits.max_topics = 0),
        ("max-groups", |c| c.store.limits.max_groups = 1_000_001),
        ("max-queues-per-topic", |c| {
            c.store.limits.max_queues_per_topic = 0
        }),
        ("max-snapshot-bytes", |c| c.max_snapshot_bytes = 1000),
        ("max-snapshot-bytes", |c| {
            c.max_snapshot_bytes = (1 << 50) + 1
        }),
        ("max-long-poll-waiters", |c| {
            c.max_long_poll_waiters = 1_000_001
        }),
        ("max-stream-inflight-bytes", |c| {
            c.max_stream_inflight_bytes = 1000
        }),
        ("max-stream-inflight-bytes", |c| {
            c.max_stream_inflight_bytes = (4 << 30) + 1
        }),
        ("max-group-proposals", |c| c.max_group_proposals = 1025),
    ];
    for (want, brk) in cases {
        let mut c = NodeConfig::default();
        brk(&mut c);
        let err = c.validate().expect_err(want);
        let msg = err.to_string();
        assert_eq!(field_of(err), want, "{msg}");
        assert!(msg.contains(want), "{msg}");
    }
}

#[test]
fn toml_round_trip() {
    let mut c = NodeConfig {
        node_id: 2,
        cluster_id: "prod-1".into(),
        log: LogConfig {
            flush: FlushPolicy::Async,
            flush_interval_ms: 50,
            ..Default::default()
        },
        topic_auto_create: false,
        metrics_addr: None,
        join_addr: None,
        store: StoreConfig {
            disk_clean_ratio: 0.6,
            ..Default::default()
        },
        ..Default::default()
    };
    c.initial_members = vec![
        "1=127.0.0.1:9101/127.0.0.1:9201".parse().unwrap(),
        "2=127.0.0.1:9102/127.0.0.1:9202".parse().unwrap(),
    ];
    c.validate().expect("valid");
    let text = c.to_toml_string();
    assert!(text.contains("flush-policy = \"async\""), "{text}");
    assert!(
        text.contains("\"1=127.0.0.1:9101/127.0.0.1:9201\""),
        "{text}"
    );
    let back = NodeConfig::from_toml_str(&text, Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
}

#[test]
fn every_key_is_written_and_read_back() {
    let mut c = NodeConfig {
        raft_advertised_addr: Some("h:1".into()),
        client_advertised_addr: Some("h:2".into()),
        join_addr: Some("h:3".into()),
        rocketmq_advertised_addr: Some("h:4".into()),
        ..Default::default()
    };
    c.tls.tls_cert_file = Some("n.crt".into());
    c.tls.tls_key_file = Some("n.key".into());
    c.tls.tls_ca_file = Some("ca.crt".into());
    c.store.consume_queue.units_per_file = 7;
    c.store.index.max_units_per_file = 9;
    c.auth.auth_key_file = Some("/k".into());
    c.auth.auth_admin_file = Some("/a".into());
    let text = c.to_toml_string();
    let written: Vec<&str> = text.lines().filter_map(|l| l.split(" = ").next()).collect();
    assert_eq!(written, file::file_keys(), "{text}");
    assert!(text.contains("cq-units-per-file = 7\n"), "{text}");
    assert!(text.contains("index-units-per-file = 9\n"), "{text}");
    let back = NodeConfig::from_toml_str(&text, Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
}

#[test]
fn rocketmq_service_is_on_by_default_and_can_be_turned_off() {
    let d = NodeConfig::default();
    assert_eq!(d.rocketmq_addr().as_deref(), Some("127.0.0.1:9401"));
    let off = NodeConfig::from_toml_str("rocketmq-listen-addr = \"\"\n", Path::new("t.toml"))
        .expect("parses");
    assert_eq!(off.rocketmq_listen_addr, None);
    assert_eq!(off.rocketmq_addr(), None);
    let off = NodeArgs::try_parse_from(["raftmq-node", "--no-rocketmq"])
        .expect("flags parse")
        .resolve()
        .expect("valid");
    assert_eq!(off.rocketmq_listen_addr, None);
    let public = NodeArgs::try_parse_from([
        "raftmq-node",
        "--rocketmq-listen-addr",
        "0.0.0.0:8081",
        "--rocketmq-advertised-addr",
        "mq-1.example.com:8081",
        "--allow-plaintext",
        "true",
    ])
    .expect("flags parse")
    .resolve()
    .expect("valid");
    assert_eq!(
        public.rocketmq_addr().as_deref(),
        Some("mq-1.example.com:8081")
    );
    assert!(NodeArgs::try_parse_from([
        "raftmq-node",
        "--no-rocketmq",
        "--rocketmq-listen-addr",
        "127.0.0.1:1"
    ])
    .is_err());
}

#[test]
fn unknown_keys_and_bad_members_fail_to_parse() {
    let err =
        NodeConfig::from_toml_str("nodeid = 3", Path::new("x.toml")).expect_err("unknown key");
    assert!(err.to_string().contains("nodeid"), "{err}");
    // Fields of the crate configs that have no flag are not keys either.
    for (text, key) in [
        (
            "node-id = 2\npreallocate = false\n",
            "`preallocate` (line 2)",
        ),
        ("[limits]\nmax-tag-bytes = 1\n", "`limits` (line 1)"),
        ("checkpoint-every-entries = 5", "`checkpoint-every-entries`"),
        ("max-tag-bytes = 5", "`max-tag-bytes`"),
    ] {
        let err = NodeConfig::from_toml_str(text, Path::new("x.toml")).expect_err(key);
        assert!(err.to_string().contains(key), "{err}");
    }
    let err = NodeConfig::from_toml_str("\nsegment-bytes = \"big\"", Path::new("x.toml"))
        .expect_err("bad type");
    assert!(
        err.to_string().contains("`segment-bytes` (line 2)"),
        "{err}"
    );
    assert!(err.to_string().contains("big"), "{err}");
    let err = NodeConfig::from_toml_str("initial-members = [\"1=a\"]", Path::new("x.toml"))
        .expect_err("bad member");
    assert!(
        err.to_string()
            .contains("id=raft_host:port/client_host:port"),
        "{err}"
    );
}

#[test]
fn flags_override_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node.toml");
    std::fs::write(
        &path,
        "node-id = 3\ncluster-id = \"from-file\"\nheartbeat-ms = 70\nflush-policy = \"async\"\n\
         max-batch-messages = 32\n",
    )
    .expect("write");
    let args = NodeArgs::try_parse_from([
        "raftmq-node",
        "--config",
        path.to_str().expect("utf-8 path"),
        "--cluster-id",
        "from-flag",
        "--initial-members",
        "1=127.0.0.1:9101/127.0.0.1:9201,3=127.0.0.1:9103/127.0.0.1:9203",
        "--metrics-addr",
        "127.0.0.1:0",
    ])
    .expect("flags parse");
    let cfg = args.resolve().expect("valid");
    assert_eq!(cfg.node_id, 3, "from file");
    assert_eq!(cfg.heartbeat_ms, 70, "from file");
    assert_eq!(cfg.log.flush, FlushPolicy::Async, "from file");
    assert_eq!(cfg.store.limits.max_batch_messages, 32, "from file");
    assert_eq!(cfg.cluster_id, "from-flag", "flag wins");
    assert_eq!(cfg.initial_members.len(), 2);
    assert_eq!(cfg.metrics_addr, Some("127.0.0.1:0".parse().unwrap()));
    assert_eq!(cfg.send_timeout_ms, 3000, "default");

    let cfg = NodeArgs::try_parse_from([
        "raftmq-node",
        "--flush-policy",
        "async",
        "--flush-interval-ms",
        "7",
        "--zero-ahead",
        "false",
        "--recycle-segments",
        "3",
        "--log-cache-bytes",
        "0",
        "--write-stage-bytes",
        "2097152",
        "--cq-units-per-file",
        "64",
        "--index-units-per-file",
        "65",
        "--file-reserved-hours",
        "2",
        "--max-message-bytes",
        "2048",
        "--max-batch-messages",
        "16",
        "--max-batch-bytes",
        "65536",
    ])
    .expect("flags parse")
    .resolve()
    .expect("valid");
    assert_eq!(cfg.log.flush, FlushPolicy::Async);
    assert_eq!(cfg.log.flush_interval_ms, 7);
    assert!(!cfg.log.zero_ahead);
    assert_eq!(cfg.log.recycle_segments, 3);
    assert_eq!(cfg.log.log_cache_bytes, 0);
    assert_eq!(cfg.log.write_stage_bytes, 2 << 20);
    assert_eq!(cfg.store.consume_queue.units_per_file, 64);
    assert_eq!(cfg.store.index.max_units_per_file, 65);
    assert_eq!(cfg.store.file_reserved_hours, 2);
    let l = &cfg.store.limits;
    assert_eq!(
        (l.max_message_bytes, l.max_batch_messages, l.max_batch_bytes),
        (2048, 16, 65536)
    );
    assert!(NodeArgs::try_parse_from(["raftmq-node", "--flush-policy", "fast"]).is_err());

    let bad = NodeArgs::try_parse_from(["raftmq-node", "--heartbeat-ms", "5000"])
        .expect("flags parse")
        .resolve()
        .expect_err("invalid");
    assert_eq!(field_of(bad), "heartbeat-ms");
}

#[test]
fn fifo_groups_from_file_and_flags() {
    let d = NodeConfig::default();
    assert!(d.rocketmq_fifo_groups.is_empty(), "default: no FIFO group");
    assert!(!d.is_fifo_group("orders"));
    let c = NodeConfig::from_toml_str(
        "rocketmq-fifo-groups = [\"orders\", \"billing\"]\n",
        Path::new("x.toml"),
    )
    .expect("parses");
    assert_eq!(c.rocketmq_fifo_groups, ["orders", "billing"]);
    assert!(c.is_fifo_group("orders") && c.is_fifo_group("billing"));
    assert!(!c.is_fifo_group("order"));
    c.validate().expect("valid");
    let back = NodeConfig::from_toml_str(&c.to_toml_string(), Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
    let cfg = NodeArgs::try_parse_from(["raftmq-node", "--rocketmq-fifo-groups", "a,b-2"])
        .expect("flags parse")
        .resolve()
        .expect("valid");
    assert_eq!(cfg.rocketmq_fifo_groups, ["a", "b-2"]);
    let bad = NodeArgs::try_parse_from(["raftmq-node", "--rocketmq-fifo-groups", "a,b c"])
        .expect("flags parse")
        .resolve()
        .expect_err("invalid name");
    assert_eq!(field_of(bad), "rocketmq-fifo-groups");
}

#[test]
fn replication_timeout_from_file_and_flags() {
    assert_eq!(
        NodeConfig::default().replication_timeout_ms,
        1000,
        "default"
    );
    let c = NodeConfig::from_toml_str("replication-timeout-ms = 2500\n", Path::new("x.toml"))
        .expect("parses");
    assert_eq!(c.replication_timeout_ms, 2500);
    c.validate().expect("valid");
    let back = NodeConfig::from_toml_str(&c.to_toml_string(), Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
    let cfg = NodeArgs::try_parse_from(["raftmq-node", "--replication-timeout-ms", "300"])
        .expect("flags parse")
        .resolve()
        .expect("valid");
    assert_eq!(cfg.replication_timeout_ms, 300);
    assert_eq!(
        cfg.peer_network_options().replication_timeout,
        std::time::Duration::from_millis(300)
    );
    let bad = NodeArgs::try_parse_from(["raftmq-node", "--replication-timeout-ms", "50"])
        .expect("flags parse")
        .resolve()
        .expect_err("too short");
    assert_eq!(field_of(bad), "replication-timeout-ms");
}

#[test]
fn dedup_settings_from_file_and_flags() {
    let d = NodeConfig::default();
    assert_eq!(
        (d.store.dedup_window_ms, d.store.dedup_max_entries),
        (120_000, 100_000)
    );
    let c = NodeConfig::from_toml_str(
        "dedup-window-ms = 0\ndedup-max-entries = 5\n",
        Path::new("x.toml"),
    )
    .expect("parses");
    c.validate().expect("0 turns deduplication off");
    assert_eq!((c.store.dedup_window_ms, c.store.dedup_max_entries), (0, 5));
    assert_eq!(c.store.dedup_params(), None);
    let back = NodeConfig::from_toml_str(&c.to_toml_string(), Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
    let cfg = NodeArgs::try_parse_from(["raftmq-node", "--dedup-window-ms", "5000"])
        .expect("flags parse")
        .resolve()
        .expect("valid");
    assert_eq!(cfg.store.dedup_window_ms, 5000);
    let bad = NodeArgs::try_parse_from(["raftmq-node", "--dedup-max-entries", "0"])
        .expect("flags parse")
        .resolve()
        .expect_err("invalid");
    assert_eq!(field_of(bad), "dedup-max-entries");
}

#[test]
fn limit_settings_from_file_and_flags() {
    let d = NodeConfig::default();
    assert_eq!(
        (
            d.max_snapshot_bytes,
            d.max_long_poll_waiters,
            d.max_stream_inflight_bytes,
            d.max_group_proposals,
            d.store.limits.max_topics,
            d.store.limits.max_queues_per_topic,
        ),
        (0, 4096, 64 << 20, 1, 10_000, 1024)
    );
    let c = NodeConfig::from_toml_str(
        "max-snapshot-bytes = 1048576\nmax-long-poll-waiters = 0\n\
         max-stream-inflight-bytes = 2097152\nmax-group-proposals = 0\nmax-topics = 3\n\
         max-queues-per-topic = 8\n\
         max-groups = 9\nworker-threads = 1\n",
        Path::new("x.toml"),
    )
    .expect("parses");
    c.validate().expect("valid");
    assert_eq!(c.max_snapshot_bytes, 1 << 20);
    assert_eq!(c.max_long_poll_waiters, 0);
    assert_eq!(c.max_stream_inflight_bytes, 2 << 20);
    assert_eq!(c.max_group_proposals, 0);
    assert_eq!(c.store.limits.max_topics, 3);
    assert_eq!(c.store.limits.max_queues_per_topic, 8);
    assert_eq!(c.store.limits.max_groups, 9);
    assert_eq!((d.worker_threads, c.worker_threads), (0, 1));
    let back = NodeConfig::from_toml_str(&c.to_toml_string(), Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
    let cfg = NodeArgs::try_parse_from([
        "raftmq-node",
        "--max-topics",
        "5",
        "--max-long-poll-waiters",
        "7",
        "--max-snapshot-bytes",
        "0",
        "--worker-threads",
        "3",
    ])
    .expect("flags parse")
    .resolve()
    .expect("valid");
    assert_eq!(cfg.store.limits.max_topics, 5);
    assert_eq!(cfg.max_long_poll_waiters, 7);
    assert_eq!(cfg.worker_threads, 3);
    let bad = NodeArgs::try_parse_from(["raftmq-node", "--max-snapshot-bytes", "5"])
        .expect("flags parse")
        .resolve()
        .expect_err("invalid");
    assert_eq!(field_of(bad), "max-snapshot-bytes");
}
