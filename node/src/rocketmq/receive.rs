//! ReceiveMessage: pop consumption for a consumer group, on the leader
//! ([`crate::pipeline::consume`]: the pop state is replicated, so a handle outlives a leader).
//! As with RocketMQ's proxy, the request's queue only picks the broker: a receive pops from
//! every readable queue of the topic, starting at that one.
//!
//! The long poll lasts the request's `long_polling_timeout`, bounded by the call's deadline
//! (`grpc-timeout`, less a margin so the answer arrives in time) and by the node's maximum.
//! The stream carries a status first (OK, or MESSAGE_NOT_FOUND when the poll ended empty),
//! then the messages, then the delivery timestamp, and ends. A follower relays the leader's
//! stream. A message due for its attempt past `MAX_DELIVERY_ATTEMPTS` goes to the group's
//! dead-letter queue instead of the consumer. A delayed message is handed out only from its
//! delivery time on (the store parks it until then), as type DELAY with its
//! `delivery_timestamp`.

use std::collections::BTreeMap;
use std::time::Duration;

use md5::Digest;
use raftmq_proto::rocketmq::v2 as rmq;
use rmq::receive_message_response::Content;
use rmq::Code;
use tokio::time::Instant;
use tonic::metadata::MetadataMap;

use super::forward;
use super::message;
use super::route::group_name;
use super::route::topic_name;
use super::status;
use super::telemetry::to_std;
use super::telemetry::DEFAULT_LONG_POLLING;
use super::telemetry::MAX_DELIVERY_ATTEMPTS;
use super::telemetry::MAX_LONG_POLLING;
use super::RocketMqService;
use crate::pipeline::consume;
use crate::pipeline::consume::ReceivedMessage;
use crate::pipeline::queues::now_ms;
use crate::pipeline::queues::SHARDING_KEY_PROPERTY;

/// Invisible duration of a receive that asks for auto-renewal without one (push consumers),
/// RocketMQ's proxy default. raftmq does not renew it: a message a push consumer holds longer
/// is delivered again (at least once).
pub const AUTO_RENEW_INVISIBLE: Duration = Duration::from_secs(60);
/// Shortest invisible duration accepted.
pub const MIN_INVISIBLE: Duration = Duration::from_secs(1);
/// How much earlier than the call's deadline a long poll ends, so its answer arrives in time.
const DEADLINE_MARGIN: Duration = Duration::from_millis(300);

