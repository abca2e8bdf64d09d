//! A TLS cluster in one process: sends and reads through `raftmq_client` with the CA and
//! forwarding over TLS; the peer port refuses every connection without a member certificate
//! (plain TCP, no client certificate, another CA, a non-member, another cluster) while the
//! cluster keeps serving; certificates and the CA rotate under load without a failed send.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::raw::read_all;
use cluster_tests::tls::tls_channel;
use raftmq_cli::certs::ClusterCa;
use raftmq_client::ClientOptions;
use raftmq_client::ClientTls;
use raftmq_node::config::FlushPolicy;
use raftmq_node::tls::Material;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use tonic::transport::Channel;
use tonic::Code;

const SYNC3: [FlushPolicy; 3] = [FlushPolicy::Sync; 3];

fn follower_of(leader: u64) -> u64 {
    leader % 3 + 1
}

/// A one-attempt client of `seeds` with `tls`.
fn one_shot(seeds: &[String], tls: Option<ClientTls>) -> raftmq_client::Client {
    let opts = ClientOptions {
        max_attempts: 1,
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(3),
        tls,
        ..ClientOptions::default()
    };
    raftmq_client::Client::new(seeds, opts).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster_sends_forwards_and_reads_with_the_ca() {
    let cluster = TestCluster::start_tls(&SYNC3, |_| {})
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let client = cluster.client(Duration::from_secs(5)).expect("client");
    for i in 0..20u32 {
        client
            .send(msg("tls", format!("m{i}").as_bytes()))
            .await
            .expect("send over TLS");
    }
    // A follower forwards to the leader's client port, over TLS.
    let mut raw = cluster.grpc(follower_of(leader)).await.expect("connect");
    let r = raw
        .send(pb::SendRequest {
            message: Some(msg("tls", b"via-follower")),
        })
        .await
        .expect("forwarded send");
    assert!(r.into_inner().result.is_some());
    cluster
        .wait_converged(Duration::from_secs(20))
        .await
        .expect("converged");
    for id in cluster.ids() {
        let mut c = cluster.grpc(id).await.expect("connect");
        let got = read_all(&mut c, "tls", 4).await.expect("read");
        assert_eq!(got.len(), 21, "node {id}");
    }
    // Plaintext, or TLS trusting another CA, gets nowhere.
    let plain = one_shot(&cluster.seeds(), None);
    plain
        .send(msg("tls", b"plain"))
        .await
        .expect_err("plaintext to a TLS port");
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = cluster_tests::tls::TestTls::new(other_dir.path(), "other").expect("ca");
    let foreign = one_shot(&cluster.seeds(), Some(other.client_tls()));
    foreign
        .send(msg("tls", b"foreign"))
        .await
        .expect_err("a server certificate of another CA is not trusted");
    cluster.shutdown().await.expect("shutdown");
}

/// A Vote on `ch` addressed to node 0: a peer that got through the admission check is told
/// "node id mismatch" (FAILED_PRECONDITION) by the peer service, nothing else reaches Raft.
async fn vote(ch: Channel, cluster_id: &str) -> tonic::Status {
    let req = pb::RaftRequest {
        cluster_id: cluster_id.into(),
        from_node_id: 2,
        to_node_id: 0,
        codec: 0,
        payload: Default::default(),
    };
    match tokio::time::timeout(Duration::from_secs(20), RaftPeerClient::new(ch).vote(req)).await {
        Ok(Ok(_)) => panic!("a vote addressed to node 0 was answered"),
        Ok(Err(s)) => s,
        Err(_) => tonic::Status::deadline_exceeded("no answer in 20 s"),
    }
}

fn refused(what: &str, s: &tonic::Status) {
    assert_ne!(
        s.code(),
        Code::FailedPrecondition,
        "{what}: reached the peer service: {s}"
    );
    assert!(!s.message().contains("mismatch"), "{what}: {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_port_refuses_connections_without_a_member_certificate() {
    let cluster = TestCluster::start_tls(&SYNC3, |_| {})
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let tls = cluster.tls.as_ref().expect("secure cluster");
    let cid = tls.cluster_id.clone();
    let addr = cluster.configs[0].raft_listen_addr.to_string();
    let ca_pem = std::fs::read(&tls.ca_file).expect("ca");

    let plain = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect_lazy();
    refused("plain TCP", &vote(plain, &cid).await);
    let anonymous = tls_channel(&addr, &ca_pem, None).expect("channel");
    refused(
        "TLS without a client certificate",
        &vote(anonymous, &cid).await,
    );
    let other_ca = ClusterCa::generate(&cid).expect("ca");
    let stranger = other_ca.issue_node(2, &["127.0.0.1"]).expect("cert");
    let ch = tls_channel(&addr, &ca_pem, Some(&stranger)).expect("channel");
    refused("a member's name from another CA", &vote(ch, &cid).await);
    let non_member = tls.ca.issue_node(99, &["127.0.0.1"]).expect("cert");
    let ch = tls_channel(&addr, &ca_pem, Some(&non_member)).expect("channel");
    refused("a CA-signed non-member", &vote(ch, &cid).await);
    let other_cluster = tls
        .ca
        .issue("raftmq://another-cluster/node/2", &["127.0.0.1"])
        .expect("cert");
    let ch = tls_channel(&addr, &ca_pem, Some(&other_cluster)).expect("channel");
    refused("another cluster's member", &vote(ch, &cid).await);

    // The control: a member's certificate gets through to the peer service.
    let member = tls.ca.issue_node(2, &["127.0.0.1"]).expect("cert");
    let ch = tls_channel(&addr, &ca_pem, Some(&member)).expect("channel");
    let s = vote(ch, &cid).await;
    assert_eq!(s.code(), Code::FailedPrecondition, "{s}");
    assert!(s.message().contains("node id mismatch"), "{s}");

    // The cluster kept serving.
    let client = cluster.client(Duration::from_secs(5)).expect("client");
    for i in 0..10u32 {
        client
            .send(msg("after", format!("m{i}").as_bytes()))
            .await
            .expect("send after the refusals");
    }
    cluster.shutdown().await.expect("shutdown");
}

/// Waits until `ready(id, material)` holds for every running node's current TLS material;
/// `what` names the wait in the failure.
async fn wait_material(cluster: &TestCluster, what: &str, ready: impl Fn(u64, &Material) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let current = |id| {
        let tls = cluster.node(id).core().tls.as_ref().expect("TLS node");
        tls.current()
    };
    while !cluster.ids().into_iter().all(|id| ready(id, &current(id))) {
        assert!(
            Instant::now() < deadline,
            "{what}: not on every node after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every running node's CA bundle is `ca_pem`.
async fn wait_trusted(cluster: &TestCluster, ca_pem: &[u8]) {
    wait_material(cluster, "the CA bundle loaded", |_, m| m.ca_pem == ca_pem).await;
}

/// Waits until every running node's active certificate has serial `serials[id - 1]`.
async fn wait_active(cluster: &TestCluster, serials: &[String]) {
    wait_material(
        cluster,
        &format!("active certificates {serials:?}"),
        |id, m| m.leaf.serial_hex == serials[id as usize - 1],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_and_ca_rotate_under_load_without_a_failed_send() {
    let mut cluster = TestCluster::start_tls(&SYNC3, |_| {})
        .await
        .expect("cluster starts");
    let leader = cluster.wait_leader().await.expect("a leader");
    let tls = cluster.tls.as_ref().expect("secure cluster");
    // 0. A new CA, which the producing client trusts beside the old one before any node
    // serves it: a client of a cluster whose node certificates change must trust both CAs,
    // since it verifies a node's new certificate whenever it reconnects (after a restart, or
    // to a new leader).
    let new_ca = ClusterCa::generate(&tls.cluster_id).expect("new ca");
    let old_pem = std::fs::read_to_string(&tls.ca_file).expect("ca");
    let both = ClientTls {
        ca_pem: [old_pem.as_str(), new_ca.cert_pem().as_str()]
            .concat()
            .into_bytes(),
        identity: None,
    };
    let opts = ClientOptions {
        tls: Some(both),
        ..cluster.client_options(Duration::from_secs(5))
    };
    let client = raftmq_client::Client::new(&cluster.seeds(), opts).expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut producers = Vec::new();
    for p in 0..2 {
        let (client, stop, sent, failed) =
            (client.clone(), stop.clone(), sent.clone(), failed.clone());
        producers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match client
                    .send(msg("rot", format!("p{p}-{i}").as_bytes()))
                    .await
                {
                    Ok(_) => sent.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("send failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                i += 1;
            }
        }));
    }
    // 1. The CA bundle becomes old + new CA on every node, and every node loads it before any
    // serves a new certificate (else a node still trusting the old CA alone would refuse a
    // peer's new one until its next poll).
    let bundle = [old_pem.clone(), new_ca.cert_pem()];
    tls.write_ca_bundle(&bundle).expect("bundle");
    wait_trusted(&cluster, bundle.concat().as_bytes()).await;
    // 2. Every node gets a certificate of the new CA.
    let mut serials = Vec::new();
    for id in cluster.ids() {
        serials.push(tls.rotate_node(&new_ca, id).expect("rotate").serial_hex);
    }
    wait_active(&cluster, &serials).await;
    // New connections present the new certificates: a client trusting only the new CA gets
    // through to every node, one trusting only the old CA does not.
    let dir = tempfile::tempdir().expect("tempdir");
    let only = |name: &str, pem: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, pem).expect("write");
        ClientTls::from_ca_file(&p).expect("pem")
    };
    let (new_only, old_only) = (
        only("new.crt", &new_ca.cert_pem()),
        only("old.crt", &old_pem),
    );
    for id in cluster.ids() {
        let seed = [cluster.client_addr(id)];
        one_shot(&seed, Some(new_only.clone()))
            .cluster_status()
            .await
            .unwrap_or_else(|e| panic!("node {id} presents the new certificate: {e}"));
        one_shot(&seed, Some(old_only.clone()))
            .cluster_status()
            .await
            .expect_err("the old certificate is no longer served to new connections");
    }
    // 3. A restarted follower dials its peers with its new certificate (new peer
    // connections both ways) and catches up.
    let follower = follower_of(leader);
    cluster.stop(follower).await.expect("stop");
    cluster.restart(follower).await.expect("restart");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.await.expect("producer");
    }
    cluster
        .wait_converged(Duration::from_secs(30))
        .await
        .expect("the restarted follower caught up over TLS");
    let (sent, failed) = (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{failed} sends failed ({sent} succeeded)");
    assert!(sent > 20, "too few sends to call it load: {sent}");
    cluster.shutdown().await.expect("shutdown");
}

/// A status call on a new connection to `addr`, within 5 s.
async fn status_on_new_connection(addr: &str) -> Result<(), String> {
    let call = async {
        let mut c =
            raftmq_proto::v1::raft_mq_client::RaftMqClient::connect(format!("http://{addr}"))
                .await
                .map_err(|e| e.to_string())?;
        c.cluster_status(pb::ClusterStatusRequest::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(c)
    };
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(r) => r.map(drop),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_are_closed_at_accept() {
    let cluster = TestCluster::start(&[FlushPolicy::Sync], |c| c.tls.max_connections = 2)
        .await
        .expect("cluster starts");
    cluster.wait_leader().await.expect("a leader");
    let addr = cluster.client_addr(1);
    let mut held = Vec::new();
    for i in 0..2 {
        let mut c =
            raftmq_proto::v1::raft_mq_client::RaftMqClient::connect(format!("http://{addr}"))
                .await
                .expect("connect");
        c.cluster_status(pb::ClusterStatusRequest::default())
            .await
            .unwrap_or_else(|e| panic!("connection {i} is within the limit: {e}"));
        held.push(c);
    }
    status_on_new_connection(&addr)
        .await
        .expect_err("a third connection is closed at accept");
    drop(held);
    // The slots are free again once the held connections closed.
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = status_on_new_connection(&addr).await {
        assert!(Instant::now() < deadline, "no slot freed: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.shutdown().await.expect("shutdown");
}
