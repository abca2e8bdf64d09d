//! The local cluster manifest (`cluster.toml`) under concurrent `raftmq` commands, with the
//! real binaries: several `raftmq cluster start` processes at once keep every node's pid, and
//! `cluster down --purge` refuses to delete the directory of a node that still runs although
//! the manifest lost its pid.

use std::process::Command;

use cluster_tests::cli;
use cluster_tests::cli::LocalCluster;

/// True while `pid` is a live raftmq-node process (not a zombie).
fn node_runs(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    !zombie && String::from_utf8_lossy(&cmdline).contains("raftmq-node")
}

/// Pids of the raftmq-node processes started with a config under `dir`.
fn nodes_under(dir: &std::path::Path) -> Vec<u32> {
    let want = dir.display().to_string();
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&pid| {
                    let c = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let c = String::from_utf8_lossy(&c);
                    c.contains("raftmq-node") && c.contains(&want) && node_runs(pid)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every node of `dir`, also those whose pid the manifest lost (nothing may outlive the
/// test).
fn kill_all_under(dir: &std::path::Path) {
    for pid in nodes_under(dir) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

#[test]
fn concurrent_starts_keep_every_pid() {
    let (c, _) = LocalCluster::up(3);
    for round in 0..3 {
        for id in ["1", "2", "3"] {
            cli::ok(&c.args(&["cluster", "kill", id]));
        }
        assert!(c.pids().is_empty(), "round {round}: pids left after kill");
        let starters: Vec<_> = ["1", "2", "3"]
            .into_iter()
            .map(|id| {
                let args: Vec<String> = c
                    .args(&["cluster", "start", id])
                    .into_iter()
                    .map(String::from)
                    .collect();
                std::thread::spawn(move || {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    cli::ok(&args)
                })
            })
            .collect();
        for s in starters {
            s.join().expect("a cluster start thread");
        }
        let pids = c.pids();
        if pids.len() != 3 {
            kill_all_under(c.dir.path());
        }
        assert_eq!(
            pids.len(),
            3,
            "round {round}: the manifest lost pids of concurrently started nodes: {pids:?}\n{}",
            std::fs::read_to_string(&c.manifest).unwrap_or_default()
        );
        assert!(
            pids.iter().all(|&p| node_runs(p)),
            "round {round}: {pids:?}"
        );
    }
}

#[test]
fn purge_refuses_while_a_node_runs_without_its_pid() {
    let (c, _) = LocalCluster::up(3);
    let pids = c.pids();
    assert_eq!(pids.len(), 3);
    // Lose node 2's pid, as a race between two writers of the manifest did.
    let text = std::fs::read_to_string(&c.manifest).expect("manifest");
    let mut m: toml::Value = toml::from_str(&text).expect("manifest is TOML");
    let nodes = m["nodes"].as_array_mut().expect("nodes");
    let orphan = nodes
        .iter_mut()
        .find(|n| n["id"].as_integer() == Some(2))
        .expect("node 2")
        .as_table_mut()
        .expect("a table")
        .remove("pid")
        .and_then(|p| p.as_integer())
        .expect("node 2 had a pid") as u32;
    std::fs::write(&c.manifest, toml::to_string(&m).expect("encode")).expect("write");

    let out = cli::run(&c.args(&["cluster", "down", "--purge"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let still_there = c.dir.path().join("node-2").exists();
    let orphan_runs = node_runs(orphan);
    // Clean up before asserting: nothing may outlive the test.
    let _ = Command::new("kill")
        .args(["-9", &orphan.to_string()])
        .status();
    assert!(
        !out.status.success(),
        "down --purge succeeded while node 2 (pid {orphan}) ran: {stderr}"
    );
    assert!(
        still_there,
        "the data directory of a running node was deleted"
    );
    assert!(
        orphan_runs,
        "node 2 should not have been stopped without its pid"
    );
    assert!(
        stderr.contains("node 2") && stderr.contains(&orphan.to_string()),
        "the refusal should name the node and its pid: {stderr}"
    );
    // Node 2 is gone now: purge goes ahead.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while node_runs(orphan) && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    cli::ok(&c.args(&["cluster", "down", "--purge"]));
    assert!(!c.dir.path().join("node-1").exists());
}
