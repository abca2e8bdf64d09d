//! Authorization: the one [`authorize`] every handler calls with the [`Action`] it is about to
//! take, once the topic and group are known.
//!
//! | role | may |
//! |---|---|
//! | any (authenticated) | [`Action::Describe`]: ClusterStatus, ListTopics |
//! | `admin` | everything, including [`Action::Admin`]: CreateTopic, UpdateTopic, DeleteTopic, TransferLeader, AddLearner, ChangeMembership, CreateUser, ListUsers, DeleteUser |
//! | `producer` | [`Action::Send`] to its topics (Send, SendBatch, SendStream, RocketMQ SendMessage); [`Action::Route`] of its topics (RocketMQ QueryRoute, Heartbeat, Telemetry) |
//! | `consumer` | [`Action::Read`] of its topics (Pull, QueryById, QueryByKey); [`Action::Consume`] with its groups on its topics (CommitOffset, FetchOffset, RocketMQ ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, QueryAssignment); [`Action::Route`] of its topics |
//!
//! A refusal is PERMISSION_DENIED naming the role, the user and the action.

use raftmq_store::limits::quote;
use raftmq_store::users::Role;

use super::Principal;
use crate::error::NodeError;

/// What a call is about to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// Cluster, topic or user administration, named by its RPC.
    Admin(&'static str),
    /// Read cluster-wide metadata (any authenticated caller).
    Describe,
    /// Send to a topic.
    Send {
        /// Topic.
        topic: &'a str,
    },
    /// Read a topic's messages without a group (pull, queries).
    Read {
        /// Topic.
        topic: &'a str,
    },
    /// Consume a topic as a group (offsets, receive, ack).
    Consume {
        /// Consumer group.
        group: &'a str,
        /// Topic.
        topic: &'a str,
    },
    /// Look up a topic's route, or keep a client session for it.
    Route {
        /// Topic.
        topic: &'a str,
    },
}

fn deny(p: &Principal, what: String) -> NodeError {
    NodeError::PermissionDenied(format!(
        "role {} (user '{}') may not {what}",
        p.role(),
        p.name()
    ))
}

/// Allows `action` for `p`, or refuses with PERMISSION_DENIED.
pub fn authorize(p: &Principal, action: Action<'_>) -> Result<(), NodeError> {
    let user = match p {
        Principal::Anonymous | Principal::Root { .. } => return Ok(()),
        Principal::User(u) if u.role == Role::Admin => return Ok(()),
        Principal::User(u) => u,
    };
    let topic_ok = |t: &str| user.may_topic(t);
    match action {
        Action::Describe => Ok(()),
        Action::Admin(rpc) => Err(deny(p, rpc.to_string())),
        Action::Send { topic } if user.role == Role::Producer && topic_ok(topic) => Ok(()),
        Action::Send { topic } => Err(deny(p, format!("send to topic {}", quote(topic)))),
        Action::Read { topic } if user.role == Role::Consumer && topic_ok(topic) => Ok(()),
        Action::Read { topic } => Err(deny(p, format!("read topic {}", quote(topic)))),
        Action::Consume { topic, .. } if user.role != Role::Consumer || !topic_ok(topic) => {
            Err(deny(p, format!("read topic {}", quote(topic))))
        }
        Action::Consume { group, .. } if !user.may_group(group) => {
            Err(deny(p, format!("use consumer group {}", quote(group))))
        }
        Action::Consume { .. } => Ok(()),
        Action::Route { topic } if topic_ok(topic) => Ok(()),
        Action::Route { topic } => Err(deny(p, format!("use topic {}", quote(topic)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftmq_store::users::SealedSecret;
    use raftmq_store::users::User;

    fn user(role: Role) -> Principal {
        Principal::User(User {
            name: "u".into(),
            access_key: "AK".into(),
            secret: SealedSecret(vec![1; 40]),
            role,
            topics: vec!["orders*".into()],
            groups: vec!["billing".into()],
        })
    }

    #[test]
    fn refusals_quote_client_input_bounded() {
        let long = "a".repeat(1 << 20);
        let e = denied(authorize(
            &user(Role::Producer),
            Action::Send { topic: &long },
        ));
        assert!(e.len() < 200, "{} bytes", e.len());
        assert!(e.contains("(1048576 bytes)"), "{e}");
    }

    fn denied(r: Result<(), NodeError>) -> String {
        match r {
            Err(NodeError::PermissionDenied(m)) => m,
            other => panic!("expected PERMISSION_DENIED, got {other:?}"),
        }
    }

    #[test]
    fn roles_and_patterns() {
        let (prod, cons, admin) = (
            user(Role::Producer),
            user(Role::Consumer),
            user(Role::Admin),
        );
        for p in [
            &Principal::Anonymous,
            &Principal::Root {
                access_key: "R".into(),
            },
            &admin,
        ] {
            authorize(p, Action::Admin("DeleteTopic")).expect("admin");
            authorize(p, Action::Send { topic: "x" }).expect("admin sends anywhere");
        }
        let e = denied(authorize(&prod, Action::Admin("DeleteTopic")));
        assert_eq!(e, "role producer (user 'u') may not DeleteTopic");
        authorize(&prod, Action::Send { topic: "orders-eu" }).expect("own topic");
        let e = denied(authorize(&prod, Action::Send { topic: "audit" }));
        assert!(e.contains("may not send to topic 'audit'"), "{e}");
        denied(authorize(&prod, Action::Read { topic: "orders" }));
        authorize(&prod, Action::Route { topic: "orders" }).expect("route");
        denied(authorize(&prod, Action::Route { topic: "audit" }));
        authorize(&prod, Action::Describe).expect("describe");

        denied(authorize(&cons, Action::Send { topic: "orders" }));
        authorize(&cons, Action::Read { topic: "orders" }).expect("read");
        let e = denied(authorize(&cons, Action::Read { topic: "audit" }));
        assert_eq!(e, "role consumer (user 'u') may not read topic 'audit'");
        authorize(
            &cons,
            Action::Consume {
                group: "billing",
                topic: "orders",
            },
        )
        .expect("consume");
        let e = denied(authorize(
            &cons,
            Action::Consume {
                group: "other",
                topic: "orders",
            },
        ));
        assert!(e.contains("consumer group 'other'"), "{e}");
        let e = denied(authorize(
            &cons,
            Action::Consume {
                group: "billing",
                topic: "audit",
            },
        ));
        assert!(e.contains("read topic 'audit'"), "{e}");
        denied(authorize(&cons, Action::Admin("CreateUser")));
    }
}
