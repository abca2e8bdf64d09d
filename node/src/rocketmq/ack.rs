//! AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue: what a consumer
//! does with a popped message, on the leader (a follower forwards), through the replicated
//! pop state ([`crate::pipeline::consume`]).
//!
//! An ack of a message that is already acked answers OK (a retried ack is harmless); a stale
//! or forged receipt handle answers INVALID_RECEIPT_HANDLE. A message forwarded to the
//! dead-letter queue is stored in `%DLQ%<group>` (created with one queue when missing) and
//! then acked: a crash between the two can leave it in both, never in neither.

use raftmq_proto::rocketmq::v2 as rmq;
use raftmq_store::command::Command;
use raftmq_store::topic::TopicConfig;
use raftmq_store::PullRequest;
use rmq::Code;
use tokio::time::Instant;

use super::forward;
use super::route::group_name;
use super::route::topic_name;
use super::status;
use super::telemetry::to_std;
use super::RocketMqService;
use crate::error::NodeError;
use crate::pipeline::consume;
use crate::pipeline::consume::AckOutcome;
use crate::pipeline::consume::ReceiptHandle;

/// Prefix of a group's dead-letter topic (RocketMQ's `MixAll.DLQ_GROUP_TOPIC_PREFIX`).
pub const DLQ_PREFIX: &str = "%DLQ%";

fn entry_status(r: &Result<AckOutcome, NodeError>, node_id: u64) -> rmq::Status {
    match r {
        Ok(_) => status::ok(),
        Err(e) => status::from_error(e, node_id),
    }
}

impl RocketMqService {
    /// Leader only: acks the decodable handles in one entry; one status per entry.
    async fn ack_here(
        &self,
        group: &str,
        topic: &str,
        entries: &[rmq::AckMessageEntry],
    ) -> Vec<rmq::Status> {
        let node_id = self.core.node_id;
        let decoded: Vec<Result<ReceiptHandle, NodeError>> = entries
            .iter()
            .map(|e| ReceiptHandle::decode(&e.receipt_handle))
            .collect();
        let good: Vec<ReceiptHandle> = decoded
            .iter()
            .filter_map(|d| d.as_ref().ok().cloned())
            .collect();
        let mut results = if good.is_empty() {
            Vec::new().into_iter()
        } else {
            match consume::ack(&self.core, group, topic, &good).await {
                Ok(r) => r.into_iter(),
                Err(e) => return vec![status::from_error(&e, node_id); entries.len()],
            }
        };
        decoded
            .iter()
            .map(|d| match d {
                Err(e) => status::from_error(e, node_id),
                Ok(_) => match results.next() {
                    Some(r) => entry_status(&r, node_id),
                    None => {
                        status::status(Code::InternalServerError, "ack answered too few results")
                    }
                },
            })
            .collect()
    }

    /// AckMessage (see the module docs).
    pub(super) async fn ack_message(&self, r: rmq::AckMessageRequest) -> rmq::AckMessageResponse {
        let fail = |s: rmq::Status| rmq::AckMessageResponse {
            status: Some(s.clone()),
            entries: r
                .entries
                .iter()
                .map(|e| rmq::AckMessageResultEntry {
                    message_id: e.message_id.clone(),
                    receipt_handle: e.receipt_handle.clone(),
                    status: Some(s.clone()),
                })
                .collect(),
        };
        let (group, topic) = match (group_name(r.group.as_ref()), topic_name(r.topic.as_ref())) {
            (Ok(g), Ok(t)) => (g.to_string(), t.to_string()),
            (Err(s), _) | (_, Err(s)) => return fail(s),
        };
        if r.entries.is_empty() {
            return fail(status::bad_request("AckMessage carries no entry"));
        }
        let entries = r.entries.clone();
        let local = |svc: RocketMqService| async move {
            let statuses = svc.ack_here(&group, &topic, &entries).await;
            let all_ok = statuses.iter().all(|s| s.code == Code::Ok as i32);
            let top = if all_ok {
                status::ok()
            } else if statuses.len() == 1 {
                statuses[0].clone()
            } else {
                status::status(Code::MultipleResults, "some entries failed; see each entry")
            };
            Ok(rmq::AckMessageResponse {
                status: Some(top),
                entries: entries
                    .iter()
                    .zip(statuses)
                    .map(|(e, s)| rmq::AckMessageResultEntry {
                        message_id: e.message_id.clone(),
                        receipt_handle: e.receipt_handle.clone(),
                        status: Some(s),
                    })
                    .collect(),
            })
        };
        let remote = |mut c: forward::LeaderClient| {
            let req = forward::request(&self.core, r.clone());
            async move { c.ack_message(req).await.map(|r| r.into_inner()) }
        };
        match forward::on_leader(self, local, remote).await {
            Ok(resp) => resp,
            Err(s) => fail(s),
        }
    }

