//! `raftmq bench suite` end to end: the real binaries, a fresh local cluster per case in a
//! temp dir, the disk measured there; checks the JSON and table shape (figures are not
//! asserted: the machine is shared) and that nothing is left behind.

use cluster_tests::cli;

fn rows_of<'a>(report: &'a serde_json::Value, case: &str) -> Vec<&'a serde_json::Value> {
    report["rows"]
        .as_array()
        .expect("rows array")
        .iter()
        .filter(|r| r["case"] == case)
        .collect()
}

#[test]
fn suite_json_has_the_disk_every_case_asked_and_its_targets() {
    let dir = tempfile::tempdir().expect("a temp dir can be created");
    let d = dir.path().display().to_string();
    let report = cli::json(&[
        "bench",
        "suite",
        "--duration",
        "1s",
        "--cases",
        "single,four-by-64",
        "--dir",
        &d,
        "--json",
    ]);
    assert_eq!(
        report["nproc"].as_u64().map(|n| n >= 1),
        Some(true),
        "{report}"
    );
    // Each case carries the disk probed right before its load, and its table rows start with
    // that probe's figures.
    for c in report["cases"].as_array().expect("cases array") {
        let disk = &c["disk"];
        assert!(disk["fdatasync_p50_us"].as_u64() > Some(0), "{c}");
        assert!(disk["write_sync_mib_per_s"].as_f64() > Some(0.0), "{c}");
        assert!(
            disk["page_cache_fill_mib_per_s"].as_f64() > Some(0.0),
            "{c}"
        );
        assert!(
            disk["page_cache_rewrite_mib_per_s"].as_f64() > Some(0.0),
            "{c}"
        );
        assert!(disk["new_block_sync_p50_us"].as_u64() > Some(0), "{c}");
        assert!(disk["written_block_sync_p50_us"].as_u64() > Some(0), "{c}");
        // The leader appended at least one entry for the messages the case sent.
        assert!(c["raft_entries"].as_u64() > Some(0), "{c}");
        let name = c["case"].as_str().expect("case name");
        let rows = rows_of(&report, name);
        let disk_rows: Vec<_> = rows
            .iter()
            .filter(|r| r["figure"].as_str().is_some_and(|f| f.starts_with("disk ")))
            .collect();
        assert_eq!(disk_rows.len(), 3, "{name}: {report}");
        assert_eq!(
            rows[0]["figure"], "disk 1 KiB write+fdatasync p50",
            "{report}"
        );
    }
    let cases: Vec<&str> = report["cases"]
        .as_array()
        .expect("cases array")
        .iter()
        .map(|c| c["case"].as_str().expect("case name"))
        .collect();
    assert_eq!(cases, ["single", "four-by-64"]);
    for c in report["cases"].as_array().expect("cases array") {
        assert!(c["produce"]["messages"].as_u64() > Some(0), "{c}");
    }
    let single = rows_of(&report, "single");
    let rate = single
        .iter()
        .find(|r| r["figure"] == "produce rate")
        .expect("single produce rate row");
    assert_eq!(rate["unit"], "msg/s");
    assert_eq!(rate["target"].as_f64(), Some(2158.0), "{rate}");
    assert!(rate["ratio"].as_f64() > Some(0.0), "{rate}");
    let p50 = single
        .iter()
        .find(|r| r["figure"] == "send p50")
        .expect("single p50 row");
    assert_eq!(p50["better"], "lower", "{p50}");
    let per_entry = single
        .iter()
        .find(|r| r["figure"] == "messages per Raft entry")
        .expect("single messages per entry row");
    // One producer with one send in flight: an entry holds one message (other entries, such
    // as the topic's creation, can only lower the figure).
    let v = per_entry["value"].as_f64().expect("a number");
    assert!(v > 0.5 && v <= 1.0, "{per_entry}");
    assert!(
        single
            .iter()
            .any(|r| r["figure"] == "page cache new-page write"),
        "{report}"
    );
    // Memory of the leader, sampled during and after four-by-64.
    let four = rows_of(&report, "four-by-64");
    for figure in ["leader RssAnon during", "leader RssAnon after"] {
        let row = four
            .iter()
            .find(|r| r["figure"] == figure)
            .unwrap_or_else(|| panic!("no {figure} row in {report}"));
        assert!(row["value"].as_f64() > Some(1.0), "{row}");
        assert_eq!(row["target"].as_f64(), Some(200.0), "{row}");
    }
    // The temp cluster directory went with the suite.
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn suite_table_names_every_column_the_peer_source_and_the_seeded_segments() {
    let dir = tempfile::tempdir().expect("a temp dir can be created");
    let d = dir.path().display().to_string();
    let text = cli::ok(&[
        "bench",
        "suite",
        "--duration",
        "1s",
        "--cases",
        "single",
        "--nats-figures",
        "single=1000",
        // Nodes seeded with written segments (1 MiB: a second of single sends rolls into them).
        "--segment-bytes",
        "1048576",
        "--written-segments",
        "2",
        "--dir",
        &d,
    ]);
    let first = text.lines().next().unwrap_or_default();
    for col in ["case", "figure", "value", "target", "ratio"] {
        assert!(first.contains(col), "{text}");
    }
    assert!(text.contains(">= 1000 msg/s (NATS R3 1000)"), "{text}");
    assert!(
        text.contains("NATS figures: --nats-figures single=1000"),
        "{text}"
    );
    assert!(!text.contains("four-by-64"), "{text}");
    assert!(
        text.contains("each node started with 2 written segments in its free pool"),
        "{text}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}
