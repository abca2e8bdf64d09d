//! Scenario 10: check-quorum. A leader cut off from every other voter stops claiming
//! leadership within about two election timeouts of the cut, refuses writes without proposing
//! them (NOT_LEADER or NO_QUORUM, not applied), and `raftmq cluster status` names the leader of
//! the highest term (the one the majority elected), listing the cut-off node as disagreeing.
//! After healing, the old leader follows the new one and every node converges.

use std::time::Duration;
use std::time::Instant;

use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::FlushPolicy;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::ErrorReason;
use tonic::Code;

/// `raftmq cluster status`'s view of the cluster, asking every node.
async fn status(cluster: &TestCluster) -> anyhow::Result<raftmq_cli::status::ClusterView> {
    let targets: Vec<(Option<u64>, String)> = cluster
        .ids()
        .into_iter()
        .map(|i| (Some(i), cluster.client_addr(i)))
        .collect();
    let opts = raftmq_client::ClientOptions {
        max_attempts: 1,
        connect_timeout: Duration::from_millis(500),
        ..cluster.client_options(Duration::from_secs(2))
    };
    raftmq_cli::status::gather_with(&targets, opts).await
}

cluster_tests::plain_and_secure! {
    async fn isolated_leader_stops_claiming_and_refuses_writes(security) -> anyhow::Result<()> {
        let cluster = TestCluster::start_as(security, &[FlushPolicy::Sync; 3], |_| {}).await?;
        let old = cluster.wait_leader().await?;
        let run = Run::start(&cluster, ProducerOptions::default())?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;
        let election_timeout = Duration::from_millis(cluster.configs[0].election_timeout_max_ms);
        let old_term = status(&cluster).await?.term;

        cluster.partition(&[old]);
        let cut = Instant::now();
        // Generous for a loaded machine; the figure itself is printed.
        let deadline = cut + 2 * election_timeout + Duration::from_secs(2);
        let stopped_claiming = loop {
            let core = cluster.node(old).core();
            if core.leader().0 != Some(old) && !core.is_leader() {
                break cut.elapsed();
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the isolated leader {old} still claims leadership {:?} after the cut",
                cut.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        eprintln!(
            "isolated leader {old} stopped claiming leadership {} ms after the cut (election \
             timeout {} ms)",
            stopped_claiming.as_millis(),
            election_timeout.as_millis()
        );

        // A write sent straight to it is refused and never proposed.
        let mut raw = cluster.grpc(old).await?;
        let before = cluster.node(old).log().watermarks().appended;
        let err = raw
            .send(pb::SendRequest {
                message: Some(msg("cq-direct", b"to the isolated leader")),
            })
            .await
            .expect_err("the isolated leader must refuse writes");
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        let d = raftmq_proto::error_detail(&err).expect("an error detail");
        let reason = ErrorReason::try_from(d.reason).unwrap_or(ErrorReason::Unspecified);
        assert!(
            matches!(reason, ErrorReason::NotLeader | ErrorReason::NoQuorum),
            "{reason:?} {d:?}"
        );
        assert!(d.not_applied, "{d:?}");
        assert_ne!(d.leader_id, Some(old), "it must not name itself: {d:?}");
        assert_eq!(cluster.node(old).log().watermarks().appended, before);

        // The majority elects a new leader; the status summary names it, at the higher term, and
        // lists the cut-off node as disagreeing.
        let majority: Vec<u64> = cluster.ids().into_iter().filter(|&i| i != old).collect();
        let new = cluster
            .wait_leader_among(&majority, Duration::from_secs(10))
            .await?;
        let view = status(&cluster).await?;
        assert_eq!(view.leader_id, Some(new), "{view:?}");
        assert!(view.term > old_term, "{view:?}");
        assert!(
            view.disagreement.iter().any(|c| c.node_id == old),
            "{view:?}"
        );
        let row = view.nodes.iter().find(|n| n.id == old).expect("old's row");
        assert_eq!(row.leader_id, None, "{row:?}");
        assert!(
            view.render().contains(&format!("leader {new}")),
            "{}",
            view.render()
        );
        run.producers
            .wait_more_acked(30, Duration::from_secs(20))
            .await?;

        cluster.heal();
        cluster.wait_converged(Duration::from_secs(20)).await?;
        let view = status(&cluster).await?;
        assert_eq!(view.leader_id, Some(new), "{view:?}");
        assert!(view.disagreement.is_empty(), "{view:?}");
        // The old leader's check-quorum mark clears on its watcher's next tick (one heartbeat)
        // after it heard the new leader, which a loaded machine may run a little late.
        let cleared = async {
            while cluster.node(old).core().quorum.is_lost() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), cleared)
            .await
            .expect("the old leader's check-quorum mark clears once it follows");
        let out = run.finish(&cluster).await?;
        out.assert_pass(60);
        cluster.shutdown().await
    }
}