/// The `grpc-timeout` of a call (`<digits><unit>`, unit one of H M S m u n), if any.
pub fn grpc_timeout(md: &MetadataMap) -> Option<Duration> {
    let v = md.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn status_only(s: rmq::Status) -> Vec<rmq::ReceiveMessageResponse> {
    vec![rmq::ReceiveMessageResponse {
        content: Some(Content::Status(s)),
    }]
}

/// Uppercase hex MD5 of `body` (RocketMQ's body digest).
pub fn md5_hex(body: &[u8]) -> String {
    let d = md5::Md5::digest(body);
    d.iter().map(|b| format!("{b:02X}")).collect()
}

/// The message type a consumer sees and the delivery timestamp, taking the delivery time
/// out of the user properties. As RocketMQ's proxy: a delivery time makes it DELAY, whatever
/// else it carries; else a message group makes it FIFO.
fn kind_and_delivery(
    props: &mut BTreeMap<String, String>,
    has_group: bool,
) -> (rmq::MessageType, Option<prost_types::Timestamp>) {
    let deliver = props
        .remove(message::DELIVER_MS_PROPERTY)
        .and_then(|v| v.parse::<u64>().ok());
    let kind = match (deliver, has_group) {
        (Some(_), _) => rmq::MessageType::Delay,
        (None, true) => rmq::MessageType::Fifo,
        (None, false) => rmq::MessageType::Normal,
    };
    (kind, deliver.map(message::timestamp))
}

/// A checked receive request and how long it may poll.
pub(crate) struct Checked {
    pub(crate) req: consume::ReceiveRequest,
    pub(crate) namespace: String,
    pub(crate) poll: Duration,
}

/// Checks a request; `fifo_groups` (rocketmq-fifo-groups) decides its FIFO flag.
pub(crate) fn check(
    r: &rmq::ReceiveMessageRequest,
    call_timeout: Option<Duration>,
    fifo_groups: &[String],
) -> Result<Checked, rmq::Status> {
    let group = group_name(r.group.as_ref())?.to_string();
    let mq = r
        .message_queue
        .as_ref()
        .ok_or_else(|| status::bad_request("ReceiveMessage needs a message_queue"))?;
    let topic = topic_name(mq.topic.as_ref())?.to_string();
    let namespace = mq
        .topic
        .as_ref()
        .map(|t| t.resource_namespace.clone())
        .unwrap_or_default();
    let queue_id = u32::try_from(mq.id)
        .map_err(|_| status::bad_request(format!("queue id {} is negative", mq.id)))?;
    let filter = match &r.filter_expression {
        None => "*".to_string(),
        Some(f) => match rmq::FilterType::try_from(f.r#type).unwrap_or_default() {
            rmq::FilterType::Tag | rmq::FilterType::Unspecified => {
                if f.expression.trim().is_empty() {
                    "*".to_string()
                } else {
                    f.expression.clone()
                }
            }
            rmq::FilterType::Sql => {
                return Err(status::status(
                    Code::IllegalFilterExpression,
                    "SQL92 filters are not supported by raftmq; use a tag expression",
                ))
            }
        },
    };
    raftmq_store::filter::TagFilter::parse(&filter)
        .map_err(|e| status::status(Code::IllegalFilterExpression, e.to_string()))?;
    if r.batch_size <= 0 {
        return Err(status::bad_request(format!(
            "batch_size {} must be positive",
            r.batch_size
        )));
    }
    let invisible = match (&r.invisible_duration, r.auto_renew) {
        // Push consumers ask for auto-renewal and give no duration: the proxy's default.
        (None, true) => AUTO_RENEW_INVISIBLE,
        (d, _) => to_std(d.as_ref()).ok_or_else(|| {
            status::status(
                Code::IllegalInvisibleTime,
                "invisible_duration is missing or negative",
            )
        })?,
    };
    let max_invisible = Duration::from_millis(consume::MAX_INVISIBLE_MS);
    if invisible < MIN_INVISIBLE || invisible > max_invisible {
        return Err(status::status(
            Code::IllegalInvisibleTime,
            format!(
                "invisible_duration {invisible:?} is outside {MIN_INVISIBLE:?}..={max_invisible:?}"
            ),
        ));
    }
    let asked = match &r.long_polling_timeout {
        None => DEFAULT_LONG_POLLING,
        Some(d) => to_std(Some(d)).ok_or_else(|| {
            status::status(Code::IllegalPollingTime, "long_polling_timeout is negative")
        })?,
    };
    let mut poll = asked.min(MAX_LONG_POLLING);
    if let Some(t) = call_timeout {
        poll = poll.min(t.saturating_sub(DEADLINE_MARGIN));
    }
    Ok(Checked {
        req: consume::ReceiveRequest {
            topic,
            queue_id: raftmq_store::types::QueueId::new(queue_id),
            max_messages: u32::try_from(r.batch_size).unwrap_or(u32::MAX),
            invisible,
            fifo: fifo_groups.contains(&group),
            filter,
            group,
        },
        namespace,
        poll,
    })
}

impl RocketMqService {
    /// A popped message as the clients read it.
    fn message_out(&self, ns: &str, invisible: Duration, r: ReceivedMessage) -> rmq::Message {
        let m = r.message;
        let mut props = m.properties;
        let id = props
            .remove(message::MESSAGE_ID_PROPERTY)
            .unwrap_or_else(|| format!("{:032X}", r.msg_id.get()));
        let group = props.remove(SHARDING_KEY_PROPERTY);
        let trace = props.remove(message::TRACE_CONTEXT_PROPERTY);
        let (kind, deliver) = kind_and_delivery(&mut props, group.is_some());
        let sys = rmq::SystemProperties {
            tag: Some(m.tags).filter(|t| !t.is_empty()),
            keys: m.keys,
            message_id: id,
            body_digest: Some(rmq::Digest {
                r#type: rmq::DigestType::Md5 as i32,
                checksum: md5_hex(&m.body),
            }),
            body_encoding: rmq::Encoding::Identity as i32,
            message_type: kind as i32,
            born_timestamp: Some(message::timestamp(m.born_timestamp_ms)),
            born_host: m.born_host,
            store_timestamp: Some(message::timestamp(m.store_timestamp_ms)),
            store_host: self.advertised.clone(),
            delivery_timestamp: deliver,
            receipt_handle: Some(r.receipt.encode()),
            queue_id: i32::try_from(r.receipt.queue_id.get()).unwrap_or(i32::MAX),
            queue_offset: Some(i64::try_from(r.receipt.queue_offset.get()).unwrap_or(i64::MAX)),
            invisible_duration: Some(prost_types::Duration {
                seconds: i64::try_from(invisible.as_secs()).unwrap_or(i64::MAX),
                nanos: i32::try_from(invisible.subsec_nanos()).unwrap_or(0),
            }),
            delivery_attempt: Some(i32::try_from(r.attempt).unwrap_or(i32::MAX)),
            message_group: group,
            trace_context: trace,
            ..Default::default()
        };
        rmq::Message {
            topic: Some(rmq::Resource {
                resource_namespace: ns.to_string(),
                name: m.topic,
            }),
            user_properties: props.into_iter().collect(),
            system_properties: Some(sys),
            body: m.body,
        }
    }

    /// Leader only: the long poll and its answer.
    async fn receive_here(&self, c: Checked) -> Vec<rmq::ReceiveMessageResponse> {
        let until = Instant::now() + c.poll;
        match consume::receive_long_poll_any(&self.core, &c.req, until).await {
            Ok(got) if got.is_empty() => status_only(status::status(
                Code::MessageNotFound,
                "no new message before the long poll ended",
            )),
            Ok(got) => {
                let mut out = status_only(status::ok());
                let max = u32::try_from(MAX_DELIVERY_ATTEMPTS).unwrap_or(u32::MAX);
                for r in got {
                    if r.attempt > max {
                        // Delivered and not acked MAX_DELIVERY_ATTEMPTS times: dead letter.
                        let (group, receipt) = (c.req.group.as_str(), r.receipt.clone());
                        if let Err(e) = self.dead_letter_here(group, receipt).await {
                            tracing::warn!(error = %e, "moving a message to its dead-letter queue failed; it stays in flight");
                        }
                        continue;
                    }
                    let m = self.message_out(&c.namespace, c.req.invisible, r);
                    out.push(rmq::ReceiveMessageResponse {
                        content: Some(Content::Message(m)),
                    });
                }
                out.push(rmq::ReceiveMessageResponse {
                    content: Some(Content::DeliveryTimestamp(message::timestamp(now_ms()))),
                });
                out
            }
            Err(e) => status_only(status::from_error(&e, self.core.node_id)),
        }
    }

    /// ReceiveMessage (see the module docs): the answers of the stream, in order.
    pub(super) async fn receive_message(
        &self,
        md: &MetadataMap,
        r: rmq::ReceiveMessageRequest,
    ) -> Vec<rmq::ReceiveMessageResponse> {
        let c = match check(&r, grpc_timeout(md), &self.core.config.rocketmq_fifo_groups) {
            Ok(c) => c,
            Err(s) => return status_only(s),
        };
        let poll = c.poll;
        let local = |svc: RocketMqService| async move { Ok(svc.receive_here(c).await) };
        let remote = |mut client: forward::LeaderClient| {
            // The leader ends its poll DEADLINE_MARGIN before this deadline: when ours ends.
            let req = forward::request_for(&self.core, r.clone(), poll + DEADLINE_MARGIN);
            async move {
                let mut stream = client.receive_message(req).await?.into_inner();
                let mut out = Vec::new();
                while let Some(item) = stream.message().await? {
                    out.push(item);
                }
                Ok(out)
            }
        };
        match forward::on_leader(self, local, remote).await {
            Ok(out) => out,
            Err(s) => status_only(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        let mut md = MetadataMap::new();
        assert_eq!(grpc_timeout(&md), None);
        md.insert("grpc-timeout", "30S".parse().unwrap());
        assert_eq!(grpc_timeout(&md), Some(Duration::from_secs(30)));
        md.insert("grpc-timeout", "1500m".parse().unwrap());
        assert_eq!(grpc_timeout(&md), Some(Duration::from_millis(1500)));
        md.insert("grpc-timeout", "x".parse().unwrap());
        assert_eq!(grpc_timeout(&md), None);
    }

    #[test]
    fn a_delivery_time_makes_a_delay_message() {
        let mut props: BTreeMap<String, String> = [
            (
                message::DELIVER_MS_PROPERTY.to_string(),
                "1700000003000".to_string(),
            ),
            ("color".to_string(), "red".to_string()),
        ]
        .into();
        let (kind, at) = kind_and_delivery(&mut props, true);
        assert_eq!(kind, rmq::MessageType::Delay);
        assert_eq!(at, Some(message::timestamp(1_700_000_003_000)));
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["color"],
            "not a user property"
        );
        assert_eq!(
            kind_and_delivery(&mut props, true).0,
            rmq::MessageType::Fifo
        );
        assert_eq!(
            kind_and_delivery(&mut props, false),
            (rmq::MessageType::Normal, None)
        );
    }

    #[test]
    fn body_digest_is_uppercase_md5() {
        assert_eq!(md5_hex(b""), "D41D8CD98F00B204E9800998ECF8427E");
    }

    fn req() -> rmq::ReceiveMessageRequest {
        let res = |n: &str| {
            Some(rmq::Resource {
                resource_namespace: String::new(),
                name: n.into(),
            })
        };
        rmq::ReceiveMessageRequest {
            group: res("g"),
            message_queue: Some(rmq::MessageQueue {
                topic: res("t"),
                id: 1,
                ..Default::default()
            }),
            filter_expression: None,
            batch_size: 8,
            invisible_duration: Some(prost_types::Duration {
                seconds: 30,
                nanos: 0,
            }),
            auto_renew: false,
            long_polling_timeout: Some(prost_types::Duration {
                seconds: 20,
                nanos: 0,
            }),
            attempt_id: None,
        }
    }

    #[test]
    fn the_poll_ends_before_the_call_deadline() {
        let c = check(&req(), Some(Duration::from_secs(5)), &[]).unwrap();
        assert_eq!(c.poll, Duration::from_secs(5) - DEADLINE_MARGIN);
        assert_eq!(c.req.filter, "*");
        let c = check(&req(), None, &[]).unwrap();
        assert_eq!(c.poll, Duration::from_secs(20));
        assert!(!c.req.fifo, "no FIFO group");
    }

    #[test]
    fn a_listed_group_receives_fifo() {
        let groups = ["other".to_string(), "g".to_string()];
        assert!(check(&req(), None, &groups).unwrap().req.fifo);
        assert!(!check(&req(), None, &groups[..1]).unwrap().req.fifo);
    }

    #[test]
    fn bad_receives_get_precise_codes() {
        let code = |r: rmq::ReceiveMessageRequest| check(&r, None, &[]).err().unwrap().code;
        let mut r = req();
        r.invisible_duration = None;
        assert_eq!(code(r), Code::IllegalInvisibleTime as i32);
        let mut r = req();
        r.invisible_duration = None;
        r.auto_renew = true;
        assert_eq!(
            check(&r, None, &[]).unwrap().req.invisible,
            AUTO_RENEW_INVISIBLE
        );
        let mut r = req();
        r.batch_size = 0;
        assert_eq!(code(r), Code::BadRequest as i32);
        let mut r = req();
        r.group = None;
        assert_eq!(code(r), Code::IllegalConsumerGroup as i32);
        let mut r = req();
        r.filter_expression = Some(rmq::FilterExpression {
            r#type: rmq::FilterType::Sql as i32,
            expression: "a > 1".into(),
        });
        assert_eq!(code(r), Code::IllegalFilterExpression as i32);
        let mut r = req();
        r.message_queue = None;
        assert_eq!(code(r), Code::BadRequest as i32);
    }
}
