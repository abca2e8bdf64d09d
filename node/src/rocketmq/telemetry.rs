//! Telemetry: the bidirectional stream every official client keeps open. Each `Settings` the
//! client sends is answered at once with the merged settings: for producers the body size limit
//! (the node's max-message-bytes, never 0) and an exponential send backoff; for consumers the
//! long-polling timeout, the receive batch size, the redelivery backoff and `fifo` (true
//! exactly for a group listed in `rocketmq-fifo-groups`, so its client consumes one message
//! group sequentially). Other commands
//! from the client (stack traces, verify results) are accepted and ignored.
//!
//! The answers go through a small bounded queue: a client that never reads its stream has its
//! stream closed instead of growing the node's memory. The stream ends when the node stops.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use futures::StreamExt;
use raftmq_proto::rocketmq::v2 as rmq;
use rmq::telemetry_command::Command;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tonic::Status;
use tonic::Streaming;

use super::status;
use super::RocketMqService;

/// The Telemetry response stream.
pub type TelemetryStream =
    Pin<Box<dyn Stream<Item = Result<rmq::TelemetryCommand, Status>> + Send>>;

/// Answers queued for a client before its stream is closed as not reading.
const OUTBOX: usize = 16;
/// Long-polling timeout given to consumers that do not ask for one.
pub const DEFAULT_LONG_POLLING: Duration = Duration::from_secs(20);
/// Longest long-polling timeout accepted.
pub const MAX_LONG_POLLING: Duration = Duration::from_secs(60);
/// Receive batch size given to consumers that do not ask for one.
pub const DEFAULT_RECEIVE_BATCH: i32 = 32;
/// Delivery attempts before a message goes to the dead-letter queue (RocketMQ's
/// maxReconsumeTimes + 1).
pub const MAX_DELIVERY_ATTEMPTS: i32 = 17;

fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A protobuf duration as a std one (None if negative or absent).
pub fn to_std(d: Option<&prost_types::Duration>) -> Option<Duration> {
    let d = d?;
    let secs = u64::try_from(d.seconds).ok()?;
    let nanos = u32::try_from(d.nanos).ok()?;
    Some(Duration::new(secs, nanos))
}

fn backoff(max_attempts: i32, initial: Duration, max: Duration) -> rmq::RetryPolicy {
    rmq::RetryPolicy {
        max_attempts,
        strategy: Some(rmq::retry_policy::Strategy::ExponentialBackoff(
            rmq::ExponentialBackoff {
                initial: Some(duration(initial)),
                max: Some(duration(max)),
                multiplier: 2.0,
            },
        )),
    }
}

impl RocketMqService {
    /// The client's settings merged with the node's (see the module docs).
    pub(super) fn merged_settings(&self, mut s: rmq::Settings) -> rmq::Settings {
        let max_body = self.core.config.store.limits.max_message_bytes.max(1);
        s.access_point = Some(self.own_endpoints());
        if s.request_timeout.is_none() {
            s.request_timeout = Some(duration(self.core.config.send_timeout()));
        }
        match &mut s.pub_sub {
            Some(rmq::settings::PubSub::Publishing(p)) => {
                p.max_body_size = i32::try_from(max_body).unwrap_or(i32::MAX);
                p.validate_message_type = false;
                let attempts = s
                    .backoff_policy
                    .as_ref()
                    .map_or(3, |b| b.max_attempts.max(1));
                s.backoff_policy = Some(backoff(
                    attempts,
                    Duration::from_millis(10),
                    Duration::from_secs(1),
                ));
            }
            Some(rmq::settings::PubSub::Subscription(sub)) => {
                let poll = to_std(sub.long_polling_timeout.as_ref())
                    .filter(|d| !d.is_zero())
                    .unwrap_or(DEFAULT_LONG_POLLING)
                    .min(MAX_LONG_POLLING);
                sub.long_polling_timeout = Some(duration(poll));
                if sub.receive_batch_size.is_none_or(|n| n <= 0) {
                    sub.receive_batch_size = Some(DEFAULT_RECEIVE_BATCH);
                }
                // FIFO is the group's server-side setting (rocketmq-fifo-groups), not the
                // client's: the client consumes sequentially when told so.
                let group = sub.group.as_ref().map_or("", |g| g.name.as_str());
                sub.fifo = Some(self.core.config.is_fifo_group(group));
                s.backoff_policy = Some(backoff(
                    MAX_DELIVERY_ATTEMPTS,
                    Duration::from_secs(1),
                    Duration::from_secs(60),
                ));
            }
            None => {}
        }
        s
    }

    /// Telemetry (see the module docs).
    pub(super) fn telemetry(
        &self,
        mut inbound: Streaming<rmq::TelemetryCommand>,
    ) -> TelemetryStream {
        let (tx, rx) = mpsc::channel::<Result<rmq::TelemetryCommand, Status>>(OUTBOX);
        let svc = self.clone();
        let mut stop: watch::Receiver<bool> = self.stop.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    n = inbound.next() => n,
                    _ = stop.wait_for(|s| *s) => break,
                };
                let cmd = match next {
                    None => break,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "telemetry stream ended with an error");
                        break;
                    }
                    Some(Ok(c)) => c,
                };
                let Some(Command::Settings(s)) = cmd.command else {
                    continue;
                };
                let answer = rmq::TelemetryCommand {
                    status: Some(status::ok()),
                    command: Some(Command::Settings(svc.merged_settings(s))),
                };
                if tx.try_send(Ok(answer)).is_err() {
                    tracing::debug!("telemetry client does not read its stream; closing it");
                    break;
                }
            }
        });
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }
}
