//! The node's secret material: the cluster key that seals users' secret keys (ChaCha20-Poly1305,
//! a random nonce per secret, the user's name and access key as associated data), the root
//! credential of `auth-admin-file`, and the generation of new access and secret keys from the
//! OS's randomness. No `Debug` here prints a secret.

use std::fmt;
use std::path::Path;

use chacha20poly1305::aead::Aead;
use chacha20poly1305::aead::Payload;
use chacha20poly1305::ChaCha20Poly1305;
use chacha20poly1305::KeyInit;
use chacha20poly1305::Nonce;
use raftmq_store::users::SealedSecret;

use crate::config::ConfigError;
use crate::error::NodeError;

/// Bytes of the cluster key.
pub const CLUSTER_KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Random bytes from the OS.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], NodeError> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b)
        .map_err(|e| NodeError::Internal(format!("no OS randomness: {e}")))?;
    Ok(b)
}

/// A new access key: `AK` and 20 upper-case hex digits (80 random bits).
pub fn new_access_key() -> Result<String, NodeError> {
    Ok(format!("AK{}", hex::encode_upper(random_bytes::<10>()?)))
}

/// A new secret key: 64 hex digits (256 random bits). Its UTF-8 bytes are the HMAC key, as
/// RocketMQ clients use it.
pub fn new_secret_key() -> Result<String, NodeError> {
    Ok(hex::encode(random_bytes::<32>()?))
}

/// The key that seals the users' secret keys (the same on every node).
pub struct ClusterKey {
    cipher: ChaCha20Poly1305,
}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterKey(<redacted>)")
    }
}

fn aad(name: &str, access_key: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(name.len() + access_key.len() + 1);
    a.extend_from_slice(name.as_bytes());
    a.push(0);
    a.extend_from_slice(access_key.as_bytes());
    a
}

impl ClusterKey {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; CLUSTER_KEY_LEN]) -> Self {
        Self {
            cipher: ChaCha20Poly1305::new(bytes.into()),
        }
    }

    /// Reads `auth-key-file`: 64 hex digits (surrounding white space ignored).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let field = "auth-key-file";
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(field, format!("cannot read {}: {e}", path.display())))?;
        let bytes = hex::decode(text.trim()).map_err(|e| {
            invalid(
                field,
                format!("{} is not 64 hex digits: {e}", path.display()),
            )
        })?;
        let bytes: [u8; CLUSTER_KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
            invalid(
                field,
                format!(
                    "{} holds {} bytes; the cluster key is {CLUSTER_KEY_LEN} (64 hex digits)",
                    path.display(),
                    bytes.len()
                ),
            )
        })?;
        Ok(Self::from_bytes(&bytes))
    }

    /// Encrypts `secret_key` for the user `name` / `access_key`: nonce || ciphertext+tag.
    pub fn seal(
        &self,
        name: &str,
        access_key: &str,
        secret_key: &str,
    ) -> Result<SealedSecret, NodeError> {
        let nonce = random_bytes::<NONCE_LEN>()?;
        let ad = aad(name, access_key);
        let ct = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret_key.as_bytes(),
                    aad: &ad,
                },
            )
            .map_err(|_| NodeError::Internal("sealing a secret key failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ct);
        Ok(SealedSecret(out))
    }

    /// Decrypts a sealed secret of `name` / `access_key`. Fails if it was sealed with another
    /// key or for another user (or was altered).
    pub fn open(
        &self,
        name: &str,
        access_key: &str,
        sealed: &SealedSecret,
    ) -> Result<Vec<u8>, NodeError> {
        if sealed.0.len() < NONCE_LEN {
            return Err(NodeError::Internal(format!(
                "sealed secret of user '{name}' is {} bytes",
                sealed.0.len()
            )));
        }
        let (nonce, ct) = sealed.0.split_at(NONCE_LEN);
        let ad = aad(name, access_key);
        self.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: &ad })
            .map_err(|_| {
                NodeError::Internal(format!(
                    "the secret of user '{name}' does not open with this node's auth-key-file \
                     (is it the same file on every node?)"
                ))
            })
    }
}

