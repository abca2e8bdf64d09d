//! `raftmq failover-test`: producers send tagged messages while a fault injector kills, stops
//! or demotes nodes of the local cluster and restarts them; then every queue is read back from
//! every node and the invariant checkers of [`crate::check`] give the verdict.
//!
//! Steps: create a fresh topic; start the producers, the status sampler and the injector; at
//! the deadline stop them, restart every node, wait for a leader and for every node to apply
//! everything committed; read back; check; print; exit 1 on FAIL.

mod fault;
mod producer;
mod readback;
mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use clap::Args;
use clap::ValueEnum;
use raftmq_client::proto::TopicConfig;
use raftmq_client::proto::TopicPerm;
use raftmq_client::Client;
use raftmq_client::ClientOptions;

use crate::check::read::read_replica;
use crate::check::Attempt;
use crate::check::History;
use crate::check::Observation;
use crate::clock::parse_duration;
use crate::deploy::manifest::Manifest;
use crate::locate::node_binary;
use crate::output::print_json;
use crate::status::probe_options;
use readback::tag_of;
use verdict::AckTerm;
use verdict::Fault;

pub use verdict::summarize;

/// Which fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// SIGKILL the leader.
    KillLeader,
    /// SIGKILL a follower.
    KillFollower,
    /// SIGKILL any running node.
    KillRandom,
    /// SIGTERM the leader.
    StopLeader,
    /// Transfer leadership (no process is stopped).
    Transfer,
}

/// The mode as written on the command line.
fn mode_name(mode: Mode) -> String {
    mode.to_possible_value()
        .map_or_else(|| format!("{mode:?}"), |v| v.get_name().to_string())
}

/// `failover-test` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  raftmq failover-test
  raftmq failover-test --duration 2m --kill-every 15s --mode kill-random --producers 8
  raftmq failover-test --mode transfer --json
Needs a local cluster (`raftmq cluster up`): faults are injected through its manifest.
Exit status 1 when an invariant is violated (verdict FAIL).")]
pub struct FailoverArgs {
    /// How long the producers run.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Time between faults.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub kill_every: Duration,
    /// How long a killed or stopped node stays down.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub down_for: Duration,
    /// The fault.
    #[arg(long, value_enum, default_value = "kill-leader")]
    pub mode: Mode,
    /// Concurrent producers (each sends one message at a time).
    #[arg(long, default_value_t = 4)]
    pub producers: u32,
    /// Body size, bytes.
    #[arg(long, default_value_t = 128)]
    pub size: usize,
    /// Queues of the test topic.
    #[arg(long, default_value_t = 4)]
    pub queues: u32,
    /// Topic to use (default: a new failover-TIMESTAMP topic).
    #[arg(long)]
    pub topic: Option<String>,
    /// Producers send without an identity (at-least-once, as before exactly-once sends):
    /// duplicates after a retried unknown outcome are counted, not failed. By default every
    /// message carries its producer's id and sequence and any duplicate fails the run.
    #[arg(long)]
    pub no_idempotent: bool,
}

