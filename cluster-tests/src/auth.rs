//! The auth option of test clusters: [`TestAuth`] makes a cluster key file and a root
//! credential (both 0600) and turns `auth-enabled` on in a node's config
//! ([`TestAuth::apply`], for `TestCluster::start`'s tweak); [`signed`] signs a raw gRPC request.
//! Without it a test cluster stays unauthenticated.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use raftmq_client::Credentials;
use raftmq_node::config::NodeConfig;
use raftmq_proto::signature;

/// Root access key of authenticated test clusters.
pub const ROOT_ACCESS_KEY: &str = "ROOTTEST";

/// The secret files of an authenticated test cluster.
pub struct TestAuth {
    /// Holds the files.
    pub dir: tempfile::TempDir,
    /// The cluster key file.
    pub key_file: PathBuf,
    /// The root credential file.
    pub admin_file: PathBuf,
    /// The root credential.
    pub admin: Credentials,
}

fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

impl TestAuth {
    /// New random key and root secret.
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let key =
            raftmq_node::auth::keys::random_bytes::<32>().map_err(|e| anyhow::anyhow!("{e}"))?;
        let key_hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let key_file = dir.path().join("cluster.key");
        write_private(&key_file, &key_hex)?;
        let secret =
            raftmq_node::auth::keys::new_secret_key().map_err(|e| anyhow::anyhow!("{e}"))?;
        let admin_file = dir.path().join("admin.toml");
        write_private(
            &admin_file,
            &format!("access-key = \"{ROOT_ACCESS_KEY}\"\nsecret-key = \"{secret}\"\n"),
        )?;
        Ok(Self {
            dir,
            key_file,
            admin_file,
            admin: Credentials::new(ROOT_ACCESS_KEY, secret),
        })
    }

    /// Turns authentication on in `cfg` with these files.
    pub fn apply(&self, cfg: &mut NodeConfig) {
        cfg.auth.auth_enabled = true;
        cfg.auth.auth_key_file = Some(self.key_file.clone());
        cfg.auth.auth_admin_file = Some(self.admin_file.clone());
    }
}

/// `msg` as a request signed with `c` (now).
pub fn signed<T>(msg: T, c: &Credentials) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let (date_time, authorization) = signature::sign_now(&c.access_key, &c.secret_key);
    let md = r.metadata_mut();
    md.insert(
        signature::DATE_TIME_KEY,
        date_time.parse().expect("RFC 3339 is a header value"),
    );
    md.insert(
        signature::AUTHORIZATION_KEY,
        authorization
            .parse()
            .expect("test access keys are header values"),
    );
    r
}
