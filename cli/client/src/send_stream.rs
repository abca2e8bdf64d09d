//! [`SendMux`]: the concurrent sends of a [`Client`](crate::Client) to one node share one
//! `SendStream` call, each message (or batch) a frame with its own answer (matched by `seq`).
//!
//! A unary `Send` or `SendBatch` opens an HTTP/2 stream per call; with many sends in flight
//! that cost, on the client and on the node, bounds a producer. Semantics do not change: each
//! message is answered as `Send` answers it, each batch as `SendBatch` does, and the
//! client's retry rules see the same statuses.
//!
//! What a caller gets when the stream breaks:
//! - its message was handed to the stream (it may have reached the node): UNAVAILABLE without
//!   detail, an unknown outcome, as for a unary send whose connection broke;
//! - its message never left this process: the reason the stream could not be opened (a
//!   connect error, UNIMPLEMENTED from a node without `SendStream`), or UNAVAILABLE with
//!   `not_applied`, so the client may resend it safely.

use crate::credentials::Sender;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_proto::shared::Shared;
use raftmq_proto::shared::SharedSendStreamRequest;
use raftmq_proto::v1::send_stream_reply::Outcome;
use raftmq_proto::v1::ErrorDetail;
use raftmq_proto::v1::ErrorReason;
use raftmq_proto::v1::Message;
use raftmq_proto::v1::SendBatchRequest;
use raftmq_proto::v1::SendResult;
use raftmq_proto::v1::SendStreamReply;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tonic::Status;

/// A send's result and, when the node forwarded it, the leader's client address.
pub(crate) type Sent = (SendResult, Option<String>);

/// A batch's results and, when the node forwarded it, the leader's client address.
pub(crate) type SentBatch = (Vec<SendResult>, Option<String>);

/// A request's answer as it came: its outcome and the leader's address.
type Answer = oneshot::Sender<Result<(Outcome, Option<String>), Status>>;

/// What one request carries.
enum Item {
    One(Shared<Message>),
    Batch(Shared<SendBatchRequest>),
}

struct Queued {
    item: Item,
    reply: Answer,
}

/// State shared by the request side (which registers each message as it is handed to the
/// stream) and the answer side.
#[derive(Default)]
struct Pending {
    answers: HashMap<u64, Answer>,
    /// Why the stream ended, once it did; nothing is registered after that.
    closed: Option<Status>,
}

/// One `SendStream` to one node.
pub(crate) struct SendMux {
    tx: mpsc::UnboundedSender<Queued>,
    pending: Arc<Mutex<Pending>>,
}

fn lock(p: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    p.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// UNAVAILABLE for a message that never left this process: safe to resend.
fn not_sent(why: &str) -> Status {
    raftmq_proto::with_error_detail(
        Status::unavailable(format!("message not sent: {why}")),
        &ErrorDetail {
            reason: ErrorReason::Unspecified as i32,
            leader_id: None,
            leader_addr: String::new(),
            not_applied: true,
        },
    )
}

impl SendMux {
    /// Opens a stream over `client` (the call starts in a background task).
    pub(crate) fn open(client: Sender) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        tokio::spawn(run(client, rx, pending.clone()));
        Self { tx, pending }
    }

    /// True once the stream ended; a new one is needed.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed() || lock(&self.pending).closed.is_some()
    }

    /// Sends `message` and waits up to `timeout` for its answer.
    pub(crate) async fn send(
        &self,
        message: Shared<Message>,
        timeout: Duration,
    ) -> Result<Sent, Status> {
        match self.request(Item::One(message), timeout).await? {
            (Outcome::Result(r), leader) => Ok((r, leader)),
            _ => Err(Status::internal("a send's answer holds a batch's results")),
        }
    }

    /// Sends `batch` (one entry) and waits up to `timeout` for its answer.
    pub(crate) async fn send_batch(
        &self,
        batch: Shared<SendBatchRequest>,
        timeout: Duration,
    ) -> Result<SentBatch, Status> {
        match self.request(Item::Batch(batch), timeout).await? {
            (Outcome::Batch(b), leader) => Ok((b.results, leader)),
            _ => Err(Status::internal("a batch's answer holds a single result")),
        }
    }

    /// Puts `item` on the stream and waits up to `timeout` for its answer (an error answer
    /// as the status it stands for).
    async fn request(
        &self,
        item: Item,
        timeout: Duration,
    ) -> Result<(Outcome, Option<String>), Status> {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Queued { item, reply }).is_err() {
            return Err(self.closed_reason());
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(r)) => r,
            // Dropped unanswered: it was never registered, so never handed to the stream.
            Ok(Err(_)) => Err(self.closed_reason()),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "no answer within {timeout:?}"
            ))),
        }
    }

    /// What a message that never left gets: the stream's failure when it says the message
    /// could not have arrived, else a resendable UNAVAILABLE.
    fn closed_reason(&self) -> Status {
        match &lock(&self.pending).closed {
            Some(s) => unsent(s),
            None => not_sent("the send stream is closed"),
        }
    }
}

