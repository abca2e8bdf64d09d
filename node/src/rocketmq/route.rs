//! QueryRoute and QueryAssignment: a topic's queues, all served by the node that answers.
//!
//! Every node serves every RPC (a write on a follower goes to the leader inside the cluster),
//! so a route names one broker: broker name = the cluster id, broker id 0, endpoints = the
//! answering node's advertised RocketMQ address. The official clients cache a route for the
//! life of the process; pointing it at the node they asked keeps it valid across leader
//! changes.

use std::time::Duration;

use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_store::topic::TopicConfig;
use rmq::Code;
use tokio::time::Instant;

use super::status;
use super::RocketMqService;
use crate::error::NodeError;

/// The message types our queues accept (see the README's feature table).
pub const ACCEPTED_TYPES: [rmq::MessageType; 3] = [
    rmq::MessageType::Normal,
    rmq::MessageType::Fifo,
    rmq::MessageType::Delay,
];

/// `host:port` as RocketMQ `Endpoints`: IPv4 or IPv6 for an IP literal, else DOMAIN_NAME
/// (never UNSPECIFIED, which the clients cannot dial).
pub fn endpoints(addr: &str) -> rmq::Endpoints {
    let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "0"));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let scheme = if host.parse::<std::net::Ipv4Addr>().is_ok() {
        rmq::AddressScheme::IPv4
    } else if host.parse::<std::net::Ipv6Addr>().is_ok() {
        rmq::AddressScheme::IPv6
    } else {
        rmq::AddressScheme::DomainName
    };
    rmq::Endpoints {
        scheme: scheme as i32,
        addresses: vec![rmq::Address {
            host: host.to_string(),
            port: port.parse().unwrap_or(0),
        }],
    }
}

/// The topic name of a request's resource, checked.
pub fn topic_name(r: Option<&rmq::Resource>) -> Result<&str, rmq::Status> {
    let name = r.map(|r| r.name.as_str()).unwrap_or_default();
    if name.is_empty() {
        return Err(status::status(Code::IllegalTopic, "topic is missing"));
    }
    raftmq_store::limits::validate_topic_name(name)
        .map_err(|e| status::status(Code::IllegalTopic, e.to_string()))?;
    Ok(name)
}

/// The group name of a request's resource, checked.
pub fn group_name(r: Option<&rmq::Resource>) -> Result<&str, rmq::Status> {
    let name = r.map(|r| r.name.as_str()).unwrap_or_default();
    if name.is_empty() {
        return Err(status::status(
            Code::IllegalConsumerGroup,
            "consumer group is missing",
        ));
    }
    raftmq_store::limits::validate_group_name(name)
        .map_err(|e| status::status(Code::IllegalConsumerGroup, e.to_string()))?;
    Ok(name)
}

fn permission(t: &TopicConfig, queue: u32) -> rmq::Permission {
    let read = t.perm.read && queue < t.read_queue_count;
    let write = t.perm.write && queue < t.write_queue_count;
    match (read, write) {
        (true, true) => rmq::Permission::ReadWrite,
        (true, false) => rmq::Permission::Read,
        (false, true) => rmq::Permission::Write,
        (false, false) => rmq::Permission::None,
    }
}

impl RocketMqService {
    /// The advertised RocketMQ address of this node.
    pub(super) fn own_endpoints(&self) -> rmq::Endpoints {
        endpoints(&self.advertised)
    }

    /// The queues of `t`, served by this node.
    fn queues(&self, ns: &str, t: &TopicConfig) -> Vec<rmq::MessageQueue> {
        let n = t.read_queue_count.max(t.write_queue_count);
        let broker = rmq::Broker {
            name: self.core.config.cluster_id.clone(),
            id: 0,
            endpoints: Some(self.own_endpoints()),
        };
        (0..n)
            .map(|q| rmq::MessageQueue {
                topic: Some(rmq::Resource {
                    resource_namespace: ns.to_string(),
                    name: t.name.clone(),
                }),
                id: i32::try_from(q).unwrap_or(i32::MAX),
                permission: permission(t, q) as i32,
                broker: Some(broker.clone()),
                accept_message_types: ACCEPTED_TYPES.iter().map(|m| *m as i32).collect(),
            })
            .collect()
    }

