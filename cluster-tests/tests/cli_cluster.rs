//! End to end: the real `raftmq` and `raftmq-node` binaries, a real three-node cluster in a
//! temp dir (free ports, 1 MiB segments).

use cluster_tests::cli;
use cluster_tests::cli::LocalCluster;

fn leader_of(status: &serde_json::Value) -> u64 {
    status["leader_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no leader in {status}"))
}

#[test]
fn cluster_up_send_consume_kill_start_down() {
    let (c, status) = LocalCluster::up(3);
    // Status JSON shape.
    let nodes = status["nodes"].as_array().expect("nodes array");
    assert_eq!(nodes.len(), 3, "{status}");
    for n in nodes {
        assert!(
            n["id"].is_u64()
                && n["role"].is_string()
                && n["client_addr"].is_string()
                && n["rocketmq_addr"].is_string(),
            "{n}"
        );
        assert_eq!(n["running"], true, "{n}");
    }
    let leader = leader_of(&status);
    // `--set` reached every node's config and the manifest (for nodes added later).
    let manifest = std::fs::read_to_string(&c.manifest).expect("manifest");
    assert!(manifest.contains("disk-reject-ratio=1.0"), "{manifest}");
    for id in 1..=3 {
        let p = c.dir.path().join(format!("node-{id}/node.toml"));
        let cfg = std::fs::read_to_string(&p).expect("node.toml");
        assert!(cfg.contains("disk-reject-ratio = 1.0"), "{cfg}");
    }

    // Send: JSON shape of a single send.
    let sent = c.json(&["send", "--topic", "e2e", "--key", "k1", "--body", "hello"]);
    for f in ["msg_id", "queue_id", "queue_offset", "phys_offset"] {
        assert!(sent[f].is_u64() || sent[f].is_i64(), "{f} in {sent}");
    }
    let sent_n = c.json(&[
        "send", "--topic", "e2e", "--count", "20", "--size", "64", "--batch", "5",
    ]);
    assert_eq!(sent_n["messages"], 20, "{sent_n}");

    // Consume everything back (NDJSON, one object per line).
    let out = cli::ok(&c.args(&["consume", "--topic", "e2e", "--json"]));
    let msgs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(msgs.len(), 21, "{out}");
    assert!(msgs.iter().any(|m| m["body"] == "hello"), "{out}");

    // Query by id and by key.
    let id = sent["msg_id"].as_u64().unwrap().to_string();
    let by_id = c.json(&["query", "--id", &id]);
    assert_eq!(by_id[0]["body"], "hello", "{by_id}");
    let by_key = c.json(&["query", "--key", "k1", "--topic", "e2e"]);
    assert_eq!(by_key[0]["body"], "hello", "{by_key}");
    let topics = c.json(&["topic", "list"]);
    assert!(
        topics
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "e2e" && t["messages"] == 21),
        "{topics}"
    );

    // Bench JSON shapes.
    let b = c.json(&[
        "bench",
        "produce",
        "--count",
        "50",
        "--size",
        "32",
        "--producers",
        "2",
        "--in-flight",
        "2",
    ]);
    assert_eq!(b["kind"], "produce", "{b}");
    assert_eq!(b["messages"], 50, "{b}");
    assert!(
        b["latency"]["p99_us"].is_u64() && b["messages_per_s"].is_f64(),
        "{b}"
    );
    let b = c.json(&["bench", "consume", "--topic", "bench", "--node", "1"]);
    assert_eq!(b["kind"], "consume", "{b}");
    assert_eq!(b["messages"], 50, "{b}");

    // Consumer group: commits and resumes.
    let first = cli::ok(&c.args(&["consume", "--topic", "e2e", "--group", "g1", "--json"]));
    assert_eq!(first.lines().count(), 21);
    let again = cli::ok(&c.args(&["consume", "--topic", "e2e", "--group", "g1", "--json"]));
    assert_eq!(again.lines().count(), 0, "{again}");

    // Kill the leader: a new one is elected, sends work again.
    let l = leader.to_string();
    let killed = c.json(&["cluster", "kill", &l]);
    assert_eq!(killed["changed"], true);
    let after = wait_new_leader(&c, leader);
    assert_ne!(after, leader);
    c.json(&["send", "--topic", "e2e", "--body", "after-failover"]);
    let started = c.json(&["cluster", "start", &l]);
    assert_eq!(started["changed"], true);

    // `cluster up` again on the same dir restarts nothing (all running) and keeps the data.
    let d = c.dir.path().display().to_string();
    let status = cli::json(&["cluster", "up", "--dir", &d, "--json"]);
    assert_eq!(status["nodes"].as_array().unwrap().len(), 3);

    let down = c.json(&["cluster", "down"]);
    assert_eq!(down["stopped"].as_array().unwrap().len(), 3, "{down}");
    assert!(c.pids().is_empty());
}

fn wait_new_leader(c: &LocalCluster, old: u64) -> u64 {
    for _ in 0..100 {
        let s = c.json(&["cluster", "status"]);
        if let Some(l) = s["leader_id"].as_u64() {
            if l != old {
                return l;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("no new leader after killing node {old}");
}

#[test]
fn failover_test_passes_on_a_healthy_cluster() {
    let (c, _) = LocalCluster::up(3);
    let out = cli::run(&c.args(&[
        "failover-test",
        "--duration",
        "8s",
        "--kill-every",
        "3s",
        "--down-for",
        "1s",
        "--producers",
        "2",
        "--json",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(summary["verdict"], "PASS", "{summary}");
    assert_eq!(out.status.code(), Some(0));
    assert!(summary["acknowledged"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["faults"].as_u64().unwrap() >= 1, "{summary}");
    assert_eq!(summary["lost"], 0);
}
