//! `raftmq`: deploy a local cluster, send, consume, query, administer, benchmark and test
//! failover. `raftmq --help` lists the commands; each has `--help` with examples.

use clap::Parser;
use raftmq_cli::cmd;

/// mimalloc, as the node: `bench` runs the load generator on the same machine as the nodes,
/// so every cycle its allocator spends is taken from them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    // One thread: the current-thread scheduler. The multi-thread one with a single worker
    // runs a task woken by the running task next (its LIFO slot), so a connection's task
    // wrote each send a producer queued as soon as it was queued; in order, the sends a
    // batch of answers released leave in one write (a bench of 1 x 64 single sends: 41-44
    // messages per Raft entry against 26-28, 1.0-1.28 x the rate).
    let mut builder = match cli.global.threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(usize::from(n));
            b
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("raftmq: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(code) => std::process::ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            let line = format!("{e:#}").replace('\n', " | ");
            eprintln!("raftmq: {line}");
            std::process::ExitCode::FAILURE
        }
    }
}
