//! The real `raftmq` binary against `cluster up --secure`: TLS files under the cluster dir
//! (keys 0600), every node serving TLS, and `cluster status`, `send`, `consume`, `bench` and
//! `failover-test` working with no TLS flag (the CA comes from cluster.toml); a client
//! without the CA is refused; `--tls-ca` reaches the cluster through `--servers`.

use std::os::unix::fs::PermissionsExt;

use cluster_tests::cli;
use cluster_tests::cli::LocalCluster;

#[test]
fn secure_cluster_up_serves_tls_and_every_command_uses_its_ca() {
    let (c, status) = LocalCluster::up_with(3, &["--secure"]);
    assert!(status["leader_id"].as_u64().is_some(), "{status}");
    let tls = c.dir.path().join("tls");
    for key in ["ca.key", "node-1.key", "node-2.key", "node-3.key"] {
        let mode = std::fs::metadata(tls.join(key))
            .expect(key)
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{key}");
    }
    let manifest = std::fs::read_to_string(&c.manifest).expect("manifest");
    assert!(manifest.contains("tls-ca = "), "{manifest}");
    let node1 = std::fs::read_to_string(c.dir.path().join("node-1/node.toml")).expect("node.toml");
    assert!(node1.contains("tls-cert-file = "), "{node1}");

    let s = c.json(&["cluster", "status"]);
    let nodes = s["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 3, "{s}");
    assert!(nodes.iter().all(|n| n["error"].is_null()), "{s}");
    let sent = c.json(&["send", "--topic", "sec", "--key", "k1", "--body", "hello"]);
    assert!(sent["msg_id"].is_u64(), "{sent}");
    let n = c.json(&[
        "send", "--topic", "sec", "--count", "20", "--size", "64", "--batch", "5",
    ]);
    assert_eq!(n["messages"], 20, "{n}");
    let out = cli::ok(&c.args(&["consume", "--topic", "sec", "--json"]));
    assert_eq!(out.lines().count(), 21, "{out}");
    assert!(out.contains("hello"), "{out}");

    // Without the CA (plaintext to the TLS ports) nothing is served.
    let first = nodes[0]["client_addr"].as_str().expect("addr").to_string();
    let plain = cli::run(&["send", "--servers", &first, "--topic", "sec", "--body", "x"]);
    assert!(
        !plain.status.success(),
        "plaintext send to a TLS node succeeded"
    );
    // With --tls-ca (and the admin credential, as cluster.toml names it), a cluster reached
    // by --servers works too.
    let ca = tls.join("ca.crt").display().to_string();
    let field = |name: &str| {
        manifest
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} = ")))
            .map(|v| v.trim().trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("{name} in {manifest}"))
    };
    let ak = field("access-key");
    let secret_file = std::path::PathBuf::from(field("secret-file"));
    let secret_file = if secret_file.is_absolute() {
        secret_file
    } else {
        c.dir.path().join(secret_file)
    };
    let sk = std::fs::read_to_string(&secret_file).expect("secret file");
    let out = cli::run_env(
        &[
            "send",
            "--servers",
            &first,
            "--tls-ca",
            &ca,
            "--topic",
            "sec",
            "--body",
            "y",
        ],
        &[
            ("RAFTMQ_ACCESS_KEY", ak.as_str()),
            ("RAFTMQ_SECRET_KEY", sk.trim()),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // failover-test goes through the client library: works against TLS.
    let out = cli::run(&c.args(&[
        "failover-test",
        "--duration",
        "6s",
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
    assert!(
        summary["acknowledged"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
    assert_eq!(summary["lost"], 0, "{summary}");
}
