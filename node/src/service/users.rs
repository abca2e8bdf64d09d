//! The user admin RPCs on the leader: CreateUser (generate the keys, seal the secret with the
//! cluster key, propose `PutUser`), ListUsers (no secrets), DeleteUser.

use raftmq_proto::v1 as pb;
use raftmq_store::command::Command;
use raftmq_store::users::Role;
use raftmq_store::users::User;
use raftmq_store::ApplyResponse;

use super::admin::run;
use super::convert;
use crate::auth::keys::new_access_key;
use crate::auth::keys::new_secret_key;
use crate::core::NodeCore;
use crate::error::NodeError;

/// The wire form of a user (never its secret).
pub fn user_out(u: &User) -> pb::UserInfo {
    pb::UserInfo {
        name: u.name.clone(),
        access_key: u.access_key.clone(),
        role: u.role.as_str().to_string(),
        topics: u.topics.clone(),
        groups: u.groups.clone(),
    }
}

/// CreateUser: a new access key and secret key; the reply is the only place the secret is
/// shown (the log holds it sealed).
pub async fn create_user(
    core: &NodeCore,
    req: pb::CreateUserRequest,
) -> Result<pb::CreateUserReply, NodeError> {
    let key = core.auth.cluster_key().ok_or_else(|| {
        NodeError::FailedPrecondition(
            "authentication is off on this node (auth-enabled = false): users cannot be created"
                .into(),
        )
    })?;
    let role = Role::parse(&req.role).map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    if core.store.users().iter().any(|u| u.name == req.name) {
        return Err(NodeError::AlreadyExists(format!(
            "user '{}' exists",
            req.name
        )));
    }
    let access_key = new_access_key()?;
    let secret_key = new_secret_key()?;
    let user = User {
        secret: key.seal(&req.name, &access_key, &secret_key)?,
        name: req.name,
        access_key,
        role,
        topics: req.topics,
        groups: req.groups,
    };
    user.check()
        .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    let info = user_out(&user);
    let resp = run(core, Command::PutUser(user)).await?;
    match resp.data {
        ApplyResponse::UserPut(_) => {}
        other => return Err(NodeError::Internal(format!("apply answered {other:?}"))),
    }
    tracing::info!(user = %info.name, role = %info.role, access_key = %info.access_key, "user created");
    Ok(pb::CreateUserReply {
        user: Some(info),
        secret_key,
        log_id: Some(convert::log_id(&resp.log_id)),
    })
}

/// ListUsers: every user, by name, without secrets.
pub fn list_users(core: &NodeCore) -> pb::ListUsersReply {
    pb::ListUsersReply {
        users: core.store.users().iter().map(user_out).collect(),
    }
}

/// DeleteUser.
pub async fn delete_user(core: &NodeCore, name: String) -> Result<pb::DeleteUserReply, NodeError> {
    if !core.store.users().iter().any(|u| u.name == name) {
        return Err(NodeError::NotFound(format!("user '{name}' does not exist")));
    }
    let resp = run(core, Command::DeleteUser { name: name.clone() }).await?;
    tracing::info!(user = %name, "user deleted");
    Ok(pb::DeleteUserReply {
        log_id: Some(convert::log_id(&resp.log_id)),
    })
}
