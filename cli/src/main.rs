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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(cli.global.threads))
        .enable_all()
        .build()
    {
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
