//! The write pipeline: the one way messages get into the CommitLog. Every entry point (unary
//! `Send`, `SendBatch`, `SendStream`; next the RocketMQ protocol) translates its wire types to
//! store-level [`Message`]s and calls [`Pipeline::submit`] (one request, all or nothing) or
//! [`Pipeline::submit_group`] (single sends sharing one entry, each keeping its own answer)
//! on the leader. Followers never run it: their entry points relay the wire request to the
//! leader, which must run it.
//!
//! Steps, in order:
//! 1. validate, when the [`SubmitBatch`] is built ([`Pipeline::validate`]): message count,
//!    then each message against the store limits (one call, `StoreLimits::check_message`);
//! 2. refuse early, nothing proposed: shutting down, disk above the reject ratio (here, or on
//!    so many voters that no majority has room: `disk_guard`);
//! 3. choose queues and stamp the store time ([`queues`]);
//! 4. encode one `SendBatch` entry and check its size (`StoreLimits::check_batch`); a batch
//!    with an identified message (idempotent send) carries the dedup bounds of this leader's
//!    config, and apply answers a retry from the replicated dedup window;
//! 5. propose, wait for commit, apply and durability ([`propose`]);
//! 6. answer: one ack per message, in order, or the error. The send metrics (latency per
//!    client send, failures, messages and bytes in) are recorded here and nowhere else.
//!
//! A group of single sends ([`Pipeline::submit_group`]) takes one of the node's shared slots
//! before step 2, or waits and goes through steps 2 to 5 merged with other streams' groups
//! ([`coalesce`]: group commit across producers).

pub mod batch;
pub mod coalesce;
pub mod consume;
pub mod propose;
pub mod queues;

use std::sync::Arc;

use raftmq_raft_log::types::LogId;
use raftmq_store::command::Command;
use raftmq_store::dedup::has_identity;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;
use raftmq_store::ApplyResponse;
use raftmq_store::MessageAck;
use tokio::time::Instant;

pub use self::batch::SubmitBatch;
pub use self::coalesce::connection_source;
use self::coalesce::Entered;
use self::coalesce::Slot;
pub use self::coalesce::Source;
use self::coalesce::Stored;
use self::propose::propose;
use self::propose::WriteResponse;
pub use self::queues::now_ms;
use crate::core::NodeCore;
use crate::error::NodeError;

/// A batch stored as one Raft entry: committed, applied, durable on the leader.
#[derive(Debug)]
pub struct Sent {
    /// The entry.
    pub log_id: LogId,
    /// One ack per message, in the batch's order.
    pub acks: Vec<MessageAck>,
}

/// The answers to a group of single sends ([`Pipeline::submit_group`]).
#[derive(Debug)]
pub enum GroupOutcome {
    /// The group went out as one entry.
    Stored(Sent),
    /// The group stored nothing; each message was submitted alone and got its own answer
    /// (one per message, in order), the one it would get had it come alone.
    OneByOne(Vec<Result<Sent, NodeError>>),
    /// The entry was proposed and its outcome is unknown: the same for every message (it
    /// commits for all of them or for none).
    Unknown(NodeError),
}

/// A failed store attempt; `unsent` gives the batch back when nothing was stored and the
/// caller asked to keep it.
struct Failed {
    error: NodeError,
    unsent: Option<SubmitBatch>,
}

/// The write pipeline of one node (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    core: Arc<NodeCore>,
}

impl Pipeline {
    /// The pipeline of `core`'s node.
    pub fn new(core: Arc<NodeCore>) -> Self {
        Self { core }
    }

    /// The node state the pipeline runs on.
    pub fn core(&self) -> &Arc<NodeCore> {
        &self.core
    }