    /// The topic, created first (through the leader) when it is missing and the node
    /// auto-creates topics; TOPIC_NOT_FOUND otherwise.
    async fn topic_or_create(&self, name: &str) -> Result<TopicConfig, rmq::Status> {
        if let Some(t) = self.core.store.topic(name) {
            return Ok(t);
        }
        if !self.core.config.topic_auto_create {
            return Err(status::status(
                Code::TopicNotFound,
                format!("topic '{name}' does not exist (topic-auto-create is off)"),
            ));
        }
        let queues = self.core.config.default_queue_count;
        let node_id = self.core.node_id;
        let create = |svc: RocketMqService| async move {
            let cfg = raftmq_proto::v1::TopicConfig {
                name: name.to_string(),
                queue_count: queues,
                ..Default::default()
            };
            Ok(
                match crate::service::admin::create_topic(&svc.core, cfg).await {
                    Ok(_) | Err(NodeError::AlreadyExists(_)) => status::ok(),
                    Err(e) => status::from_error(&e, node_id),
                },
            )
        };
        let forward = |mut c: super::forward::LeaderClient| {
            let req = super::forward::request(
                &self.core,
                rmq::QueryRouteRequest {
                    topic: Some(rmq::Resource {
                        resource_namespace: String::new(),
                        name: name.to_string(),
                    }),
                    endpoints: None,
                },
            );
            async move {
                let s = c.query_route(req).await?.into_inner().status;
                Ok(s.unwrap_or_else(|| status::status(Code::InternalServerError, "no status")))
            }
        };
        let created = super::forward::on_leader(self, create, forward).await?;
        if created.code != Code::Ok as i32 {
            return Err(created);
        }
        // Created on the leader: wait until this node applied it too.
        let deadline = Instant::now() + self.core.config.send_timeout();
        loop {
            if let Some(t) = self.core.store.topic(name) {
                return Ok(t);
            }
            if Instant::now() >= deadline {
                return Err(status::status(
                    Code::HaNotAvailable,
                    format!("topic '{name}' was created but this node has not applied it yet"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The namespace and config of a request's topic (created first if missing and allowed).
    async fn resolve(
        &self,
        r: Option<&rmq::Resource>,
    ) -> Result<(String, TopicConfig), rmq::Status> {
        let name = topic_name(r)?;
        let ns = r.map(|r| r.resource_namespace.clone()).unwrap_or_default();
        Ok((ns, self.topic_or_create(name).await?))
    }

    /// QueryRoute (see the module docs). Never OK with zero queues.
    pub(super) async fn query_route(&self, req: rmq::QueryRouteRequest) -> rmq::QueryRouteResponse {
        let fail = |s| rmq::QueryRouteResponse {
            status: Some(s),
            message_queues: Vec::new(),
        };
        let (ns, t) = match self.resolve(req.topic.as_ref()).await {
            Ok(r) => r,
            Err(s) => return fail(s),
        };
        let queues = self.queues(&ns, &t);
        if queues.is_empty() {
            return fail(status::status(
                Code::TopicNotFound,
                format!("topic '{}' has no queues", t.name),
            ));
        }
        rmq::QueryRouteResponse {
            status: Some(status::ok()),
            message_queues: queues,
        }
    }

    /// QueryAssignment (push consumers): every readable queue of the topic, served by this node.
    pub(super) async fn query_assignment(
        &self,
        req: rmq::QueryAssignmentRequest,
    ) -> rmq::QueryAssignmentResponse {
        let fail = |s| rmq::QueryAssignmentResponse {
            status: Some(s),
            assignments: Vec::new(),
        };
        if let Err(s) = group_name(req.group.as_ref()) {
            return fail(s);
        }
        let (ns, t) = match self.resolve(req.topic.as_ref()).await {
            Ok(r) => r,
            Err(s) => return fail(s),
        };
        let assignments: Vec<rmq::Assignment> = self
            .queues(&ns, &t)
            .into_iter()
            .filter(|q| {
                q.permission == rmq::Permission::Read as i32
                    || q.permission == rmq::Permission::ReadWrite as i32
            })
            .map(|q| rmq::Assignment {
                message_queue: Some(q),
            })
            .collect();
        if assignments.is_empty() {
            return fail(status::status(
                Code::Forbidden,
                format!("topic '{}' has no readable queue", t.name),
            ));
        }
        rmq::QueryAssignmentResponse {
            status: Some(status::ok()),
            assignments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_schemes() {
        let e = endpoints("127.0.0.1:9401");
        assert_eq!(e.scheme, rmq::AddressScheme::IPv4 as i32);
        assert_eq!(e.addresses[0].port, 9401);
        let e = endpoints("[::1]:9401");
        assert_eq!(e.scheme, rmq::AddressScheme::IPv6 as i32);
        assert_eq!(e.addresses[0].host, "::1");
        let e = endpoints("mq-1.example.com:8081");
        assert_eq!(e.scheme, rmq::AddressScheme::DomainName as i32);
        assert_eq!(e.addresses[0].host, "mq-1.example.com");
    }

    #[test]
    fn names_are_checked() {
        assert!(topic_name(None).is_err());
        let r = |n: &str| rmq::Resource {
            resource_namespace: String::new(),
            name: n.into(),
        };
        assert_eq!(topic_name(Some(&r("orders"))).unwrap(), "orders");
        let e = topic_name(Some(&r("bad topic!"))).unwrap_err();
        assert_eq!(e.code, Code::IllegalTopic as i32);
        assert!(group_name(Some(&r(""))).is_err());
    }
}
