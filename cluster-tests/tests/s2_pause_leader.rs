//! Scenario 2: real `raftmq-node` processes; SIGSTOP the leader past the election timeout
//! while producers keep sending, then SIGCONT it. It must step down; whatever it had appended
//! but not committed is truncated and never becomes visible (no never-sent or unexplained
//! duplicate message, identical replicas, at most one leader per term). Also: SIGTERM exits 0
//! and SIGKILL of the leader loses nothing.

use std::time::Duration;

use cluster_tests::process::ProcCluster;
use cluster_tests::scenario::wait_converged_status;
use cluster_tests::scenario::Run;
use cluster_tests::workload::ProducerOptions;
use cluster_tests::workload::Producers;
use cluster_tests::workload::RunClock;
use cluster_tests::workload::Sampler;
use cluster_tests::FlushPolicy;
use raftmq_client::Client;

async fn leader_of(client: &Client) -> anyhow::Result<u64> {
    for _ in 0..100 {
        if let Ok(st) = client.cluster_status().await {
            if let Some(l) = st.leader_id {
                return Ok(l);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no leader")
}

fn nodes(c: &ProcCluster) -> Vec<(u64, String)> {
    c.ids()
        .into_iter()
        .filter(|&i| c.is_up(i))
        .map(|i| (i, c.client_addr(i)))
        .collect()
}

cluster_tests::plain_and_secure! {
    async fn sigstop_leader_then_sigcont_and_sigkill(security) -> anyhow::Result<()> {
        let mut cluster = ProcCluster::start_as(security, &[FlushPolicy::Sync; 3])?;
        let admin = cluster.client(Duration::from_secs(2))?;
        let old = leader_of(&admin).await?;
        let clock = RunClock::start();
        let producers = Producers::start(
            cluster.client(Duration::from_secs(2))?,
            clock,
            ProducerOptions::default(),
        );
        let sampler = Sampler::start(
            cluster.client(Duration::from_millis(500))?,
            cluster.seeds(),
            clock,
            Duration::from_millis(50),
            Vec::new(),
        );
        let run = Run {
            clock,
            producers,
            sampler,
            topic: "ct".into(),
            client: admin.clone(),
        };
        run.producers
            .wait_more_acked(50, Duration::from_secs(30))
            .await?;

        // Pause the leader past the election timeout: the other two elect a new leader, and the
        // producers (whose sends to the frozen node time out with an unknown outcome) move to it
        // and are acknowledged again while the old leader is still frozen.
        cluster.pause(old)?;
        let others: Vec<(u64, String)> = nodes(&cluster)
            .into_iter()
            .filter(|(i, _)| *i != old)
            .collect();
        let mut elected = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut views = Vec::new();
            for (_, addr) in &others {
                views.push(
                    admin
                        .cluster_status_from(addr)
                        .await
                        .ok()
                        .and_then(|s| s.leader_id),
                );
            }
            if views
                .iter()
                .all(|v| v.is_some() && *v == views[0] && *v != Some(old))
            {
                elected = views[0];
                break;
            }
        }
        let elected = elected.expect("the majority elects a new leader while the old one is paused");
        run.producers
            .wait_more_acked(30, Duration::from_secs(30))
            .await?;
        cluster.resume(old)?;
        tracing::info!(old, elected, "new leader elected during the pause");
        run.producers
            .wait_more_acked(30, Duration::from_secs(30))
            .await?;
        wait_converged_status(&admin, &nodes(&cluster), Duration::from_secs(30)).await?;
        let now = leader_of(&admin).await?;
        tracing::info!(old, now, "leader after the pause");

        // SIGKILL the current leader and restart it.
        cluster.kill9(now)?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(30))
            .await?;
        cluster.spawn(now)?;
        run.producers
            .wait_more_acked(30, Duration::from_secs(30))
            .await?;

        let out = run.finish_nodes(&nodes(&cluster)).await?;
        out.assert_pass(150);

        // SIGTERM: graceful, exit status 0.
        for id in cluster.ids() {
            let st = cluster.terminate(id, Duration::from_secs(20)).await?;
            assert!(st.success(), "node {id} exited with {st} after SIGTERM");
        }
        Ok(())
    }
}
