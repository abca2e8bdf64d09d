//! The authentication half of `raftmq cluster up --secure`: a cluster key file and a root
//! (admin) credential in `<dir>/auth/` (every file mode 0600), the node settings that turn
//! authentication on with them, and the manifest fields that make every later
//! `raftmq --cluster ...` command sign with the admin credential.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use raftmq_node::auth::keys::new_access_key;
use raftmq_node::auth::keys::new_secret_key;
use raftmq_node::auth::keys::random_bytes;
use raftmq_node::auth::keys::CLUSTER_KEY_LEN;

use super::node_config::NodeSetting;

/// What `--secure` generated for authentication.
#[derive(Debug)]
pub struct SecureAuth {
    /// `auth-enabled`, `auth-key-file`, `auth-admin-file` for every node.
    pub settings: Vec<NodeSetting>,
    /// The admin access key (for `cluster.toml`).
    pub access_key: String,
    /// The file holding the admin secret key alone (for `cluster.toml`).
    pub secret_file: PathBuf,
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn setting(key: &str, value: &str) -> anyhow::Result<NodeSetting> {
    format!("{key}={value}")
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))
}

/// Generates the key file and the admin credential under `<dir>/auth/` (refused if it exists:
/// a cluster keeps its key).
pub fn generate(dir: &Path) -> anyhow::Result<SecureAuth> {
    let auth = dir.join("auth");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::create_dir(&auth).with_context(|| {
        format!(
            "cannot create {} (a cluster made with --secure keeps its keys)",
            auth.display()
        )
    })?;
    let key_file = auth.join("cluster.key");
    let key = random_bytes::<CLUSTER_KEY_LEN>().map_err(|e| anyhow::anyhow!("{e}"))?;
    write_private(&key_file, &format!("{}\n", hex_of(&key)))?;
    let access_key = new_access_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    let secret_key = new_secret_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    let admin_file = auth.join("admin.toml");
    write_private(
        &admin_file,
        &format!("access-key = \"{access_key}\"\nsecret-key = \"{secret_key}\"\n"),
    )?;
    let secret_file = auth.join("admin.secret");
    write_private(&secret_file, &format!("{secret_key}\n"))?;
    let quoted = |p: &Path| format!("{:?}", p.display().to_string());
    Ok(SecureAuth {
        settings: vec![
            setting("auth-enabled", "true")?,
            setting("auth-key-file", &quoted(&key_file))?,
            setting("auth-admin-file", &quoted(&admin_file))?,
        ],
        access_key,
        secret_file,
    })
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_readable_by_the_node() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = generate(d.path()).expect("generate");
        for f in ["cluster.key", "admin.toml", "admin.secret"] {
            let mode = std::fs::metadata(d.path().join("auth").join(f))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        raftmq_node::auth::keys::ClusterKey::load(&d.path().join("auth/cluster.key"))
            .expect("node reads the key");
        let admin =
            raftmq_node::auth::keys::AdminCredential::load(&d.path().join("auth/admin.toml"))
                .expect("node reads the admin file");
        assert_eq!(admin.access_key, s.access_key);
        assert_eq!(
            crate::credentials::read_secret_file(&s.secret_file).expect("secret"),
            admin.secret_key
        );
        assert_eq!(s.settings.len(), 3);
        assert!(generate(d.path()).is_err(), "keys are never replaced");
    }
}
