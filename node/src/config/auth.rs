//! The authentication settings of a node ([`AuthConfig`], embedded flat in
//! [`NodeConfig`](super::NodeConfig)) and their flags ([`AuthArgs`]).
//!
//! With `auth-enabled` every call to the client API and the RocketMQ service must be signed
//! (`MQv2-HMAC-SHA1`, see `crate::auth`); the key file and the admin file are then required
//! and must be private to the node's user (mode 0600 or stricter), since they hold the
//! cluster's root secrets.

use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

use super::ConfigError;

/// Authentication and authorization settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct AuthConfig {
    /// Require a signed access key on every client and RocketMQ call and enforce the users'
    /// roles. Cluster-wide: set it on every node. Default false.
    pub auth_enabled: bool,
    /// The cluster key that encrypts the users' secret keys: 64 hex digits (32 random bytes),
    /// the same file on every node, mode 0600. Required with auth-enabled. Default unset.
    pub auth_key_file: Option<PathBuf>,
    /// The root credential, valid on every node whatever the user table says: a TOML file
    /// with `access-key = ".."` and `secret-key = ".."`, mode 0600. Required with
    /// auth-enabled. Default unset.
    pub auth_admin_file: Option<PathBuf>,
    /// How far a signed request's `x-mq-date-time` may be from this node's clock, in ms
    /// (replay window). Default 900000 (15 min); range 1000..=86400000.
    pub auth_max_skew_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            auth_enabled: false,
            auth_key_file: None,
            auth_admin_file: None,
            auth_max_skew_ms: 15 * 60 * 1000,
        }
    }
}

/// The flags of [`AuthConfig`] (flattened into `raftmq-node`'s command line).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AuthArgs {
    /// Require signed access keys and enforce roles. [default false]
    #[arg(long)]
    pub auth_enabled: Option<bool>,
    /// Cluster key file (64 hex digits, mode 0600), the same on every node. [default: none]
    #[arg(long)]
    pub auth_key_file: Option<PathBuf>,
    /// Root credential file (TOML access-key / secret-key, mode 0600). [default: none]
    #[arg(long)]
    pub auth_admin_file: Option<PathBuf>,
    /// Largest allowed clock difference of a signed request, ms. [default 900000;
    /// 1000..=86400000]
    #[arg(long)]
    pub auth_max_skew_ms: Option<u64>,
}

impl AuthArgs {
    /// Writes every flag that was given over `cfg`.
    pub fn apply(self, cfg: &mut AuthConfig) {
        if let Some(v) = self.auth_enabled {
            cfg.auth_enabled = v;
        }
        if let Some(v) = self.auth_key_file {
            cfg.auth_key_file = Some(v);
        }
        if let Some(v) = self.auth_admin_file {
            cfg.auth_admin_file = Some(v);
        }
        if let Some(v) = self.auth_max_skew_ms {
            cfg.auth_max_skew_ms = v;
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Checks that `path` is a regular file readable only by its owner (no group/other bits).
pub fn check_private_file(field: &'static str, path: &Path) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| invalid(field, format!("cannot read {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(invalid(field, format!("{} is not a file", path.display())));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(invalid(
            field,
            format!(
                "{} has mode {mode:04o}; it holds a secret: chmod 600 it",
                path.display()
            ),
        ));
    }
    Ok(())
}

impl AuthConfig {
    /// Checks the settings; with auth enabled, that both files are set and private.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1000..=86_400_000).contains(&self.auth_max_skew_ms) {
            return Err(invalid(
                "auth-max-skew-ms",
                format!("{} is outside 1000..=86400000", self.auth_max_skew_ms),
            ));
        }
        if !self.auth_enabled {
            return Ok(());
        }
        let key = self
            .auth_key_file
            .as_deref()
            .ok_or_else(|| invalid("auth-key-file", "required when auth-enabled = true"))?;
        check_private_file("auth-key-file", key)?;
        let admin = self
            .auth_admin_file
            .as_deref()
            .ok_or_else(|| invalid("auth-admin-file", "required when auth-enabled = true"))?;
        check_private_file("auth-admin-file", admin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn private(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "x").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn off_by_default_and_files_required_when_on() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut c = AuthConfig::default();
        assert!(!c.auth_enabled);
        assert_eq!(c.auth_max_skew_ms, 900_000);
        c.validate().expect("off: nothing required");
        c.auth_enabled = true;
        let e = c.validate().expect_err("no key file").to_string();
        assert!(e.contains("auth-key-file") && e.contains("required"), "{e}");
        c.auth_key_file = Some(private(d.path(), "key", 0o600));
        let e = c.validate().expect_err("no admin file").to_string();
        assert!(e.contains("auth-admin-file"), "{e}");
        c.auth_admin_file = Some(private(d.path(), "admin", 0o644));
        let e = c.validate().expect_err("world readable").to_string();
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        c.auth_admin_file = Some(private(d.path(), "admin2", 0o400));
        c.validate().expect("valid");
        c.auth_key_file = Some(d.path().join("missing"));
        assert!(c
            .validate()
            .expect_err("missing")
            .to_string()
            .contains("cannot read"));
        c.auth_enabled = false;
        c.auth_max_skew_ms = 10;
        let e = c.validate().expect_err("skew").to_string();
        assert!(e.contains("auth-max-skew-ms"), "{e}");
    }

    #[test]
    fn file_keys_and_flags() {
        use clap::Parser;
        let d = tempfile::tempdir().expect("tempdir");
        let key = private(d.path(), "key", 0o600);
        let admin = private(d.path(), "admin", 0o600);
        let text = format!(
            "auth-enabled = true\nauth-key-file = {key:?}\nauth-admin-file = {admin:?}\n\
             auth-max-skew-ms = 60000\n"
        );
        let c = super::super::NodeConfig::from_toml_str(&text, Path::new("t.toml")).expect("file");
        assert!(c.auth.auth_enabled);
        assert_eq!(c.auth.auth_key_file.as_deref(), Some(key.as_path()));
        assert_eq!(c.auth.auth_max_skew_ms, 60_000);
        let args = super::super::NodeArgs::try_parse_from([
            "raftmq-node",
            "--auth-enabled",
            "true",
            "--auth-max-skew-ms",
            "5000",
        ])
        .expect("flags");
        let e = args.resolve().expect_err("files missing").to_string();
        assert!(e.contains("auth-key-file"), "{e}");
    }
}
