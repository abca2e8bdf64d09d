//! Load and observation while a scenario runs: [`Producers`] send tagged messages and record
//! every attempt; [`Sampler`] polls every node's status into [`Observation`]s.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_cli::check::Attempt;
use raftmq_cli::check::History;
use raftmq_cli::check::MessageTag;
use raftmq_cli::check::Observation;
use raftmq_cli::check::Outcome;
use raftmq_client::proto as pb;
use raftmq_client::Client;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The body of message `tag`: `p<producer>#<seq>|` then `pad` filler bytes.
pub fn tagged_body(tag: MessageTag, pad: usize) -> Vec<u8> {
    let mut b = format!("{tag}|").into_bytes();
    b.extend(std::iter::repeat_n(b'x', pad));
    b
}

/// The tag written by [`tagged_body`], if `body` carries one.
pub fn parse_tag(body: &[u8]) -> Option<MessageTag> {
    let end = body.iter().position(|&b| b == b'|')?;
    let text = std::str::from_utf8(&body[..end]).ok()?;
    let (p, s) = text.strip_prefix('p')?.split_once('#')?;
    Some(MessageTag {
        producer: p.parse().ok()?,
        seq: s.parse().ok()?,
    })
}

/// A clock shared by the producers and samplers of a run.
#[derive(Clone, Copy, Debug)]
pub struct RunClock(Instant);

impl RunClock {
    /// Starts the clock now.
    pub fn start() -> Self {
        Self(Instant::now())
    }

    /// Microseconds since the run began.
    pub fn now_us(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// Settings of [`Producers`].
#[derive(Clone, Debug)]
pub struct ProducerOptions {
    /// Topic (auto-created).
    pub topic: String,
    /// Concurrent producers, ids `0..count`.
    pub count: u32,
    /// Filler bytes per body.
    pub pad: usize,
    /// Pause between two sends of one producer.
    pub pause: Duration,
    /// Per-attempt deadline of the client.
    pub request_timeout: Duration,
    /// Retry a message (same tag) after an unknown outcome, up to this many extra attempts.
    pub retries_after_unknown: u32,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        Self {
            topic: "ct".into(),
            count: 3,
            pad: 32,
            pause: Duration::from_millis(5),
            request_timeout: Duration::from_secs(3),
            retries_after_unknown: 0,
        }
    }
}

/// Producers sending tagged messages until stopped.
pub struct Producers {
    stop: Arc<AtomicBool>,
    history: Arc<Mutex<History>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Producers {
    /// Starts `opts.count` producers through `client`.
    pub fn start(client: Client, clock: RunClock, opts: ProducerOptions) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let history = Arc::new(Mutex::new(History::default()));
        let mut tasks = Vec::new();
        for producer in 0..opts.count {
            let (client, stop, history, opts) =
                (client.clone(), stop.clone(), history.clone(), opts.clone());
            tasks.push(tokio::spawn(async move {
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let tag = MessageTag { producer, seq };
                    send_one(&client, clock, &opts, tag, &history).await;
                    seq += 1;
                    tokio::time::sleep(opts.pause).await;
                }
            }));
        }
        Self {
            stop,
            history,
            tasks,
        }
    }

    /// A copy of the history so far.
    pub fn history(&self) -> History {
        self.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Number of acknowledged messages so far.
    pub fn acked(&self) -> usize {
        self.history().acked().len()
    }

    /// Waits until at least `n` more messages are acknowledged than now (or `timeout`).
    pub async fn wait_more_acked(&self, n: usize, timeout: Duration) -> anyhow::Result<()> {
        let target = self.acked() + n;
        let end = Instant::now() + timeout;
        while self.acked() < target {
            if Instant::now() > end {
                anyhow::bail!(
                    "only {} of {target} messages acknowledged within {timeout:?}",
                    self.acked()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Stops the producers (each finishes its current send) and returns the history.
    pub async fn stop(self) -> History {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        let h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        h.clone()
    }
}

async fn send_one(
    client: &Client,
    clock: RunClock,
    opts: &ProducerOptions,
    tag: MessageTag,
    history: &Mutex<History>,
) {
    for attempt in 1..=1 + opts.retries_after_unknown {
        let message = pb::Message {
            topic: opts.topic.clone(),
            body: tagged_body(tag, opts.pad).into(),
            ..Default::default()
        };
        let started_us = clock.now_us();
        let res = client.send(message).await;
        let outcome = match &res {
            Ok(r) => Outcome::Acked {
                queue_id: r.queue_id as u32,
                queue_offset: r.queue_offset,
                msg_id: r.msg_id,
            },
            Err(e) if e.is_unknown_outcome() => Outcome::Unknown,
            Err(_) => Outcome::Failed,
        };
        history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Attempt {
                tag,
                attempt,
                outcome,
                started_us,
                finished_us: clock.now_us(),
            });
        match outcome {
            Outcome::Unknown => tokio::time::sleep(Duration::from_millis(50)).await,
            Outcome::Failed => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return;
            }
            Outcome::Acked { .. } => return,
        }
    }
}

/// Polls `ClusterStatus` of every node into observations until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<Observation>>,
}

impl Sampler {
    /// Samples the nodes at `addrs` (node id `i + 1` at `addrs[i]`) every `every`.
    /// `generations[i]`, when given, counts node `i + 1`'s restarts (bumped before the new
    /// incarnation serves), so a restart between two samples is seen even when no sample
    /// missed the node; without it, only a node that did not answer counts as restarted.
    pub fn start(
        client: Client,
        addrs: Vec<String>,
        clock: RunClock,
        every: Duration,
        generations: Vec<Arc<AtomicU64>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let mut out = Vec::new();
            let mut missed = vec![false; addrs.len()];
            let generation = |i: usize| generations.get(i).map_or(0, |g| g.load(Ordering::Acquire));
            let mut seen: Vec<u64> = (0..addrs.len()).map(generation).collect();
            while !s.load(Ordering::Relaxed) {
                for (i, addr) in addrs.iter().enumerate() {
                    let at_us = clock.now_us();
                    let st = tokio::time::timeout(
                        Duration::from_millis(500),
                        client.cluster_status_from(addr),
                    )
                    .await;
                    match st {
                        Ok(Ok(st)) => {
                            // Read after the answer: an answer from a new incarnation comes
                            // after its generation was bumped.
                            let g = generation(i);
                            let restarted = missed[i] || g != seen[i];
                            if let Some(o) = observation(&st, at_us, restarted) {
                                missed[i] = false;
                                seen[i] = g;
                                out.push(o);
                            }
                        }
                        // A node that did not answer may come back restarted.
                        _ => missed[i] = true,
                    }
                }
                tokio::time::sleep(every).await;
            }
            out
        });
        Self { stop, task }
    }

    /// Stops sampling and returns the observations.
    pub async fn stop(self) -> Vec<Observation> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

fn observation(st: &pb::ClusterStatusReply, at_us: u64, restarted: bool) -> Option<Observation> {
    let me = st.members.iter().find(|m| m.node_id == st.responder_id)?;
    Some(Observation {
        at_us,
        node: st.responder_id,
        term: me.term,
        is_leader: me.role == pb::Role::Leader as i32 && me.leader_id == Some(st.responder_id),
        committed: me.watermarks.as_ref().and_then(|w| w.committed_index),
        restarted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        let t = MessageTag {
            producer: 7,
            seq: 12345,
        };
        assert_eq!(parse_tag(&tagged_body(t, 10)), Some(t));
        assert_eq!(parse_tag(b"no tag"), None);
    }
}