/// True for what a node from before batches on `SendStream` answers a batch: it saw no
/// `message` (INVALID_ARGUMENT, nothing stored), so the batch can go as a unary `SendBatch`.
pub(crate) fn batch_unsupported(s: &Status) -> bool {
    s.code() == tonic::Code::InvalidArgument && s.message().ends_with(": message is missing")
}

/// The answer for a message that did not reach the node because the stream failed with `s`.
fn unsent(s: &Status) -> Status {
    use tonic::Code;
    // A refused credential is the node's answer to every message: pass it on (not retried).
    let refused = matches!(s.code(), Code::Unauthenticated | Code::PermissionDenied);
    if refused || crate::error::is_connect_error(s) || s.code() == Code::Unimplemented {
        s.clone()
    } else {
        not_sent(s.message())
    }
}

/// Requests as the stream takes them: each gets a `seq` and is registered (before it can be
/// answered). Ends when the mux is dropped or the stream closed.
fn requests(
    rx: mpsc::UnboundedReceiver<Queued>,
    pending: Arc<Mutex<Pending>>,
) -> impl futures::Stream<Item = SharedSendStreamRequest> + Send + 'static {
    futures::stream::unfold(
        (rx, pending, 0u64),
        |(mut rx, pending, mut seq)| async move {
            let q = rx.recv().await?;
            seq += 1;
            {
                let mut p = lock(&pending);
                if p.closed.is_some() {
                    // Dropping `q` answers it as never sent.
                    return None;
                }
                p.answers.insert(seq, q.reply);
            }
            let (message, batch) = match q.item {
                Item::One(m) => (Some(m), None),
                Item::Batch(b) => (None, Some(b)),
            };
            let req = SharedSendStreamRequest {
                seq,
                message,
                batch,
            };
            Some((req, (rx, pending, seq)))
        },
    )
}

async fn run(
    mut client: Sender,
    rx: mpsc::UnboundedReceiver<Queued>,
    pending: Arc<Mutex<Pending>>,
) {
    // The call failing outright (connect error, UNIMPLEMENTED, a node shutting down) means
    // the node's handler never took a message, even those already handed to the stream.
    let (end, opened) = match client.send_stream(requests(rx, pending.clone())).await {
        Ok(resp) => {
            let mut answers = resp.into_inner();
            let end = loop {
                match answers.message().await {
                    Ok(Some(reply)) => deliver(&pending, reply),
                    Ok(None) => break Status::unavailable("the node ended the send stream"),
                    Err(s) => break s,
                }
            };
            (end, true)
        }
        Err(s) => (s, false),
    };
    tracing::debug!(code = ?end.code(), message = end.message(), opened, "send stream ended");
    let unanswered = {
        let mut p = lock(&pending);
        p.closed = Some(end.clone());
        std::mem::take(&mut p.answers)
    };
    for (_, a) in unanswered {
        let status = if opened {
            Status::unavailable(format!(
                "send stream broke before the answer ({}: {}); outcome unknown",
                end.code(),
                end.message()
            ))
        } else {
            unsent(&end)
        };
        let _ = a.send(Err(status));
    }
}

fn deliver(pending: &Mutex<Pending>, reply: SendStreamReply) {
    let Some(answer) = lock(pending).answers.remove(&reply.seq) else {
        tracing::warn!(seq = reply.seq, "send stream: answer to an unknown seq");
        return;
    };
    let leader = Some(reply.leader_addr).filter(|a| !a.is_empty());
    let r = match reply.outcome {
        Some(Outcome::Error(e)) => Err(raftmq_proto::send_error_status(e)),
        Some(outcome) => Ok((outcome, leader)),
        None => Err(Status::internal("send stream answer without an outcome")),
    };
    // The caller may have timed out and gone.
    let _ = answer.send(r);
}
