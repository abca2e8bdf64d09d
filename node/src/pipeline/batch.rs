//! [`SubmitBatch`]: validated store-level messages on their way to one Raft entry, with the
//! queue each producer asked for and when they arrived. Validation (the message count, then
//! each message against the store limits, in one call) happens only here, when the batch is
//! built.

use raftmq_store::limits::StoreLimits;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;
use tokio::time::Instant;

use crate::core::NodeCore;
use crate::error::NodeError;

/// Validated messages for [`super::Pipeline::submit`] or [`super::Pipeline::submit_group`].
///
/// Invariant: `messages.len() == wanted.len() >= 1`; every message passed
/// `StoreLimits::check_message`.
#[derive(Debug)]
pub struct SubmitBatch {
    /// The messages, in the order they are answered (queue ids filled in by the leader).
    pub(super) messages: Vec<Message>,
    /// The queue each message asked for (`None`: the leader chooses).
    pub(super) wanted: Vec<Option<QueueId>>,
    /// When the first client send of the batch arrived; the send timeout counts from it.
    pub(super) arrived: Instant,
    /// Client sends the batch answers: 1 for one request, one per message of a group of
    /// single sends (each records its own latency sample).
    pub(super) sends: usize,
}

impl SubmitBatch {
    /// Validates the messages of one client request (see the module docs). `items` are the
    /// request's messages as the entry point converts them, lazily, so that a conversion
    /// error of message #i is the answer in its place, as a limit error would be.
    pub(super) fn validate<I>(
        core: &NodeCore,
        items: I,
        arrived: Instant,
    ) -> Result<Self, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        Self::validate_with(core, items, arrived, StoreLimits::check_message)
    }

    /// [`validate`](Self::validate) of messages the broker writes into system topics
    /// (dead-letter queues): [`StoreLimits::check_system_message`].
    pub(super) fn validate_system<I>(
        core: &NodeCore,
        items: I,
        arrived: Instant,
    ) -> Result<Self, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        Self::validate_with(core, items, arrived, StoreLimits::check_system_message)
    }

    fn validate_with<I>(
        core: &NodeCore,
        items: I,
        arrived: Instant,
        check: fn(&StoreLimits, &Message) -> raftmq_store::error::Result<()>,
    ) -> Result<Self, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        let max = core.config.store.limits.max_batch_messages as usize;
        Self::validate_parts(items, arrived, max, core.store.limits(), check)
    }

    /// The validation of [`validate`](Self::validate) with its inputs given: at most `max`
    /// messages, each passing `check` against `limits` (the fuzz targets call it directly).
    pub(crate) fn validate_parts<I>(
        items: I,
        arrived: Instant,
        max: usize,
        limits: &StoreLimits,
        check: fn(&StoreLimits, &Message) -> raftmq_store::error::Result<()>,
    ) -> Result<Self, NodeError>
    where
        I: ExactSizeIterator<Item = Result<(Message, Option<QueueId>), NodeError>>,
    {
        let count = items.len();
        if count == 0 {
            return Err(NodeError::InvalidArgument(
                "the batch holds no message".into(),
            ));
        }
        if count > max {
            return Err(NodeError::InvalidArgument(format!(
                "the batch holds {count} messages; max-batch-messages is {max}"
            )));
        }
        let mut messages = Vec::with_capacity(count);
        let mut wanted = Vec::with_capacity(count);
        for (i, item) in items.enumerate() {
            let (m, queue) = item?;
            check(limits, &m)
                .map_err(|e| NodeError::InvalidArgument(format!("message #{i}: {e}")))?;
            messages.push(m);
            wanted.push(queue);
        }
        Ok(SubmitBatch {
            messages,
            wanted,
            arrived,
            sends: 1,
        })
    }

    /// The messages, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// True if the batch holds no message (never, by its invariant).
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Appends `other` (a group of single sends, see [`super::Pipeline::submit_group`]). The
    /// caller keeps the group within `max-batch-messages` and `max-batch-bytes`; a larger
    /// one is refused by the entry size check before anything is proposed.
    pub fn join(&mut self, other: SubmitBatch) {
        self.messages.extend(other.messages);
        self.wanted.extend(other.wanted);
        self.arrived = self.arrived.min(other.arrived);
        self.sends += other.sends;
    }

    /// Splits off the messages from `at` on as a batch of their own, with this batch's
    /// arrival and no send (the caller sets both); `at` is at most [`len`](Self::len).
    pub(super) fn split_off(&mut self, at: usize) -> SubmitBatch {
        SubmitBatch {
            messages: self.messages.split_off(at),
            wanted: self.wanted.split_off(at),
            arrived: self.arrived,
            sends: 0,
        }
    }

    /// Body bytes, as `bytes_in` counts them.
    pub(super) fn body_bytes(&self) -> usize {
        self.messages.iter().map(|m| m.body.len()).sum()
    }

    /// Each message as a batch of its own (one send each), with the same arrival.
    pub(super) fn into_singles(self) -> impl Iterator<Item = SubmitBatch> {
        let arrived = self.arrived;
        self.messages
            .into_iter()
            .zip(self.wanted)
            .map(move |(m, queue)| SubmitBatch {
                messages: vec![m],
                wanted: vec![queue],
                arrived,
                sends: 1,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(topic: &str, body: &[u8], queue: Option<QueueId>, arrived: Instant) -> SubmitBatch {
        SubmitBatch {
            messages: vec![Message::new(topic, QueueId::new(0), body.to_vec())],
            wanted: vec![queue],
            arrived,
            sends: 1,
        }
    }

    #[test]
    fn join_then_singles_keeps_order_queues_and_arrival() {
        let t0 = Instant::now();
        let mut group = single("t", b"a", None, t0 + std::time::Duration::from_millis(5));
        group.join(single("t", b"bb", Some(QueueId::new(2)), t0));
        group.join(single("t", b"ccc", Some(QueueId::new(1)), t0));
        assert_eq!((group.len(), group.sends, group.body_bytes()), (3, 3, 6));
        assert_eq!(
            group.arrived, t0,
            "the earliest arrival bounds the send timeout"
        );
        let singles: Vec<SubmitBatch> = group.into_singles().collect();
        let seen: Vec<(Vec<u8>, Option<QueueId>, usize)> = singles
            .iter()
            .map(|s| (s.messages[0].body.to_vec(), s.wanted[0], s.sends))
            .collect();
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), None, 1),
                (b"bb".to_vec(), Some(QueueId::new(2)), 1),
                (b"ccc".to_vec(), Some(QueueId::new(1)), 1)
            ]
        );
        assert!(singles.iter().all(|s| s.arrived == t0 && !s.is_empty()));
    }
}
