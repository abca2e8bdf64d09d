//! The `raftmq` command line: argument definitions and dispatch to one module per command.

pub mod bench;
pub mod cert;
pub mod cluster;
pub mod consume;
pub mod query;
pub mod send;
pub mod topic;
pub mod user;
pub mod view;

use std::path::PathBuf;

use clap::Args;
use clap::Parser;
use clap::Subcommand;
use raftmq_client::Client;
use raftmq_client::ClientOptions;

use crate::deploy::manifest::Manifest;
use crate::failover::FailoverArgs;

const EXAMPLES: &str = "\
Examples:
  raftmq cluster up                          start a local 3-node cluster in ./raftmq-data
  raftmq send --topic orders --body hello    send one message
  raftmq consume --topic orders              print every message of the topic
  raftmq cluster kill 1                      SIGKILL node 1 (e.g. the leader)
  raftmq failover-test --duration 60s        produce while killing leaders, then check
  raftmq cluster down                        stop every node (data is kept)
  raftmq send --servers 10.0.0.1:9201 --topic t --body x   use a remote cluster";

/// raftmq: run, use and test a Raft-replicated message broker.
#[derive(Debug, Parser)]
#[command(name = "raftmq", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Where to find the cluster.
    #[command(flatten)]
    pub global: Global,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args, Clone)]
pub struct Global {
    /// Manifest of a local cluster (written by `cluster up`).
    #[arg(
        long,
        global = true,
        env = "RAFTMQ_CLUSTER",
        default_value = "./raftmq-data/cluster.toml"
    )]
    pub cluster: PathBuf,
    /// Client addresses of cluster members (host:port,...); overrides --cluster.
    #[arg(long, global = true, env = "RAFTMQ_SERVERS", value_delimiter = ',')]
    pub servers: Vec<String>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Access key that signs every call (authenticated clusters); overrides cluster.toml's.
    #[arg(long, global = true, env = "RAFTMQ_ACCESS_KEY")]
    pub access_key: Option<String>,
    /// Secret key of --access-key.
    #[arg(long, global = true, env = "RAFTMQ_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,
    /// PEM CA file to verify the nodes' TLS certificates (a cluster not started by `cluster
    /// up --secure`; for one that was, its cluster.toml names the CA). [default: plaintext]
    #[arg(long, global = true, env = "RAFTMQ_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Threads of this command's async runtime. One drives a `bench` of about 40k sends/s
    /// and leaves the other cores to a local cluster's nodes on the same machine (on 2 cores,
    /// 4 x 64 single sends ran up to 20% slower at 2); raise it for a bench against remote
    /// nodes.
    #[arg(long, global = true, env = "RAFTMQ_THREADS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Deploy and administer a local cluster.
    #[command(subcommand)]
    Cluster(cluster::ClusterCmd),
    /// Send messages.
    Send(send::SendArgs),
    /// Read messages of a topic (optionally as a consumer group).
    Consume(consume::ConsumeArgs),
    /// Look messages up by id or key.
    Query(query::QueryArgs),
    /// Create, update, delete and list topics.
    #[command(subcommand)]
    Topic(topic::TopicCmd),
    /// Measure produce or consume throughput and latency.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Produce while injecting faults into the local cluster, then check every invariant.
    FailoverTest(FailoverArgs),
    /// Create, list and delete users (authenticated clusters; admin only).
    #[command(subcommand)]
    User(user::UserCmd),
    /// Issue TLS certificates for a cluster deployed by hand (a CA, then one per node).
    #[command(subcommand)]
    Cert(cert::CertCmd),
}

impl Global {
    /// Seed addresses: --servers, else the manifest's client addresses.
    pub fn seeds(&self) -> anyhow::Result<Vec<String>> {
        if !self.servers.is_empty() {
            return Ok(self.servers.clone());
        }
        Ok(Manifest::load(&self.cluster)?.client_addrs())
    }

    /// The local cluster's manifest (commands that manage processes need one).
    pub fn manifest(&self) -> anyhow::Result<Manifest> {
        Manifest::load(&self.cluster)
    }

    /// A client for the cluster.
    pub fn client(&self) -> anyhow::Result<Client> {
        self.client_with(crate::client_tls::options())
    }

    /// The CA clients trust: --tls-ca, else (no --servers) the local cluster's `tls-ca`.
    pub fn tls_ca(&self) -> Option<PathBuf> {
        if self.tls_ca.is_some() || !self.servers.is_empty() {
            return self.tls_ca.clone();
        }
        Manifest::load(&self.cluster).ok().and_then(|m| m.tls_ca)
    }

    /// A client that has asked the cluster for its leader ([`Client::connect`]), for commands
    /// that read what was sent (`consume`, `query`, `topic`): its reads go to the leader,
    /// which answers a send only once it has applied it, so a read right after a send sees
    /// it. A fresh client read from its first seed, often a follower, which applies an entry
    /// only once it learns the commit index with the next replication request (`send` then
    /// `consume` on a loaded machine missed the last batch).
    pub async fn leader_client(&self) -> anyhow::Result<Client> {
        Ok(Client::connect(
            &self.seeds()?,
            crate::credentials::signed(crate::client_tls::options()),
        )
        .await?)
    }

    /// A client for the cluster with given options.
    pub fn client_with(&self, opts: ClientOptions) -> anyhow::Result<Client> {
        Ok(Client::new(
            &self.seeds()?,
            crate::credentials::signed(opts),
        )?)
    }
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    let g = cli.global;
    crate::credentials::init(&g)?;
    crate::client_tls::set(g.tls_ca().as_deref())?;
    match cli.command {
        Command::Cluster(c) => cluster::run(&g, c).await,
        Command::Send(a) => send::run(&g, a).await,
        Command::Consume(a) => consume::run(&g, a).await,
        Command::Query(a) => query::run(&g, a).await,
        Command::Topic(c) => topic::run(&g, c).await,
        Command::Bench(c) => bench::run(&g, c).await,
        Command::User(c) => user::run(&g, c).await,
        Command::FailoverTest(a) => crate::failover::run(g.manifest()?, g.json, a).await,
        Command::Cert(c) => cert::run(&g, c),
    }
}

#[cfg(test)]
mod cmd_tests;
