//! `Send` and `SendBatch` on the leader: a request's wire messages become one
//! [`SubmitBatch`] for the [`Pipeline`], its acks become wire results.

use raftmq_proto::v1 as pb;
use raftmq_store::message::Message;
use raftmq_store::types::QueueId;
use tokio::time::Instant;

use super::convert;
use crate::error::NodeError;
/// Milliseconds since the Unix epoch (the pipeline's store-timestamp clock, also used by the
/// reads and retention).
pub use crate::pipeline::now_ms;
use crate::pipeline::Pipeline;
use crate::pipeline::Sent;
use crate::pipeline::Source;
use crate::pipeline::SubmitBatch;

/// One wire message as the pipeline takes it, with the queue it asked for.
pub fn message_in(m: pb::Message) -> Result<(Message, Option<QueueId>), NodeError> {
    let wanted = convert::wanted_queue(m.queue_id)?;
    Ok((convert::message_in(m)?, wanted))
}

/// Converts and validates a request's messages (arrived at `arrived`).
pub fn batch_in<I>(pipeline: &Pipeline, msgs: I, arrived: Instant) -> Result<SubmitBatch, NodeError>
where
    I: IntoIterator<Item = pb::Message>,
    I::IntoIter: ExactSizeIterator,
{
    pipeline.validate(msgs.into_iter().map(message_in), arrived)
}

/// The wire results of a stored batch, in order.
pub fn results_out(sent: &Sent) -> Vec<pb::SendResult> {
    sent.acks
        .iter()
        .map(|a| convert::ack_out(a, &sent.log_id))
        .collect()
}

/// A request's messages, from the client connection `source`, in one entry (leader only;
/// under load shared with other connections' requests: [`Pipeline::submit_shared`]); one
/// result per message.
pub async fn send_messages<I>(
    pipeline: &Pipeline,
    source: Source,
    msgs: I,
) -> Result<Vec<pb::SendResult>, NodeError>
where
    I: IntoIterator<Item = pb::Message>,
    I::IntoIter: ExactSizeIterator,
{
    let batch = batch_in(pipeline, msgs, Instant::now())?;
    let sent = pipeline.submit_shared(source, batch).await?;
    Ok(results_out(&sent))
}