/// State shared by the producers, the sampler and the injector.
pub struct Run {
    start: Instant,
    stop: AtomicBool,
    topic: String,
    size: usize,
    mode: Mode,
    kill_every: Duration,
    down_for: Duration,
    node_bin: PathBuf,
    manifest: Mutex<Manifest>,
    history: Mutex<History>,
    acks: Mutex<Vec<AckTerm>>,
    faults: Mutex<Vec<Fault>>,
    samples: Mutex<Vec<Observation>>,
    /// Restarts per node, so the sampler can mark a sample as after a restart.
    generations: Mutex<BTreeMap<u64, u64>>,
    /// Producers send identified messages (exactly once): any duplicate is a failure.
    idempotent: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Run {
    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
    fn manifest(&self) -> Manifest {
        lock(&self.manifest).clone()
    }
    fn record(&self, a: Attempt) {
        lock(&self.history).push(a);
    }
    fn record_ack(&self, a: AckTerm) {
        lock(&self.acks).push(a);
    }
    fn bump_generation(&self, id: u64) {
        *lock(&self.generations).entry(id).or_default() += 1;
    }
}

/// Samples every node's status every 250 ms until stopped.
async fn sample(run: Arc<Run>) {
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    let Ok(client) = Client::new(
        &run.manifest().client_addrs(),
        crate::credentials::signed(probe_options()),
    ) else {
        return;
    };
    while !run.stop.load(Ordering::Relaxed) {
        for node in run.manifest().nodes {
            if let Ok(r) = client.cluster_status_from(&node.client_addr).await {
                let generation = lock(&run.generations).get(&node.id).copied().unwrap_or(0);
                let restarted = seen
                    .insert(node.id, generation)
                    .is_some_and(|g| g != generation);
                let o = readback::observation(&r, run.now_us(), restarted);
                lock(&run.samples).push(o);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn producer_options(idempotent: bool) -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(5),
        max_attempts: 10,
        backoff_max: Duration::from_millis(500),
        idempotent,
        ..crate::client_tls::options()
    }
}

/// Runs `failover-test` on the local cluster of `manifest`; `json` prints the summary as JSON.
pub async fn run(manifest: Manifest, json: bool, a: FailoverArgs) -> anyhow::Result<i32> {
    let node_bin = node_binary()?;
    let seeds = manifest.client_addrs();
    let idempotent = !a.no_idempotent;
    let admin = Client::new(
        &seeds,
        crate::credentials::signed(producer_options(idempotent)),
    )?;
    crate::status::wait_leader(&manifest, Duration::from_secs(30)).await?;
    let topic = a
        .topic
        .clone()
        .unwrap_or_else(|| format!("failover-{}", crate::clock::now_ms()));
    create_topic(&admin, &topic, a.queues).await?;
    let run = Arc::new(Run {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        topic: topic.clone(),
        size: a.size,
        mode: a.mode,
        kill_every: a.kill_every,
        down_for: a.down_for,
        node_bin,
        manifest: Mutex::new(manifest),
        history: Mutex::default(),
        acks: Mutex::default(),
        faults: Mutex::default(),
        samples: Mutex::default(),
        generations: Mutex::default(),
        idempotent,
    });
    if !json {
        eprintln!(
            "failover-test: topic {topic}, {} {} producers, mode {}, fault every {:?}, for {:?}",
            a.producers,
            if idempotent {
                "idempotent"
            } else {
                "at-least-once"
            },
            mode_name(a.mode),
            a.kill_every,
            a.duration
        );
    }
    let mut producers = tokio::task::JoinSet::new();
    for p in 0..a.producers {
        producers.spawn(producer::produce(
            run.clone(),
            Client::new(
                &seeds,
                crate::credentials::signed(producer_options(idempotent)),
            )?,
            p,
        ));
    }
    let sampler = tokio::spawn(sample(run.clone()));
    let injector = tokio::spawn(fault::inject_faults(run.clone(), admin.clone()));
    // Ctrl-C ends the run early but still restarts every node and checks what was written.
    tokio::select! {
        _ = tokio::time::sleep(a.duration) => {}
        _ = tokio::signal::ctrl_c() => {
            eprintln!("failover-test: interrupted; stopping producers, restarting nodes, checking");
        }
    }
    run.stop.store(true, Ordering::Relaxed);
    while producers.join_next().await.is_some() {}
    injector.await?;
    sampler.await?;
    settle(&run).await?;
    let summary = check(&run, a.queues).await?;
    if json {
        print_json(&summary)?;
    } else {
        println!("{}", summary.render());
    }
    Ok(if summary.is_pass() { 0 } else { 1 })
}

/// Creates the test topic (an existing one is used as it is).
async fn create_topic(admin: &Client, topic: &str, queues: u32) -> anyhow::Result<()> {
    let config = TopicConfig {
        name: topic.to_string(),
        queue_count: queues,
        perm: TopicPerm::ReadWrite as i32,
    };
    match admin.create_topic(config).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(tonic::Code::AlreadyExists) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot create topic {topic}: {e}")),
    }
}

/// Restarts every stopped node and waits until all have applied everything the leader holds.
async fn settle(run: &Run) -> anyhow::Result<()> {
    for n in run.manifest().nodes {
        // Up to three starts: a start can fail (e.g. the port of a just-killed process).
        for attempt in 1..=3 {
            let running = run
                .manifest()
                .node(n.id)?
                .pid
                .is_some_and(crate::deploy::process::is_running);
            if !running {
                fault::restart_node(run, n.id).await?;
            }
            let up = crate::status::wait_serving(&n.client_addr, Duration::from_secs(60));
            match up.await {
                Ok(()) => break,
                Err(e) if attempt == 3 => return Err(e),
                Err(_) => {}
            }
        }
    }
    let m = run.manifest();
    crate::status::wait_leader(&m, Duration::from_secs(30)).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = crate::status::gather_local(&m).await?;
        let applied: Vec<Option<u64>> = view.nodes.iter().map(|n| n.applied).collect();
        // The leader's whole log (it holds every committed entry), not the highest committed
        // index reported: a node restarted with every other one starts from the committed id
        // it recovered (written behind, so possibly stale), and so does a leader until it
        // commits in its own term.
        let leader_end = (view.nodes.iter())
            .find(|n| view.leader_id == Some(n.id))
            .and_then(|n| n.appended);
        if leader_end.is_some() && applied.iter().all(|a| *a >= leader_end) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            eprintln!(
                "failover-test: nodes did not converge within 30 s ({applied:?}); checking anyway"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn check(run: &Run, queues: u32) -> anyhow::Result<verdict::FailoverSummary> {
    let m = run.manifest();
    let reader = Client::new(
        &m.client_addrs(),
        crate::credentials::signed(crate::client_tls::options()),
    )?;
    let mut replicas = Vec::new();
    for n in &m.nodes {
        let read = read_replica(&reader, n.id, &n.client_addr, &run.topic, queues, tag_of).await?;
        replicas.push(read);
    }
    let history = lock(&run.history).clone();
    let samples = lock(&run.samples).clone();
    let faults = lock(&run.faults).clone();
    let acks = lock(&run.acks).clone();
    let mode = mode_name(run.mode);
    Ok(summarize(
        &mode,
        &history,
        &replicas,
        &samples,
        &faults,
        &acks,
        run.idempotent,
    ))
}

#[cfg(test)]
mod failover_tests;