    /// ChangeInvisibleDuration: a new deadline and a new receipt handle (the old one is stale).
    pub(super) async fn change_invisible_duration(
        &self,
        r: rmq::ChangeInvisibleDurationRequest,
    ) -> rmq::ChangeInvisibleDurationResponse {
        let fail = |s| rmq::ChangeInvisibleDurationResponse {
            status: Some(s),
            receipt_handle: String::new(),
        };
        let group = match group_name(r.group.as_ref()) {
            Ok(g) => g.to_string(),
            Err(s) => return fail(s),
        };
        if let Err(s) = topic_name(r.topic.as_ref()) {
            return fail(s);
        }
        let node_id = self.core.node_id;
        let handle = match ReceiptHandle::decode(&r.receipt_handle) {
            Ok(h) => h,
            Err(e) => return fail(status::from_error(&e, node_id)),
        };
        let Some(invisible) = to_std(r.invisible_duration.as_ref()) else {
            return fail(status::status(
                Code::IllegalInvisibleTime,
                "invisible_duration is missing or negative",
            ));
        };
        let local = |svc: RocketMqService| async move {
            Ok(
                match consume::change_invisible(&svc.core, &group, &handle, invisible).await {
                    Ok(h) => rmq::ChangeInvisibleDurationResponse {
                        status: Some(status::ok()),
                        receipt_handle: h.encode(),
                    },
                    Err(e) => fail(status::from_error(&e, node_id)),
                },
            )
        };
        let remote = |mut c: forward::LeaderClient| {
            let req = forward::request(&self.core, r.clone());
            async move {
                c.change_invisible_duration(req)
                    .await
                    .map(|r| r.into_inner())
            }
        };
        match forward::on_leader(self, local, remote).await {
            Ok(resp) => resp,
            Err(s) => fail(s),
        }
    }

    /// Leader only: creates the dead-letter topic with one queue if it is missing.
    async fn ensure_dlq(&self, topic: &str) -> Result<(), NodeError> {
        if self.core.store.topic(topic).is_some() {
            return Ok(());
        }
        let payload = Command::CreateTopic(TopicConfig::new(topic, 1))
            .encode()
            .map_err(NodeError::Store)?;
        let deadline = Instant::now() + self.core.config.send_timeout();
        match crate::pipeline::propose::propose(&self.core, payload, deadline).await {
            Ok(r) => match r.data {
                raftmq_store::ApplyResponse::Rejected { .. }
                    if self.core.store.topic(topic).is_some() =>
                {
                    Ok(())
                }
                raftmq_store::ApplyResponse::Rejected { code, message } => {
                    Err(NodeError::from_reject(code, message))
                }
                _ => Ok(()),
            },
            Err(_) if self.core.store.topic(topic).is_some() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Leader only: copies the popped message into `%DLQ%<group>`, then acks it.
    pub(super) async fn dead_letter_here(
        &self,
        group: &str,
        handle: ReceiptHandle,
    ) -> Result<(), NodeError> {
        let store = &self.core.store;
        let pulled = store
            .pull(&PullRequest {
                topic: handle.topic.clone(),
                queue_id: handle.queue_id,
                offset: handle.queue_offset,
                max_count: 1,
                max_bytes: u64::MAX,
                tag_expr: "*".into(),
            })
            .map_err(NodeError::Store)?;
        let original = pulled
            .messages
            .into_iter()
            .find(|m| m.queue_offset == handle.queue_offset)
            .ok_or_else(|| {
                NodeError::NotFound(format!(
                    "message {} of {}/{} is no longer stored",
                    handle.queue_offset, handle.topic, handle.queue_id
                ))
            })?;
        let dlq = format!("{DLQ_PREFIX}{group}");
        self.ensure_dlq(&dlq).await?;
        let mut m = original.message;
        m.properties.insert("REAL_TOPIC".into(), m.topic.clone());
        m.properties.insert(
            "ORIGIN_MESSAGE_ID".into(),
            original.msg_id.get().to_string(),
        );
        m.topic = dlq;
        let batch = self
            .pipeline
            .validate_system(std::iter::once(Ok((m, None))), Instant::now())?;
        self.pipeline.submit(batch).await?;
        let acked = consume::ack(
            &self.core,
            group,
            &handle.topic,
            std::slice::from_ref(&handle),
        )
        .await?;
        match acked.into_iter().next() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(e),
            None => Err(NodeError::Internal("ack answered no result".into())),
        }
    }

    /// ForwardMessageToDeadLetterQueue (see the module docs).
    pub(super) async fn forward_to_dlq(
        &self,
        r: rmq::ForwardMessageToDeadLetterQueueRequest,
    ) -> rmq::ForwardMessageToDeadLetterQueueResponse {
        let answer = |s| rmq::ForwardMessageToDeadLetterQueueResponse { status: Some(s) };
        let group = match group_name(r.group.as_ref()) {
            Ok(g) => g.to_string(),
            Err(s) => return answer(s),
        };
        if let Err(s) = topic_name(r.topic.as_ref()) {
            return answer(s);
        }
        let node_id = self.core.node_id;
        let handle = match ReceiptHandle::decode(&r.receipt_handle) {
            Ok(h) => h,
            Err(e) => return answer(status::from_error(&e, node_id)),
        };
        let local = |svc: RocketMqService| async move {
            Ok(match svc.dead_letter_here(&group, handle).await {
                Ok(()) => status::ok(),
                Err(e) => status::from_error(&e, node_id),
            })
        };
        let remote = |mut c: forward::LeaderClient| {
            let req = forward::request(&self.core, r.clone());
            async move {
                let s = c
                    .forward_message_to_dead_letter_queue(req)
                    .await?
                    .into_inner()
                    .status;
                Ok(s.unwrap_or_else(|| status::status(Code::InternalServerError, "no status")))
            }
        };
        match forward::on_leader(self, local, remote).await {
            Ok(s) => answer(s),
            Err(s) => answer(s),
        }
    }
}
