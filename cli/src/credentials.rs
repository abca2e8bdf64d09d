//! The credential the `raftmq` command signs its calls with: `--access-key` / `--secret-key`
//! (or `RAFTMQ_ACCESS_KEY` / `RAFTMQ_SECRET_KEY`), which override the one `cluster.toml`
//! names (`access-key` and a 0600 `secret-file`, written by `cluster up --secure`).
//!
//! It is resolved once per run ([`init`]) and added by [`signed`] to the options of every
//! client the command builds, so each subcommand (status, send, bench, failover-test, ...)
//! works on an authenticated cluster with no flag of its own.

use std::path::Path;
use std::sync::RwLock;

use anyhow::bail;
use anyhow::Context;
use raftmq_client::ClientOptions;
use raftmq_client::Credentials;

use crate::cmd::Global;
use crate::deploy::manifest::Manifest;

static CURRENT: RwLock<Option<Credentials>> = RwLock::new(None);

/// Reads a secret key file: its text, trimmed; refused unless only its owner may read it.
pub fn read_secret_file(path: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read secret file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "secret file {} has mode {mode:04o}; it holds a secret key: chmod 600 it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read secret file {}", path.display()))?;
    Ok(text.trim().to_string())
}

/// The credential of this run: the flags (or their environment variables) if given, else the
/// manifest's when `--servers` is not used and the manifest names one, else none.
pub fn resolve(g: &Global) -> anyhow::Result<Option<Credentials>> {
    match (&g.access_key, &g.secret_key) {
        (Some(ak), Some(sk)) => return Ok(Some(Credentials::new(ak, sk))),
        (Some(_), None) => bail!("--access-key needs --secret-key (or RAFTMQ_SECRET_KEY)"),
        (None, Some(_)) => bail!("--secret-key needs --access-key (or RAFTMQ_ACCESS_KEY)"),
        (None, None) => {}
    }
    if !g.servers.is_empty() || !g.cluster.exists() {
        return Ok(None);
    }
    let m = Manifest::load(&g.cluster)?;
    from_manifest(&m)
}

/// The credential a manifest names, if any.
pub fn from_manifest(m: &Manifest) -> anyhow::Result<Option<Credentials>> {
    match (&m.access_key, &m.secret_file) {
        (Some(ak), Some(file)) => Ok(Some(Credentials::new(ak, read_secret_file(file)?))),
        _ => Ok(None),
    }
}

/// Makes `c` the credential of every client built from now on.
pub fn set(c: Option<Credentials>) {
    *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = c;
}

/// Resolves and sets this run's credential.
pub fn init(g: &Global) -> anyhow::Result<()> {
    set(resolve(g)?);
    Ok(())
}

/// `opts` signed with this run's credential (unless they carry one).
pub fn signed(mut opts: ClientOptions) -> ClientOptions {
    if opts.credentials.is_none() {
        opts.credentials = CURRENT.read().unwrap_or_else(|p| p.into_inner()).clone();
    }
    opts
}
