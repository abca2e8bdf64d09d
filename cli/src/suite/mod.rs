//! `raftmq bench suite`: issue 14's performance table in one run. It builds nothing (the
//! installed `raftmq-node` via [`crate::locate`]), runs each case on a fresh local 3-node
//! cluster ([`crate::deploy`], free ports, a temp dir removed afterwards), probes the disk in
//! that directory right before each case's load (the shared disk's fdatasync swings minute to
//! minute) and, before the single-send case, the round trip between two processes
//! ([`crate::bench::hop`]: with the fdatasync, the floor of that case's latency), takes the
//! CPU time of every node and of the load generator over the load together with the
//! machine's steal ([`crate::bench::cpu`]: a case run while the host was busy says so) and
//! prints one table of figures, targets and ratios ([`report`]).
//!
//! Layer: above `status`, `deploy` and `bench`, below `cmd`.

pub mod cases;
pub mod report;
pub mod seed;

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use raftmq_client::Client;
use raftmq_client::ClientOptions;

use crate::bench::cpu::CpuSpan;
use crate::bench::disk;
use crate::bench::hop;
use crate::bench::load;
use crate::bench::load::PullLoad;
use crate::bench::rss;
use crate::bench::rss::PeakSampler;
use crate::clock::parse_duration;
use crate::deploy::local;
use crate::deploy::manifest::Manifest;
use crate::deploy::node_config::NodeSetting;
use crate::locate::node_binary;
use crate::output::print_json;
use crate::status;
use cases::Case;
use cases::PeerFigures;
use report::CaseCpu;
use report::CaseResult;
use report::SuiteReport;

/// Longest time each of a case's two disk probes takes.
const DISK_PROBE_MAX: Duration = Duration::from_secs(3);
/// Longest time the hop probe takes.
const HOP_PROBE_MAX: Duration = Duration::from_secs(2);
/// How long to wait for a leader on a fresh cluster.
const LEADER_WAIT: Duration = Duration::from_secs(60);

/// `bench suite` options.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Load time of each case.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Cases to run (comma-separated): single, in-flight-64, four-by-64, batch-32, async,
    /// consume-follower. Default: all.
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<Case>,
    /// NATS JetStream R3 rates measured separately, msg/s: single=N,in-flight-64=N,four-by-64=N
    /// (default: issue 14's figures, shown as a reference).
    #[arg(long)]
    pub nats_figures: Option<PeerFigures>,
    /// Directory the temp cluster directories (and the disk probe) go in.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// CommitLog segment size of the clusters, bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub segment_bytes: u64,
    /// A raftmq-node setting for every node, KEY=VALUE (repeatable), as `cluster up --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<NodeSetting>,
    /// Segment files written through once, put in each node's pool of free segments before it
    /// starts (`recycle-segments` raised to match): every segment after a node's first then
    /// comes from the pool, so the cases append as nodes past their first retention do, into
    /// blocks written before (with a small --segment-bytes, nearly all of a case; enough
    /// segments for its bytes). Costs N x segment-bytes of writes per node before each case.
    /// Default 0 (fresh nodes, as issue 14's targets are measured).
    #[arg(long, default_value_t = 0)]
    pub written_segments: u32,
}

/// The node settings of a case: `a.settings`, with `recycle-segments` at least
/// `--written-segments` (added if not given; refused if given lower).
fn case_settings(a: &SuiteArgs) -> anyhow::Result<Vec<NodeSetting>> {
    let mut settings = a.settings.clone();
    if a.written_segments == 0 {
        return Ok(settings);
    }
    match settings.iter().find(|s| s.key == "recycle-segments") {
        Some(s) => anyhow::ensure!(
            s.value
                .as_integer()
                .is_some_and(|v| v >= i64::from(a.written_segments)),
            "--written-segments {} needs recycle-segments of at least that many, not {}",
            a.written_segments,
            s.text
        ),
        None => settings.push(
            format!("recycle-segments={}", a.written_segments)
                .parse()
                .map_err(anyhow::Error::msg)?,
        ),
    }
    Ok(settings)
}

/// A fresh cluster of one case; on drop its nodes are killed and its directory removed (so
/// the cases' preallocated segments never sit on the disk together).
struct CaseCluster {
    m: Manifest,
    dir: PathBuf,
    leader_pid: u32,
    follower_pids: Vec<u32>,
    follower_addr: String,
}

