//! The common frame of a scenario: start load and sampling, and at the end converge, read
//! every replica and run every checker.

use std::time::Duration;

use raftmq_cli::check::check_all;
use raftmq_cli::check::History;
use raftmq_cli::check::Observation;
use raftmq_cli::check::ReplicaRead;
use raftmq_cli::check::Report;
use raftmq_client::Client;

use crate::cluster::TestCluster;
use crate::reader::read_all;
use crate::workload::ProducerOptions;
use crate::workload::Producers;
use crate::workload::RunClock;
use crate::workload::Sampler;

/// Queue count of auto-created topics (the node default).
pub const QUEUES: u32 = 4;

/// Load and sampling running against a cluster.
pub struct Run {
    /// The run's clock.
    pub clock: RunClock,
    /// The producers.
    pub producers: Producers,
    /// The status sampler.
    pub sampler: Sampler,
    /// The topic written.
    pub topic: String,
    /// A client of the cluster for the test's own calls.
    pub client: Client,
}

/// What a finished run produced.
pub struct Outcome {
    /// Every send attempt.
    pub history: History,
    /// Status samples.
    pub samples: Vec<Observation>,
    /// What every running node holds.
    pub replicas: Vec<ReplicaRead>,
    /// Every checker's findings.
    pub report: Report,
}

impl Run {
    /// Starts producers and a sampler against `cluster`.
    pub fn start(cluster: &TestCluster, opts: ProducerOptions) -> anyhow::Result<Self> {
        let clock = RunClock::start();
        let client = cluster.client(Duration::from_secs(3))?;
        let producer_client = cluster.client(opts.request_timeout)?;
        let topic = opts.topic.clone();
        let producers = Producers::start(producer_client, clock, opts);
        let sampler = Sampler::start(
            cluster.client(Duration::from_millis(500))?,
            cluster.seeds(),
            clock,
            Duration::from_millis(50),
            cluster.generations.clone(),
        );
        Ok(Self {
            clock,
            producers,
            sampler,
            topic,
            client,
        })
    }

    /// Stops the load, waits for the running nodes to converge, reads every replica and
    /// checks everything.
    pub async fn finish(self, cluster: &TestCluster) -> anyhow::Result<Outcome> {
        let Run {
            producers,
            sampler,
            topic,
            client,
            ..
        } = self;
        let history = producers.stop().await;
        cluster.wait_converged(Duration::from_secs(30)).await?;
        let nodes: Vec<(u64, String)> = cluster
            .ids()
            .into_iter()
            .filter(|&i| cluster.is_up(i))
            .map(|i| (i, cluster.client_addr(i)))
            .collect();
        check(history, sampler, &client, &topic, &nodes).await
    }

    /// Like [`Run::finish`] for nodes reached only by address (`(id, client address)`, e.g.
    /// processes): convergence is judged from their `ClusterStatus`.
    pub async fn finish_nodes(self, nodes: &[(u64, String)]) -> anyhow::Result<Outcome> {
        let Run {
            producers,
            sampler,
            topic,
            client,
            ..
        } = self;
        let history = producers.stop().await;
        wait_converged_status(&client, nodes, Duration::from_secs(30)).await?;
        check(history, sampler, &client, &topic, nodes).await
    }
}

async fn check(
    history: History,
    sampler: Sampler,
    client: &Client,
    topic: &str,
    nodes: &[(u64, String)],
) -> anyhow::Result<Outcome> {
    let samples = sampler.stop().await;
    let replicas = read_all(client, nodes, topic, QUEUES).await?;
    let report = check_all(&history, &replicas, &samples);
    Ok(Outcome {
        history,
        samples,
        replicas,
        report,
    })
}

impl Outcome {
    /// Panics with the report unless every invariant holds and enough was acknowledged.
    pub fn assert_pass(&self, min_acked: usize) {
        let r = &self.report;
        assert!(r.is_pass(), "{r}");
        assert!(r.acked >= min_acked, "only {} acknowledged: {r}", r.acked);
        tracing::info!(report = %r, samples = self.samples.len(), "scenario passed");
    }
}

/// Waits until every node in `nodes` reports an applied index at least the last log index of
/// the leader they agree on, as first seen for that leader (its committed index may still lag
/// right after an election; see `TestCluster::wait_converged`; under load its log end moves
/// on with every send, so the target is fixed per leader).
pub async fn wait_converged_status(
    client: &Client,
    nodes: &[(u64, String)],
    timeout: Duration,
) -> anyhow::Result<()> {
    let end = tokio::time::Instant::now() + timeout;
    // (leader, its log end when first seen)
    let mut target: Option<(u64, u64)> = None;
    loop {
        let mut applied = Vec::new();
        let mut leader_end = None;
        let mut leaders = Vec::new();
        for (id, addr) in nodes {
            let Ok(st) = client.cluster_status_from(addr).await else {
                applied.push((*id, None));
                continue;
            };
            leaders.push(st.leader_id);
            if let Some(me) = st.members.iter().find(|m| m.node_id == st.responder_id) {
                let w = me.watermarks.unwrap_or_default();
                applied.push((*id, w.applied_index));
                if st.leader_id == Some(*id) {
                    leader_end = w.appended_index;
                }
            }
        }
        let agreed = leaders.windows(2).all(|w| w[0] == w[1]) && leaders.len() == nodes.len();
        if let (true, Some(&Some(leader)), Some(end)) = (agreed, leaders.first(), leader_end) {
            if target.is_none_or(|(l, _)| l != leader) {
                target = Some((leader, end));
            }
        }
        let goal = target.map(|(_, end)| end);
        if agreed && goal.is_some() && applied.iter().all(|(_, a)| *a >= goal) {
            return Ok(());
        }
        if tokio::time::Instant::now() > end {
            anyhow::bail!(
                "not converged within {timeout:?}: leaders {leaders:?}, leader log end {leader_end:?}, target {target:?}, applied {applied:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
