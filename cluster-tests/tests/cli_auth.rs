//! The real `raftmq` binary on a cluster made with `cluster up --secure`: every command signs
//! with the admin credential `cluster.toml` names; `user create/list/delete` (and `--json`);
//! `RAFTMQ_ACCESS_KEY`/`RAFTMQ_SECRET_KEY` override it, and a refused call prints the
//! server's reason.

use cluster_tests::cli;
use cluster_tests::cli::LocalCluster;

fn stderr_of(out: &std::process::Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn secure_cluster_users_and_env_override() {
    let (c, status) = LocalCluster::up_with(3, &["--secure"]);
    assert_eq!(
        status["nodes"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );
    let manifest = std::fs::read_to_string(&c.manifest).expect("manifest");
    assert!(
        manifest.contains("access-key = ") && manifest.contains("secret-file = "),
        "{manifest}"
    );
    let node_cfg =
        std::fs::read_to_string(c.dir.path().join("node-1/node.toml")).expect("node.toml");
    assert!(node_cfg.contains("auth-enabled = true"), "{node_cfg}");

    // The admin credential from cluster.toml: no flags needed.
    c.json(&["topic", "create", "orders", "--queues", "2"]);
    c.json(&["send", "--topic", "orders", "--body", "from admin"]);

    let created = c.json(&[
        "user", "create", "shop", "--role", "producer", "--topics", "orders*",
    ]);
    let ak = created["access_key"]
        .as_str()
        .expect("access_key")
        .to_string();
    let sk = created["secret_key"]
        .as_str()
        .expect("secret_key")
        .to_string();
    assert!(ak.starts_with("AK") && sk.len() == 64, "{created}");
    let listed = c.json(&["user", "list"]);
    assert_eq!(listed[0]["name"], "shop", "{listed}");
    assert_eq!(listed[0]["role"], "producer", "{listed}");
    assert!(
        !listed.to_string().contains(&sk),
        "list shows no secret: {listed}"
    );
    let table = cli::ok(&c.args(&["user", "list"]));
    assert!(table.contains("shop") && table.contains(&ak), "{table}");

    // The producer's key through the environment overrides cluster.toml's.
    let env = [
        ("RAFTMQ_ACCESS_KEY", ak.as_str()),
        ("RAFTMQ_SECRET_KEY", sk.as_str()),
    ];
    let out = cli::run_env(
        &c.args(&["send", "--topic", "orders", "--body", "from shop"]),
        &env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = stderr_of(&cli::run_env(&c.args(&["topic", "delete", "orders"]), &env));
    assert!(
        err.contains("role producer (user 'shop') may not DeleteTopic"),
        "{err}"
    );
    let err = stderr_of(&cli::run_env(&c.args(&["user", "list"]), &env));
    assert!(err.contains("may not ListUsers"), "{err}");
    let wrong = [
        ("RAFTMQ_ACCESS_KEY", ak.as_str()),
        ("RAFTMQ_SECRET_KEY", "nope"),
    ];
    let err = stderr_of(&cli::run_env(
        &c.args(&["send", "--topic", "orders", "--body", "x"]),
        &wrong,
    ));
    assert!(err.contains("bad signature"), "{err}");
    let half = [("RAFTMQ_ACCESS_KEY", ak.as_str())];
    let err = stderr_of(&cli::run_env(&c.args(&["topic", "list"]), &half));
    assert!(err.contains("--access-key needs --secret-key"), "{err}");

    // Without any credential (--servers skips cluster.toml; the CA is given): refused with
    // the reason.
    let addr = status["nodes"][0]["client_addr"]
        .as_str()
        .expect("addr")
        .to_string();
    let ca = c.dir.path().join("tls/ca.crt").display().to_string();
    let err = stderr_of(&cli::run(&[
        "topic",
        "list",
        "--servers",
        &addr,
        "--tls-ca",
        &ca,
    ]));
    assert!(err.contains("missing authorization"), "{err}");

    c.json(&["user", "delete", "shop"]);
    assert_eq!(c.json(&["user", "list"]).as_array().map(Vec::len), Some(0));
    let err = stderr_of(&cli::run_env(
        &c.args(&["send", "--topic", "orders", "--body", "x"]),
        &env,
    ));
    assert!(err.contains("unknown access key"), "{err}");
    // Everything else still works for the admin.
    let st = c.json(&["cluster", "status"]);
    assert!(
        st["leader"].is_u64() || st["leader_id"].is_u64() || st.to_string().contains("leader"),
        "{st}"
    );
}
