//! Real `raftmq-node` processes with TLS: sends through `raftmq_client` with the CA, and a
//! certificate + CA rotation picked up on SIGHUP alone (file polling off) without a restart:
//! afterwards new connections to every node present a certificate of the new CA.

use std::time::Duration;
use std::time::Instant;

use cluster_tests::process::ProcCluster;
use cluster_tests::raw::msg;
use raftmq_cli::certs::ClusterCa;
use raftmq_client::ClientOptions;
use raftmq_client::ClientTls;
use raftmq_node::config::FlushPolicy;

fn client(seeds: &[String], tls: ClientTls, attempts: u32) -> raftmq_client::Client {
    let opts = ClientOptions {
        max_attempts: attempts,
        request_timeout: Duration::from_secs(5),
        tls: Some(tls),
        ..ClientOptions::default()
    };
    raftmq_client::Client::new(seeds, opts).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_processes_serve_and_reload_on_sighup() {
    let mut cluster = ProcCluster::start_tls(&[FlushPolicy::Sync; 3]).expect("start");
    // SIGHUP only: no file polling.
    for cfg in &mut cluster.configs {
        cfg.tls.tls_reload_interval_ms = 0;
    }
    for id in cluster.ids() {
        cluster.kill9(id).expect("kill");
        cluster.spawn(id).expect("respawn with polling off");
    }
    let tls = cluster.tls.as_ref().expect("secure");
    let c = client(&cluster.seeds(), tls.client_tls(), 20);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match c.send(msg("proc-tls", b"first")).await {
            Ok(_) => break,
            Err(e) => assert!(Instant::now() < deadline, "no send over TLS: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let new_ca = ClusterCa::generate(&tls.cluster_id).expect("ca");
    let old = std::fs::read_to_string(&tls.ca_file).expect("ca");
    tls.write_ca_bundle(&[old, new_ca.cert_pem()])
        .expect("bundle");
    for id in cluster.ids() {
        tls.rotate_node(&new_ca, id).expect("rotate");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let only_new = dir.path().join("new.crt");
    std::fs::write(&only_new, new_ca.cert_pem()).expect("write");
    let only_new = ClientTls::from_ca_file(&only_new).expect("pem");
    // Not yet reloaded: the files changed but nobody polls them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seed = [cluster.client_addr(1)];
    client(&seed, only_new.clone(), 1)
        .cluster_status()
        .await
        .expect_err("still the old certificate before SIGHUP");
    for id in cluster.ids() {
        cluster.hangup(id).expect("SIGHUP");
    }
    for id in cluster.ids() {
        let seed = [cluster.client_addr(id)];
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = client(&seed, only_new.clone(), 1).cluster_status().await {
            assert!(
                Instant::now() < deadline,
                "node {id} kept its old certificate: {e}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    c.send(msg("proc-tls", b"after"))
        .await
        .expect("send after the reload");
}
