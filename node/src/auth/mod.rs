//! Authentication of client and RocketMQ calls: who signed this request ([`Authenticator`] ->
//! [`Principal`]), and what that principal may do ([`policy::authorize`]).
//!
//! A call is signed the RocketMQ 5 way (`raftmq_proto::signature`). With `auth-enabled` off
//! every call is [`Principal::Anonymous`] and may do everything (as before). With it on, the
//! `authorization` header names an access key: the root credential of `auth-admin-file`
//! (valid on every node whatever the replicated table says, so the operator is never locked
//! out), or a user of the replicated [`UserTable`](raftmq_store::users::UserTable), whose
//! sealed secret is opened with the cluster key ([`keys::ClusterKey`]). The signature is
//! checked in constant time, then the date-time against this node's clock
//! (`auth-max-skew-ms`, the replay window). Streams are checked once, when they start.
//!
//! **Node to node.** A node's own calls to another node's client port (status of a peer, a
//! join, a write forwarded to the leader) are signed with the root credential
//! ([`Authenticator::sign_internal`]), which every node holds. A forwarded write also names the
//! caller's access key in [`ON_BEHALF_OF_KEY`]: the leader, seeing a root signature with it,
//! authorizes that user, so it checks the same caller as the follower did. This works for a
//! long `SendStream` too (the caller's own signature would leave the skew window), and only
//! narrows what root may do.

pub mod keys;
pub mod policy;

use std::time::Duration;

use raftmq_proto::signature;
use raftmq_proto::signature::AUTHORIZATION_KEY;
use raftmq_proto::signature::DATE_TIME_KEY;
use raftmq_store::users::Role;
use raftmq_store::users::User;
use raftmq_store::Store;
use time::OffsetDateTime;
use tonic::metadata::MetadataMap;

use self::keys::AdminCredential;
use self::keys::ClusterKey;
use crate::config::AuthConfig;
use crate::config::ConfigError;
use crate::error::NodeError;

/// Metadata key of a forwarded call: the access key of the user the forwarding node acts for
/// (only honoured under a root signature).
pub const ON_BEHALF_OF_KEY: &str = "x-raftmq-on-behalf-of";

/// Who made a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// Authentication is off: everything is allowed.
    Anonymous,
    /// The root credential of `auth-admin-file` (role admin).
    Root {
        /// Its access key.
        access_key: String,
    },
    /// A user of the replicated table (secret still sealed).
    User(User),
}

impl Principal {
    /// The role (`Anonymous` and `Root` act as admin).
    pub fn role(&self) -> Role {
        match self {
            Principal::Anonymous | Principal::Root { .. } => Role::Admin,
            Principal::User(u) => u.role,
        }
    }

    /// A name for messages and logs (never a secret).
    pub fn name(&self) -> &str {
        match self {
            Principal::Anonymous => "anonymous",
            Principal::Root { .. } => "root",
            Principal::User(u) => &u.name,
        }
    }
}

/// The node's authentication state: settings and secrets, loaded once at start.
#[derive(Debug)]
pub struct Authenticator {
    /// None: authentication is off.
    on: Option<Secrets>,
    max_skew: Duration,
}

#[derive(Debug)]
struct Secrets {
    key: ClusterKey,
    admin: AdminCredential,
}

fn unauthenticated(reason: impl Into<String>) -> NodeError {
    NodeError::Unauthenticated(reason.into())
}

/// How a refusal for an access key that is neither root nor in the user table begins.
const UNKNOWN_ACCESS_KEY: &str = "unknown access key";

/// How long a node that is not the leader keeps looking for an access key it does not know
/// before refusing it. A user reaches a follower's table when the follower applies its entry,
/// normally within a heartbeat of the leader's reply, and a client may call any node at once.
pub const USER_CATCH_UP: Duration = Duration::from_secs(1);

impl Authenticator {
    /// Off: every call is anonymous.
    pub fn disabled() -> Self {
        Self {
            on: None,
            max_skew: Duration::from_secs(900),
        }
    }

    /// On, with the given secrets (tests and tools).
    pub fn with_secrets(key: ClusterKey, admin: AdminCredential, max_skew: Duration) -> Self {
        Self {
            on: Some(Secrets { key, admin }),
            max_skew,
        }
    }

    /// From the (validated) settings: reads the key and admin files when auth is on.
    pub fn from_config(cfg: &AuthConfig) -> Result<Self, ConfigError> {
        let max_skew = Duration::from_millis(cfg.auth_max_skew_ms);
        if !cfg.auth_enabled {
            return Ok(Self { on: None, max_skew });
        }
        let missing = |field| ConfigError::Invalid {
            field,
            reason: "required when auth-enabled = true".into(),
        };
        let key_file = cfg
            .auth_key_file
            .as_deref()
            .ok_or_else(|| missing("auth-key-file"))?;
        let admin_file = cfg
            .auth_admin_file
            .as_deref()
            .ok_or_else(|| missing("auth-admin-file"))?;
        Ok(Self {
            on: Some(Secrets {
                key: ClusterKey::load(key_file)?,
                admin: AdminCredential::load(admin_file)?,
            }),
            max_skew,
        })
    }

    /// True if calls must be signed.
    pub fn enabled(&self) -> bool {
        self.on.is_some()
    }

