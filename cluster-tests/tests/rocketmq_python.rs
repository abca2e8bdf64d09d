//! The official RocketMQ 5 Python client (`rocketmq-python-client`, unchanged) against a
//! three-node cluster through a follower's RocketMQ port: a Producer, a SimpleConsumer with
//! ChangeInvisibleDuration and a PushConsumer (`python/rocketmq_clients.py`, which exits 0 only
//! if every sent message was consumed as sent and no acked message came back).
//!
//! The client runs from a virtualenv under the target dir. `.ci/run` creates it; when it is
//! missing the test creates it the same way (`python3 -m venv`, then `pip install` of the
//! pinned version from PyPI), so `cargo test` works on a fresh machine with Python 3.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use raftmq_node::config::FlushPolicy;

/// The client version the test pins.
const CLIENT: &str = "rocketmq-python-client==5.1.2";

fn venv() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pyenv-rocketmq-5.1.2")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// The venv's python with the client installed (created on first use, once per test
/// binary: the tests run in parallel and two pip installs into one venv break each other).
fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(install_python).clone()
}

fn install_python() -> PathBuf {
    let dir = venv();
    let py = dir.join("bin/python");
    let has_client = || {
        Command::new(&py)
            .args(["-c", "import rocketmq"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_client() {
        return py;
    }
    run(Command::new("python3").arg("-m").arg("venv").arg(&dir)).unwrap_or_else(|e| {
        panic!("this test needs Python 3 with venv (apt-get install python3-venv): {e}")
    });
    run(Command::new(&py).args(["-m", "pip", "install", "--quiet", CLIENT]))
        .unwrap_or_else(|e| panic!("cannot install {CLIENT} from PyPI: {e}"));
    assert!(
        has_client(),
        "{CLIENT} installed but `import rocketmq` fails"
    );
    py
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_producer_simple_and_push_consumers() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |_| {})
        .await
        .expect("cluster starts");
    run_script(&cluster, &[]).await;
    cluster.shutdown().await.expect("shutdown");
}

/// The same clients on an authenticated cluster, each with its user's access key
/// (`Credentials(ak, sk)`): a producer of `py-*`, and a consumer of `py-*` in groups `py-*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_clients_with_access_keys() {
    let auth = cluster_tests::auth::TestAuth::new().expect("auth files");
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| auth.apply(c))
        .await
        .expect("cluster starts");
    let admin = cluster
        .client_as(Duration::from_secs(5), Some(auth.admin.clone()))
        .expect("admin");
    let mut keys = Vec::new();
    for (name, role) in [("py-shop", "producer"), ("py-reader", "consumer")] {
        let r = admin
            .create_user(name, role, vec!["py-*".into()], vec!["py-*".into()])
            .await
            .expect("create user");
        keys.push(r.user.expect("user").access_key);
        keys.push(r.secret_key);
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    run_script(&cluster, &keys).await;
    cluster.shutdown().await.expect("shutdown");
}

/// Runs the script against a follower's RocketMQ port with `extra` arguments (access keys).
async fn run_script(cluster: &TestCluster, extra: &[&str]) {
    let py = tokio::task::spawn_blocking(python).await.expect("venv");
    let (_, follower) = cluster.leader_and_follower().await.expect("a leader");
    let addr = cluster.rocketmq_addr(follower).expect("a RocketMQ port");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/rocketmq_clients.py");
    let mut child = tokio::process::Command::new(&py);
    child
        .arg(&script)
        .arg(&addr)
        .arg("py")
        .args(extra)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(240), child.output())
        .await
        .expect("the Python clients finish within 4 minutes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("PASS"),
        "{}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
