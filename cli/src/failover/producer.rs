//! A failover-test producer: sends tagged messages one after another, records every attempt in
//! the shared [`History`](crate::check::History), and retries a message (same tag; same
//! producer id and sequence when the run is idempotent, so the broker answers a retry of a
//! stored message with its original result) until it is acknowledged or the run ends.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use raftmq_client::Client;
use raftmq_client::ClientError;

use super::readback::tagged_message;
use super::verdict::AckTerm;
use super::Run;
use crate::check::Attempt;
use crate::check::MessageTag;
use crate::check::Outcome;

/// The outcome the checkers see for a client result.
pub fn outcome_of(r: &Result<raftmq_client::proto::SendResult, ClientError>) -> Outcome {
    match r {
        Ok(s) => Outcome::Acked {
            queue_id: u32::try_from(s.queue_id).unwrap_or(u32::MAX),
            queue_offset: s.queue_offset,
            msg_id: s.msg_id,
        },
        Err(e) if e.is_unknown_outcome() => Outcome::Unknown,
        Err(_) => Outcome::Failed,
    }
}

/// Producer `producer`: runs until `run.stop`.
pub async fn produce(run: Arc<Run>, client: Client, producer: u32) {
    let mut seq = 0u64;
    while !run.stop.load(Ordering::Relaxed) {
        let tag = MessageTag { producer, seq };
        let mut attempt = 1u32;
        let message = tagged_message(&run.topic, tag, run.size);
        let message = match run.idempotent {
            true => client.identify(message),
            false => message,
        };
        loop {
            let started_us = run.now_us();
            let result = client.send(message.clone()).await;
            let finished_us = run.now_us();
            let outcome = outcome_of(&result);
            run.record(Attempt {
                tag,
                attempt,
                outcome,
                started_us,
                finished_us,
            });
            if let Ok(r) = &result {
                if let Some(l) = r.log_id {
                    run.record_ack(AckTerm {
                        finished_us,
                        term: l.term,
                    });
                }
                break;
            }
            if run.stop.load(Ordering::Relaxed) {
                break;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seq += 1;
    }
}
