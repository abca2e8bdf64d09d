//! The TLS of every client the `raftmq` command makes (status probes, send, consume, bench,
//! failover-test): set once per command from `--tls-ca` / `RAFTMQ_TLS_CA` or, for a cluster
//! started by `cluster up --secure`, the CA path in its `cluster.toml` ([`set`]); every
//! client takes its [`options`].

use std::path::Path;
use std::sync::RwLock;

use raftmq_client::ClientOptions;
use raftmq_client::ClientTls;

/// The TLS of this command's clients (None: plaintext).
static TLS: RwLock<Option<ClientTls>> = RwLock::new(None);

/// Makes this command's clients trust the CA file `ca` (None: plaintext).
pub fn set(ca: Option<&Path>) -> anyhow::Result<()> {
    let tls = match ca {
        Some(p) => Some(ClientTls::from_ca_file(p)?),
        None => None,
    };
    *TLS.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = tls;
    Ok(())
}

/// The client defaults with this command's TLS.
pub fn options() -> ClientOptions {
    ClientOptions {
        tls: TLS
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone(),
        ..ClientOptions::default()
    }
}