impl CaseCluster {
    async fn up(dir: &Path, case: Case, a: &SuiteArgs, bin: &Path) -> anyhow::Result<Self> {
        let dir = dir.join(case.name());
        let m = local::init(&local::InitOptions {
            nodes: 3,
            dir: dir.clone(),
            base_port: 0,
            flush: case.flush().to_string(),
            segment_bytes: a.segment_bytes,
            cluster_id: "raftmq-bench".to_string(),
            settings: case_settings(a)?,
            secure: false,
        })?;
        let mut c = Self {
            m,
            dir,
            leader_pid: 0,
            follower_pids: Vec::new(),
            follower_addr: String::new(),
        };
        // Seeded once `c` exists too: its drop removes the directory, seeds and all.
        if a.written_segments > 0 {
            let dirs: Vec<_> = c.m.nodes.iter().map(|n| n.node_dir.clone()).collect();
            let (n, bytes) = (a.written_segments, a.segment_bytes);
            tokio::task::spawn_blocking(move || {
                dirs.iter()
                    .try_for_each(|d| seed::seed_free_segments(d, n, bytes))
            })
            .await
            .context("segment seeding task")??;
        }
        // Started only once `c` exists: its drop stops whatever did start.
        local::start_all(&mut c.m, bin)?;
        let view = status::wait_leader(&c.m, LEADER_WAIT).await?;
        let leader = view
            .leader_id
            .context("wait_leader returned a view without a leader")?;
        c.leader_pid =
            c.m.node(leader)?
                .pid
                .with_context(|| format!("leader node {leader} has no recorded pid"))?;
        c.follower_pids =
            c.m.nodes
                .iter()
                .filter(|n| n.id != leader)
                .filter_map(|n| n.pid)
                .collect();
        let follower = c.m.nodes.iter().find(|n| n.id != leader);
        c.follower_addr = follower
            .map(|n| n.client_addr.clone())
            .context("a 3-node cluster has a follower")?;
        Ok(c)
    }
}