    /// The cluster key (None when auth is off: users cannot be created then).
    pub fn cluster_key(&self) -> Option<&ClusterKey> {
        self.on.as_ref().map(|s| &s.key)
    }

    /// Signs a call this node makes to another node with the root credential, acting for the
    /// user `for_user` (its access key) if given; nothing when auth is off.
    pub fn sign_internal(&self, md: &mut MetadataMap, for_user: Option<&Principal>) {
        let Some(s) = &self.on else {
            return;
        };
        let (date_time, authorization) = signature::sign(
            &s.admin.access_key,
            &s.admin.secret_key,
            OffsetDateTime::now_utc(),
        );
        let insert = |md: &mut MetadataMap, k: &'static str, v: &str| {
            if let Ok(v) = v.parse() {
                md.insert(k, v);
            }
        };
        insert(md, DATE_TIME_KEY, &date_time);
        insert(md, AUTHORIZATION_KEY, &authorization);
        if let Some(Principal::User(u)) = for_user {
            insert(md, ON_BEHALF_OF_KEY, &u.access_key);
        }
    }

    /// Who signed the call with metadata `md`, checked against `store`'s users at this node's
    /// clock. UNAUTHENTICATED names what is wrong.
    pub fn authenticate(&self, store: &Store, md: &MetadataMap) -> Result<Principal, NodeError> {
        self.authenticate_at(md, OffsetDateTime::now_utc(), |ak| {
            store.user_by_access_key(ak)
        })
    }

    /// [`Self::authenticate`], except on a node that is not the leader (`is_leader`) and does
    /// not know the access key yet: it looks again after each entry it applies, for up to
    /// [`USER_CATCH_UP`], before refusing. Every client-facing handler authenticates this way.
    pub async fn authenticate_applied(
        &self,
        store: &Store,
        is_leader: impl Fn() -> bool,
        md: &MetadataMap,
    ) -> Result<Principal, NodeError> {
        // Subscribed before the first look, so no entry applied after it goes unnoticed.
        let mut applied = store.subscribe_applied();
        let deadline = tokio::time::Instant::now() + USER_CATCH_UP;
        loop {
            let res = self.authenticate(store, md);
            let unknown = matches!(&res, Err(NodeError::Unauthenticated(m))
                if m.starts_with(UNKNOWN_ACCESS_KEY));
            if !unknown || is_leader() {
                return res;
            }
            match tokio::time::timeout_at(deadline, applied.changed()).await {
                Ok(Ok(())) => continue,
                _ => return res,
            }
        }
    }

    /// [`Self::authenticate`] at clock `now`, users looked up by access key with `user_of`.
    pub fn authenticate_at(
        &self,
        md: &MetadataMap,
        now: OffsetDateTime,
        user_of: impl Fn(&str) -> Option<User>,
    ) -> Result<Principal, NodeError> {
        let Some(secrets) = &self.on else {
            return Ok(Principal::Anonymous);
        };
        let header = |key: &str| -> Result<&str, NodeError> {
            md.get(key)
                .ok_or_else(|| {
                    unauthenticated(format!(
                        "missing {key} (sign the call with an access key and secret key)"
                    ))
                })?
                .to_str()
                .map_err(|_| unauthenticated(format!("{key} is not ASCII")))
        };
        let auth = signature::parse_authorization(header(AUTHORIZATION_KEY)?)
            .map_err(|e| unauthenticated(e.to_string()))?;
        let date_time = header(DATE_TIME_KEY)?;
        let (principal, secret) = if auth.access_key == secrets.admin.access_key {
            let p = Principal::Root {
                access_key: auth.access_key.clone(),
            };
            (p, secrets.admin.secret_key.as_bytes().to_vec())
        } else {
            let user = user_of(&auth.access_key).ok_or_else(|| {
                unauthenticated(format!(
                    "{UNKNOWN_ACCESS_KEY} '{}'",
                    auth.access_key.chars().take(128).collect::<String>()
                ))
            })?;
            let secret = secrets
                .key
                .open(&user.name, &user.access_key, &user.secret)?;
            (Principal::User(user), secret)
        };
        signature::verify_signature(&secret, date_time, &auth.signature)
            .map_err(|e| unauthenticated(e.to_string()))?;
        let principal = match (principal, md.get(ON_BEHALF_OF_KEY)) {
            (Principal::Root { .. }, Some(v)) => {
                let ak = v
                    .to_str()
                    .map_err(|_| unauthenticated(format!("{ON_BEHALF_OF_KEY} is not ASCII")))?;
                Principal::User(
                    user_of(ak)
                        .ok_or_else(|| unauthenticated(format!("{UNKNOWN_ACCESS_KEY} '{ak}'")))?,
                )
            }
            (p, _) => p,
        };
        let at =
            signature::parse_date_time(date_time).map_err(|e| unauthenticated(e.to_string()))?;
        let skew = (now - at).unsigned_abs();
        if skew > self.max_skew {
            return Err(unauthenticated(format!(
                "request time {date_time} is outside the allowed skew of {} s from the node's \
                 clock ({} s off; auth-max-skew-ms)",
                self.max_skew.as_secs(),
                skew.as_secs()
            )));
        }
        Ok(principal)
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
