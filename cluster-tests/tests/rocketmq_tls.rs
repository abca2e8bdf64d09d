//! The official RocketMQ 5 Rust client (crate `rocketmq` 5.0.0, `enable_tls`) against a TLS
//! cluster's RocketMQ port. That client trusts only the system's roots (tonic 0.9
//! `tls-roots`, rustls-native-certs 0.6), which honour `SSL_CERT_FILE`: this test points it
//! at the cluster CA (its own test binary: the variable is set before any thread starts) and
//! sends through a follower, which forwards to the leader's client port over TLS.

use std::time::Duration;

use cluster_tests::cluster::TestCluster;
use raftmq_node::config::FlushPolicy;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::model::message::MessageBuilder;
use rocketmq::Producer;

const TOPIC: &str = "rmq-tls";

#[test]
fn official_rust_client_sends_over_tls_with_ssl_cert_file() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = rt
        .block_on(TestCluster::start_tls(&[FlushPolicy::Sync; 3], |_| {}))
        .expect("cluster starts");
    let ca = cluster.tls.as_ref().expect("secure").ca_file.clone();
    // Read by rustls-native-certs on each TLS connect of the client.
    std::env::set_var("SSL_CERT_FILE", &ca);
    rt.block_on(async {
        let (_, follower) = cluster.leader_and_follower().await.expect("a leader");
        let addr = cluster.rocketmq_addr(follower).expect("rocketmq port");
        let mut client = ClientOption::default();
        client.set_access_url(&addr);
        client.set_enable_tls(true);
        client.set_timeout(Duration::from_secs(10));
        let mut opt = ProducerOption::default();
        opt.set_topics(vec![TOPIC]);
        let mut p = Producer::new(opt, client).expect("producer");
        p.start().await.expect("producer starts over TLS");
        for i in 0..5u32 {
            let m = MessageBuilder::builder()
                .set_topic(TOPIC)
                .set_body(format!("tls-{i}").into_bytes())
                .build()
                .expect("message");
            p.send(m).await.expect("send over TLS");
        }
        p.shutdown().await.expect("shutdown");
    });
    rt.block_on(async {
        cluster
            .wait_converged(Duration::from_secs(20))
            .await
            .expect("converged");
        assert_eq!(cluster.stored_messages(1, TOPIC).len(), 5);
        cluster.shutdown().await.expect("shutdown");
    });
}
