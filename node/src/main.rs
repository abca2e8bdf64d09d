//! `raftmq-node`: parses and validates the configuration, then (for now) exits: the server
//! assembly lands once the storage crates do.

use clap::Parser;
use raftmq_node::config::NodeArgs;

fn main() -> std::process::ExitCode {
    let args = NodeArgs::parse();
    let cfg = match args.resolve() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("raftmq-node: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    eprintln!(
        "raftmq-node: configuration of node {} (cluster {:?}) is valid, but the server is not yet \
         wired (waiting for the raft-log and store crates); exiting",
        cfg.node_id, cfg.cluster_id
    );
    std::process::ExitCode::from(1)
}
