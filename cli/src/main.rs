//! `raftmq`: deploy a local cluster, send, consume, query, administer, benchmark and test
//! failover. `raftmq --help` lists the commands; each has `--help` with examples.

use clap::Parser;
use raftmq_cli::cmd;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
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