/// The root credential (`auth-admin-file`).
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AdminCredential {
    /// Access key.
    pub access_key: String,
    /// Secret key.
    pub secret_key: String,
}

impl fmt::Debug for AdminCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminCredential")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish()
    }
}

impl AdminCredential {
    /// Reads `auth-admin-file` (TOML `access-key`, `secret-key`).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let field = "auth-admin-file";
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(field, format!("cannot read {}: {e}", path.display())))?;
        let c: AdminCredential = toml::from_str(&text).map_err(|e| {
            invalid(
                field,
                format!(
                    "{}: expected access-key = \"..\" and secret-key = \"..\": {}",
                    path.display(),
                    e.message()
                ),
            )
        })?;
        if c.access_key.is_empty() || c.secret_key.len() < 16 {
            return Err(invalid(
                field,
                format!(
                    "{}: access-key must not be empty and secret-key needs at least 16 characters",
                    path.display()
                ),
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_round_trip_bound_to_user_and_key() {
        let k = ClusterKey::from_bytes(&[7; 32]);
        let s = k.seal("alice", "AK1", "the-secret").expect("seal");
        assert!(
            !s.0.windows(10).any(|w| w == b"the-secret"),
            "ciphertext only"
        );
        assert_eq!(k.open("alice", "AK1", &s).expect("open"), b"the-secret");
        // A second seal uses a new nonce.
        assert_ne!(k.seal("alice", "AK1", "the-secret").expect("seal").0, s.0);
        assert!(k.open("bob", "AK1", &s).is_err(), "bound to the name");
        assert!(
            k.open("alice", "AK2", &s).is_err(),
            "bound to the access key"
        );
        let other = ClusterKey::from_bytes(&[8; 32]);
        let e = other.open("alice", "AK1", &s).expect_err("other key");
        assert!(e.to_string().contains("auth-key-file"), "{e}");
        assert!(k.open("alice", "AK1", &SealedSecret(vec![1, 2])).is_err());
    }

    #[test]
    fn files_parse_with_clear_errors() {
        let d = tempfile::tempdir().expect("tempdir");
        let key = d.path().join("key");
        std::fs::write(&key, format!("{}\n", "ab".repeat(32))).expect("write");
        ClusterKey::load(&key).expect("64 hex digits");
        std::fs::write(&key, "abcd").expect("write");
        let e = ClusterKey::load(&key).expect_err("short").to_string();
        assert!(e.contains("auth-key-file") && e.contains("2 bytes"), "{e}");
        std::fs::write(&key, "zz").expect("write");
        assert!(ClusterKey::load(&key)
            .expect_err("hex")
            .to_string()
            .contains("hex"));

        let admin = d.path().join("admin");
        std::fs::write(
            &admin,
            "access-key = \"root\"\nsecret-key = \"0123456789abcdef\"\n",
        )
        .expect("write");
        let c = AdminCredential::load(&admin).expect("admin");
        assert_eq!(c.access_key, "root");
        assert!(
            !format!("{c:?}").contains("0123456789abcdef"),
            "Debug redacts"
        );
        std::fs::write(&admin, "access-key = \"root\"\n").expect("write");
        let e = AdminCredential::load(&admin)
            .expect_err("no secret")
            .to_string();
        assert!(
            e.contains("auth-admin-file") && e.contains("secret-key"),
            "{e}"
        );
    }

    #[test]
    fn generated_keys_have_their_form() {
        let ak = new_access_key().expect("ak");
        assert!(ak.starts_with("AK") && ak.len() == 22, "{ak}");
        let sk = new_secret_key().expect("sk");
        assert_eq!(sk.len(), 64);
        assert_ne!(sk, new_secret_key().expect("sk"));
    }
}
