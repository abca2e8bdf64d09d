//! `raftmq bench produce|consume|suite` (and the suite's hidden `echo` peer): the arguments,
//! turned into a load of [`crate::bench::load`] (progress bar while running, figures at the
//! end) or the whole suite of [`crate::suite`].

use std::time::Duration;

use clap::Args;
use clap::Subcommand;

use super::Global;
use crate::bench::load;
use crate::bench::load::ProduceLoad;
use crate::bench::load::PullLoad;
use crate::bench::BenchSummary;
use crate::clock::parse_duration;
use crate::output::print_json;
use crate::suite::SuiteArgs;

/// Bench commands.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Send as fast as the window allows.
    #[command(after_help = "Examples:
  raftmq bench produce --producers 4 --in-flight 16 --size 1024 --duration 30s
  raftmq bench produce --count 100000 --batch 32 --size 256 --json")]
    Produce(ProduceArgs),
    /// Pull a topic from one node from its min offsets.
    #[command(after_help = "Examples:
  raftmq bench consume --topic bench --node 2
  raftmq bench consume --topic bench --addr 127.0.0.1:9203 --duration 10s")]
    Consume(ConsumeBenchArgs),
    /// Every case of the performance issue on fresh local 3-node clusters, with the disk
    /// probed right before each case, as one table of figures, targets and ratios.
    #[command(after_help = "Examples:
  raftmq bench suite
  raftmq bench suite --duration 3s --cases single,four-by-64 --json
  raftmq bench suite --nats-figures single=1900,in-flight-64=13000,four-by-64=15000")]
    Suite(SuiteArgs),
    /// The suite's hop probe peer: connects and echoes every byte back (not for users).
    #[command(hide = true)]
    Echo(EchoArgs),
}

/// `bench echo` options.
#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Address of the probe to connect to.
    #[arg(long)]
    pub connect: String,
    /// Run on this CPU alone.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// `bench produce` options.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Producers (one client connection each).
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Sends in flight per producer.
    #[arg(long, default_value_t = 8)]
    pub in_flight: usize,
    /// Body size, bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Messages per SendBatch (1 = plain Send).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Run this long.
    #[arg(long, value_parser = parse_duration, conflicts_with = "count")]
    pub duration: Option<Duration>,
    /// Send this many messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// Topic.
    #[arg(long, default_value = "bench")]
    pub topic: String,
}

/// `bench consume` options.
#[derive(Debug, Args)]
pub struct ConsumeBenchArgs {
    /// Topic.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Node id to pull from (local cluster).
    #[arg(long, conflicts_with = "addr")]
    pub node: Option<u64>,
    /// Client address to pull from.
    #[arg(long)]
    pub addr: Option<String>,
    /// Messages per pull.
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// Stop after this long.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
}

impl ProduceArgs {
    fn load(&self) -> ProduceLoad {
        ProduceLoad {
            producers: self.producers,
            in_flight: self.in_flight,
            size: self.size,
            batch: self.batch,
            duration: self.duration,
            count: self.count,
            topic: self.topic.clone(),
        }
    }
}

fn show(g: &Global, s: &BenchSummary) -> anyhow::Result<i32> {
    if g.json {
        print_json(s)?;
    } else {
        println!("{s}");
    }
    Ok(if s.messages == 0 { 1 } else { 0 })
}

async fn consume(g: &Global, a: ConsumeBenchArgs) -> anyhow::Result<i32> {
    let addr = match (&a.addr, a.node) {
        (Some(addr), _) => addr.clone(),
        (None, Some(id)) => g.manifest()?.node(id)?.client_addr.clone(),
        (None, None) => g.seeds()?.first().cloned().unwrap_or_default(),
    };
    let pull = PullLoad {
        addr,
        topic: a.topic,
        batch: a.batch,
        duration: a.duration,
        count: a.count,
    };
    show(g, &load::consume(pull, g.json).await?)
}

/// Runs a bench command.
pub async fn run(g: &Global, cmd: BenchCmd) -> anyhow::Result<i32> {
    match cmd {
        BenchCmd::Produce(a) => {
            let s = load::produce(&g.seeds()?, a.load(), g.json).await?;
            show(g, &s)
        }
        BenchCmd::Consume(a) => consume(g, a).await,
        BenchCmd::Suite(a) => crate::suite::run(g.json, a).await,
        BenchCmd::Echo(a) => {
            tokio::task::spawn_blocking(move || crate::bench::hop::echo(&a.connect, a.cpu))
                .await??;
            Ok(0)
        }
    }
}
