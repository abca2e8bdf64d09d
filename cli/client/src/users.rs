//! User administration calls of [`Client`] (admin only on an authenticated cluster).

use std::time::Duration;

use raftmq_proto::v1::*;

use crate::client::Client;
use crate::client::Kind;
use crate::credentials::Grpc;
use crate::error::ClientError;

impl Client {
    /// Creates a user with `role` (`admin`, `producer`, `consumer`) and topic and group
    /// patterns; the reply carries its access key and its secret key (shown only here).
    pub async fn create_user(
        &self,
        name: &str,
        role: &str,
        topics: Vec<String>,
        groups: Vec<String>,
    ) -> Result<CreateUserReply, ClientError> {
        let req = CreateUserRequest {
            name: name.into(),
            role: role.into(),
            topics,
            groups,
        };
        self.call(
            Kind::Write,
            req,
            Duration::ZERO,
            |mut c: Grpc, r| async move { c.create_user(r).await },
        )
        .await
    }

    /// Every user, without secrets.
    pub async fn list_users(&self) -> Result<Vec<UserInfo>, ClientError> {
        let reply = self
            .call(
                Kind::Read,
                ListUsersRequest {},
                Duration::ZERO,
                |mut c: Grpc, r| async move { c.list_users(r).await },
            )
            .await?;
        Ok(reply.users)
    }

    /// Deletes a user.
    pub async fn delete_user(&self, name: &str) -> Result<(), ClientError> {
        let req = DeleteUserRequest { name: name.into() };
        self.call(
            Kind::Write,
            req,
            Duration::ZERO,
            |mut c: Grpc, r| async move { c.delete_user(r).await },
        )
        .await?;
        Ok(())
    }
}