    /// Validates the messages of one client request that arrived at `arrived` (see
    /// [`SubmitBatch`]); nothing is recorded for a refused request (it is not a send).
    pub fn validate<I>(&self, items: I, arrived: Instant) -> Result<SubmitBatch, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        SubmitBatch::validate(&self.core, items, arrived)
    }

    /// [`validate`](Self::validate) of messages the broker itself writes into system topics
    /// (dead-letter queues), which clients may not produce to.
    pub fn validate_system<I>(&self, items: I, arrived: Instant) -> Result<SubmitBatch, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        SubmitBatch::validate_system(&self.core, items, arrived)
    }

    /// Stores `batch` as one entry (leader only): every message or none.
    pub async fn submit(&self, batch: SubmitBatch) -> Result<Sent, NodeError> {
        let (arrived, sends, count, bytes) =
            (batch.arrived, batch.sends, batch.len(), batch.body_bytes());
        let res = self.store(batch, false).await.map_err(|f| f.error);
        self.record(arrived, sends, res.is_ok().then_some((count, bytes)));
        res
    }

    /// Stores `batch` (one client request of `source`, every message or none) as one entry:
    /// its own, or while the node is loaded one it shares with other sources' requests and
    /// groups ([`coalesce`]; the batch's messages stay together, in order). A shared entry
    /// that stored nothing, perhaps for another request's message, is followed by this
    /// request alone, so its answer is the one it would get alone.
    pub async fn submit_shared(
        &self,
        source: Source,
        batch: SubmitBatch,
    ) -> Result<Sent, NodeError> {
        let (arrived, sends, count, bytes) =
            (batch.arrived, batch.sends, batch.len(), batch.body_bytes());
        let (stored, _) = self.store_group(source, batch, false).await;
        let res = stored.map_err(|f| f.error);
        self.record(arrived, sends, res.is_ok().then_some((count, bytes)));
        res
    }

    /// Stores single sends of one topic from `source` (a SendStream) that arrived together
    /// as one entry (leader only), or in one entry with other sources' groups while the node
    /// is loaded ([`coalesce`]). Each message keeps the answer it would get alone: a group
    /// whose merged entry stored nothing is stored again on its own; a group whose own entry
    /// stored nothing (refused before the proposal, or rejected as a whole by apply) is
    /// submitted again message by message, concurrently.
    pub async fn submit_group(&self, source: Source, group: SubmitBatch) -> GroupOutcome {
        let (arrived, sends, count, bytes) =
            (group.arrived, group.sends, group.len(), group.body_bytes());
        let (stored, alone) = self.store_group(source, group, true).await;
        match stored {
            Ok(sent) => {
                self.record(arrived, sends, Some((count, bytes)));
                GroupOutcome::Stored(sent)
            }
            // A message that went out alone has its own answer already.
            Err(Failed {
                error,
                unsent: Some(group),
            }) if alone && group.len() == 1 => {
                self.record(arrived, sends, None);
                GroupOutcome::OneByOne(vec![Err(error)])
            }
            Err(Failed {
                error,
                unsent: Some(group),
            }) => {
                tracing::debug!(error = %error, messages = count, "group send stored nothing; sending its messages one by one");
                let alone = group.into_singles().map(|single| self.submit(single));
                GroupOutcome::OneByOne(futures::future::join_all(alone).await)
            }
            Err(Failed {
                error,
                unsent: None,
            }) => {
                self.record(arrived, sends, None);
                GroupOutcome::Unknown(error)
            }
        }
    }

    /// Stores `group` of `source` through the node's shared slots ([`coalesce`]): in an
    /// entry of its own or in a merged one; a merged entry that stored nothing (perhaps for
    /// another stream's message) is followed by this group alone, before its messages go
    /// one by one. Returns the outcome and whether the entry held this group alone.
    /// `keep_alone`: a group stored in an entry of its own keeps its messages for a retry
    /// (`store`'s `keep`); one whose failure alone is final frees them once encoded.
    async fn store_group(
        &self,
        source: Source,
        group: SubmitBatch,
        keep_alone: bool,
    ) -> (Stored, bool) {
        let count = group.len();
        let (stored, alone) = match self.core.proposals.enter(source, group) {
            Entered::Run(group, running) => {
                let slot = Slot::held(self.clone(), running);
                let stored = self.store(group, keep_alone).await;
                drop(slot);
                (stored, true)
            }
            Entered::Wait(answer, launch) => {
                if let Some(full) = launch {
                    coalesce::launch(self.clone(), full);
                }
                answer.await.unwrap_or_else(|_| {
                    let error = NodeError::OutcomeUnknown(
                        "the node stopped while the group's entry was being stored".into(),
                    );
                    (
                        Err(Failed {
                            error,
                            unsent: None,
                        }),
                        false,
                    )
                })
            }
        };
        match (stored, alone) {
            (
                Err(Failed {
                    error,
                    unsent: Some(group),
                }),
                false,
            ) => {
                tracing::debug!(error = %error, messages = count, "a merged entry stored nothing; storing this stream's group alone");
                (self.store(group, keep_alone).await, true)
            }
            other => other,
        }
    }

    /// One latency sample per client send; on success (`stored`: messages, body bytes) the
    /// messages and bytes in, else one failure per send.
    fn record(&self, arrived: Instant, sends: usize, stored: Option<(usize, usize)>) {
        let metrics = &self.core.metrics;
        let elapsed = arrived.elapsed();
        if let Some((messages, bytes)) = stored {
            metrics.record_in(messages, bytes);
        }
        for _ in 0..sends {
            metrics.record_send(elapsed, stored.is_some());
        }
    }

    /// Steps 2 to 6 of the module docs. With `keep`, a failure that stored nothing gives the
    /// batch back (its messages are held until the answer instead of dropped once encoded).
    async fn store(&self, mut batch: SubmitBatch, keep: bool) -> Result<Sent, Failed> {
        let core = &*self.core;
        let refused = |error, batch| Failed {
            error,
            unsent: keep.then_some(batch),
        };
        if core.is_shutting_down() {
            let deadline = batch.arrived + core.config.send_timeout();
            let refusal = propose::stopping_refusal(core, deadline).await;
            return Err(refused(refusal, batch));
        }
        if let Err(e) = crate::disk_guard::check_send(core) {
            return Err(refused(e, batch));
        }
        let auto_create_queues = match queues::assign(core, &mut batch.messages, &batch.wanted) {
            Ok(a) => a,
            Err(e) => return Err(refused(e, batch)),
        };
        let count = batch.len();
        // Only a batch with an identified message carries the dedup trailer, so other
        // entries keep the bytes they had before deduplication existed.
        let dedup = batch
            .messages
            .iter()
            .any(has_identity)
            .then(|| core.config.store.dedup_params())
            .flatten();
        let cmd = Command::SendBatch {
            messages: std::mem::take(&mut batch.messages),
            auto_create_queues,
            dedup,
        };
        let payload = cmd.encode().and_then(|p| {
            core.store.limits().check_batch(count, p.0.len())?;
            Ok(p)
        });
        // Keep the messages for a retry, or free them now (the payload holds their bytes).
        if let (true, Command::SendBatch { messages, .. }) = (keep, cmd) {
            batch.messages = messages;
        }
        let payload = match payload {
            Ok(p) => p,
            Err(e) => return Err(refused(NodeError::InvalidArgument(e.to_string()), batch)),
        };
        tracing::debug!(
            messages = count,
            waited_us = batch.arrived.elapsed().as_micros() as u64,
            "batch proposed"
        );
        let deadline = batch.arrived + core.config.send_timeout();
        let res = propose(core, payload, deadline)
            .await
            .and_then(|resp| acks(resp, count));
        if let Ok(sent) = &res {
            let hits = sent
                .acks
                .iter()
                .filter(|a| a.duplicate_of.is_some())
                .count();
            core.metrics.dedup_hits.inc_by(hits as u64);
        }
        res.map_err(|error| {
            let unsent = (keep && error.stored_nothing()).then_some(batch);
            Failed { error, unsent }
        })
    }
}

/// The acks of an applied `SendBatch` of `count` messages.
fn acks(resp: WriteResponse, count: usize) -> Result<Sent, NodeError> {
    tracing::debug!(
        term = resp.log_id.leader_id.term,
        log_index = resp.log_id.index,
        messages = count,
        "batch committed and applied"
    );
    match resp.data {
        ApplyResponse::Sent(acks) if acks.len() == count => Ok(Sent {
            log_id: resp.log_id,
            acks,
        }),
        ApplyResponse::Rejected { code, message } => Err(NodeError::from_reject(code, message)),
        other => Err(NodeError::Internal(format!(
            "apply answered {other:?} to a batch of {count} messages"
        ))),
    }
}
