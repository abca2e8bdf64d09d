//! SendMessage: a request's messages go through the write pipeline as one entry (all or none),
//! answered only after the quorum commit, one result per message in order, echoing each
//! client message id with its queue offset.
//!
//! Exactly once: each message carries its client message id (`UNIQ_KEY`), which the store's
//! dedup window uses as its identity; a retried message id still in the window
//! (`dedup-window-ms`) is not stored again and is answered with the original queue offset, as
//! a fresh send would be.

use raftmq_proto::rocketmq::v2 as rmq;
use tokio::time::Instant;

use super::forward;
use super::message;
use super::status;
use super::RocketMqService;
use crate::pipeline::Source;

fn answer(status: rmq::Status, entries: Vec<rmq::SendResultEntry>) -> rmq::SendMessageResponse {
    rmq::SendMessageResponse {
        status: Some(status),
        entries,
    }
}

/// The client message ids of `msgs` ("" where missing).
fn message_ids(msgs: &[rmq::Message]) -> Vec<String> {
    msgs.iter()
        .map(|m| {
            m.system_properties
                .as_ref()
                .map(|s| s.message_id.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// The same failure for the request and each of its messages.
fn failed(s: rmq::Status, ids: &[String]) -> rmq::SendMessageResponse {
    let entries = ids
        .iter()
        .map(|id| rmq::SendResultEntry {
            status: Some(s.clone()),
            message_id: id.clone(),
            ..Default::default()
        })
        .collect();
    answer(s, entries)
}

impl RocketMqService {
    /// SendMessage (see the module docs).
    pub(super) async fn send_message(
        &self,
        req: rmq::SendMessageRequest,
        source: Source,
    ) -> rmq::SendMessageResponse {
        let ids = message_ids(&req.messages);
        if req.messages.is_empty() {
            return failed(status::bad_request("SendMessage carries no message"), &ids);
        }
        // Checked here too, so a follower answers a bad message without a round trip.
        let max_body = self.max_body();
        let now = crate::pipeline::queues::now_ms();
        if let Err(s) = req
            .messages
            .iter()
            .try_for_each(|m| message::check(m, max_body, now).map(drop))
        {
            return failed(s, &ids);
        }
        let arrived = Instant::now();
        // `local` runs at most once, and last: it takes the messages; `remote` copies the
        // request for each forwarding attempt before that.
        let req = std::sync::Mutex::new(req);
        let held = || req.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let local = |svc: RocketMqService| {
            let msgs = std::mem::take(&mut held().messages);
            async move { Ok(svc.store_messages(source, msgs, arrived).await) }
        };
        let remote = |mut c: forward::LeaderClient| {
            let r = forward::request(&self.core, held().clone());
            async move { c.send_message(r).await.map(|r| r.into_inner()) }
        };
        match forward::on_leader(self, local, remote).await {
            Ok(resp) => resp,
            Err(s) => failed(s, &ids),
        }
    }

    /// Leader only: stores the messages, from the client connection `source`, in one entry
    /// (under load shared with other connections' requests: `Pipeline::submit_shared`).
    async fn store_messages(
        &self,
        source: Source,
        msgs: Vec<rmq::Message>,
        arrived: Instant,
    ) -> rmq::SendMessageResponse {
        let max_body = self.max_body();
        let ids = message_ids(&msgs);
        let mut items = Vec::with_capacity(msgs.len());
        for m in msgs {
            match message::incoming(m, max_body) {
                Ok(i) => items.push(Ok((i.message, i.queue))),
                Err(s) => return failed(s, &ids),
            }
        }
        let node_id = self.core.node_id;
        let batch = match self.pipeline.validate(items.into_iter(), arrived) {
            Ok(b) => b,
            Err(e) => return failed(status::from_error(&e, node_id), &ids),
        };
        match self.pipeline.submit_shared(source, batch).await {
            Ok(sent) => {
                let entries = sent
                    .acks
                    .iter()
                    .zip(ids)
                    .map(|(ack, id)| rmq::SendResultEntry {
                        status: Some(status::ok()),
                        message_id: id,
                        transaction_id: String::new(),
                        offset: i64::try_from(ack.queue_offset.get()).unwrap_or(i64::MAX),
                        recall_handle: String::new(),
                    })
                    .collect();
                answer(status::ok(), entries)
            }
            Err(e) => failed(status::from_error(&e, node_id), &ids),
        }
    }

    fn max_body(&self) -> usize {
        usize::try_from(self.core.config.store.limits.max_message_bytes).unwrap_or(usize::MAX)
    }
}
