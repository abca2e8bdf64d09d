//! `raftmq cert ca|node`: issue the certificates of a cluster deployed by hand, the same
//! kind `cluster up --secure` makes (see [`crate::certs`]): a cluster CA, then one
//! certificate per node naming `raftmq://<cluster-id>/node/<id>` and the hosts it is dialed at.

use std::path::PathBuf;

use clap::Subcommand;
use serde::Serialize;

use super::Global;
use crate::certs;
use crate::output::print_json;

/// Certificate commands.
#[derive(Debug, Subcommand)]
pub enum CertCmd {
    /// Create a cluster CA: <dir>/tls/ca.crt and ca.key (0600).
    #[command(after_help = "Example: raftmq cert ca --dir ./pki --cluster-id prod")]
    Ca {
        /// Directory to write `tls/` into.
        #[arg(long)]
        dir: PathBuf,
        /// The cluster id the node certificates will name.
        #[arg(long)]
        cluster_id: String,
    },
    /// Issue node <id>'s certificate from the CA in <dir>: <dir>/tls/node-<id>.crt and .key.
    #[command(
        after_help = "Example: raftmq cert node --dir ./pki --cluster-id prod --id 2 \
                            --host 10.0.0.12 --host mq-2.internal"
    )]
    Node {
        /// Directory holding `tls/ca.key` (from `raftmq cert ca`).
        #[arg(long)]
        dir: PathBuf,
        /// The cluster id (as given to `cert ca`).
        #[arg(long)]
        cluster_id: String,
        /// The node id.
        #[arg(long)]
        id: u64,
        /// An IP address or DNS name clients and peers dial (repeatable; localhost and
        /// 127.0.0.1 are always included).
        #[arg(long = "host")]
        hosts: Vec<String>,
    },
}

/// Paths written.
#[derive(Debug, Serialize)]
struct Written {
    cert: PathBuf,
    key: Option<PathBuf>,
    ca: PathBuf,
}

/// Runs a `cert` command.
pub fn run(g: &Global, c: CertCmd) -> anyhow::Result<i32> {
    let w = match c {
        CertCmd::Ca { dir, cluster_id } => {
            let key = dir.join(certs::TLS_DIR).join(certs::CA_KEY_FILE);
            anyhow::ensure!(
                !key.exists(),
                "{} exists: a CA is there already",
                key.display()
            );
            let ca = certs::ClusterCa::generate(&cluster_id)?;
            let cert = certs::write_ca(&dir, &ca)?;
            Written {
                ca: cert.clone(),
                cert,
                key: Some(key),
            }
        }
        CertCmd::Node {
            dir,
            cluster_id,
            id,
            hosts,
        } => {
            let ca = certs::load_ca(&dir, &cluster_id)?;
            let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
            let p = certs::write_node_cert(&dir, &ca, id, &hosts)?;
            Written {
                cert: p.cert,
                key: Some(p.key),
                ca: p.ca,
            }
        }
    };
    if g.json {
        print_json(&w)?;
    } else {
        println!("certificate: {}", w.cert.display());
        if let Some(k) = &w.key {
            println!("key (0600):  {}", k.display());
        }
        println!("cluster CA:  {}", w.ca.display());
    }
    Ok(0)
}

#[cfg(test)]
#[path = "cert_tests.rs"]
mod tests;