impl Drop for CaseCluster {
    fn drop(&mut self) {
        for id in self.m.ids() {
            if let Err(e) = local::stop(&mut self.m, id, local::Stop::Kill) {
                eprintln!("bench suite: cannot stop node {id}: {e:#}");
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("bench suite: cannot remove {}: {e}", self.dir.display());
        }
    }
}

fn mib(kib: Option<u64>) -> Option<f64> {
    kib.map(|k| k as f64 / 1024.0)
}

/// Waits until `addr` holds at least `messages` messages of the topic (a follower applies
/// after the leader answers), at most `timeout`.
async fn wait_stored(addr: &str, messages: u64, timeout: Duration) -> anyhow::Result<()> {
    let client = Client::new(&[addr.to_string()], ClientOptions::default())?;
    let start = std::time::Instant::now();
    loop {
        let topics = client.list_topics().await?;
        let stored: u64 = topics
            .iter()
            .filter(|t| t.config.as_ref().is_some_and(|c| c.name == cases::TOPIC))
            .flat_map(|t| t.queues.iter())
            .map(|q| q.max_offset - q.min_offset)
            .sum();
        if stored >= messages {
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "follower {addr} holds {stored} of {messages} messages after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader's last appended log index, or None (with a note on stderr) if the status read
/// fails: the figure it feeds is a diagnostic, not worth failing a case over.
async fn leader_appended(m: &Manifest) -> Option<u64> {
    match status::gather_local(m).await {
        Ok(view) => view
            .nodes
            .iter()
            .find(|n| Some(n.id) == view.leader_id)
            .and_then(|n| n.appended),
        Err(e) => {
            eprintln!("bench suite: cannot read the leader's log index: {e:#}");
            None
        }
    }
}

async fn run_case(dir: &Path, case: Case, a: &SuiteArgs, bin: &Path) -> anyhow::Result<CaseResult> {
    let c = CaseCluster::up(dir, case, a, bin).await?;
    // Probed with the cluster up (its segments preallocated) and idle, just before the load.
    let probe_dir = c.dir.clone();
    let budget = a.duration.min(DISK_PROBE_MAX);
    let disk = tokio::task::spawn_blocking(move || disk::measure(&probe_dir, budget))
        .await
        .context("disk probe task")??;
    let hop = match case {
        Case::Single => probe_hop(a.duration.min(HOP_PROBE_MAX)).await,
        _ => None,
    };
    let seeds = c.m.client_addrs();
    let sampler = case
        .samples_memory()
        .then(|| PeakSampler::start(c.leader_pid));
    let appended_before = leader_appended(&c.m).await;
    // Leader, followers, then this process (the load generator runs in it).
    let mut pids = vec![c.leader_pid];
    pids.extend(&c.follower_pids);
    pids.push(std::process::id());
    let span = CpuSpan::start(&pids);
    let produce = load::produce(&seeds, case.load(a.duration), true).await?;
    let cpu = CaseCpu::from_span(span.finish(), c.follower_pids.len());
    let appended_after = leader_appended(&c.m).await;
    let mut r = CaseResult {
        case,
        disk,
        hop,
        produce,
        consume: None,
        leader_rss_peak_mib: None,
        leader_rss_after_mib: None,
        cpu,
        raft_entries: appended_after
            .zip(appended_before)
            .map(|(after, before)| after.saturating_sub(before)),
    };
    if let Some(s) = sampler {
        r.leader_rss_peak_mib = mib(s.stop().await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        r.leader_rss_after_mib = mib(rss::rss_anon_kib(c.leader_pid));
    }
    if case == Case::ConsumeFollower {
        let n = r.produce.messages;
        wait_stored(&c.follower_addr, n, Duration::from_secs(60)).await?;
        let pull = PullLoad {
            addr: c.follower_addr.clone(),
            topic: cases::TOPIC.to_string(),
            batch: 64,
            duration: Some(a.duration.max(Duration::from_secs(1)) * 4),
            count: Some(n),
        };
        r.consume = Some(load::consume(pull, true).await?);
    }
    Ok(r)
}

/// The hop probe with this process's own executable as the echo peer; a probe that fails
/// only costs its informational rows (said on stderr).
async fn probe_hop(budget: Duration) -> Option<hop::HopFigures> {
    let measured = tokio::task::spawn_blocking(move || {
        let program = std::env::current_exe().context("the raftmq executable's path")?;
        hop::measure(&program, budget)
    })
    .await;
    match measured {
        Ok(Ok(h)) => Some(h),
        Ok(Err(e)) => {
            eprintln!("bench suite: no hop probe: {e:#}");
            None
        }
        Err(e) => {
            eprintln!("bench suite: no hop probe: {e}");
            None
        }
    }
}

/// Runs the suite and prints the table (or JSON); exit code 1 if a case moved no message.
pub async fn run(json: bool, a: SuiteArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(a.duration > Duration::ZERO, "--duration must be > 0");
    let bin = node_binary()?;
    let mut selected = if a.cases.is_empty() {
        Case::ALL.to_vec()
    } else {
        a.cases.clone()
    };
    selected.sort();
    selected.dedup();
    let parent = local::absolute_dir(&a.dir)?;
    let tmp = tempfile::Builder::new()
        .prefix("raftmq-bench-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a temp dir in {}", parent.display()))?;
    let mut results = Vec::new();
    for case in selected {
        if !json {
            eprintln!(
                "case {case}: fresh cluster, disk probe, {:?} of load ...",
                a.duration
            );
        }
        let r = run_case(tmp.path(), case, &a, &bin)
            .await
            .with_context(|| format!("bench suite case {case}"))?;
        results.push(r);
    }
    let peer = a
        .nats_figures
        .clone()
        .unwrap_or_else(PeerFigures::issue_reference);
    let report = SuiteReport {
        nproc: std::thread::available_parallelism().map_or(1, usize::from),
        written_segments: a.written_segments,
        rows: report::rows(&peer, &results),
        peer,
        nats_server: find_on_path("nats-server"),
        tcp_congestion: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .ok()
            .map(|s| s.trim().to_string()),
        cases: results,
    };
    if json {
        print_json(&report)?;
    } else {
        println!("{}", report::render(&report));
    }
    let idle = report.cases.iter().any(|c| c.produce.messages == 0);
    Ok(i32::from(idle))
}

fn find_on_path(name: &str) -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        suite: SuiteArgs,
    }

    fn args(argv: &[&str]) -> SuiteArgs {
        let mut all = vec!["suite"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).unwrap().suite
    }

    fn recycle(settings: &[NodeSetting]) -> Vec<&str> {
        settings
            .iter()
            .filter(|s| s.key == "recycle-segments")
            .map(|s| s.text.as_str())
            .collect()
    }

    #[test]
    fn written_segments_raise_the_pool_unless_the_user_set_enough() {
        assert!(recycle(&case_settings(&args(&[])).unwrap()).is_empty());
        let s = case_settings(&args(&["--written-segments", "3"])).unwrap();
        assert_eq!(recycle(&s), ["recycle-segments=3"]);
        let with_pool = |pool: &str| {
            let set = format!("recycle-segments={pool}");
            case_settings(&args(&["--written-segments", "3", "--set", &set]))
        };
        assert_eq!(recycle(&with_pool("5").unwrap()), ["recycle-segments=5"]);
        let err = with_pool("1").unwrap_err();
        assert!(
            err.to_string()
                .contains("--written-segments 3 needs recycle-segments of at least that many"),
            "{err}"
        );
    }
}
