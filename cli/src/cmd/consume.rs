//! `raftmq consume`: read a topic's queues, optionally as a consumer group (committing offsets
//! and resuming from them) and optionally following new messages.

use clap::Args;
use raftmq_client::proto::PullRequest;
use raftmq_client::proto::PullStatus;
use raftmq_client::Client;
use tokio::sync::mpsc;

use super::view::MessageView;
use super::Global;
use crate::output::table;

/// `consume` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  raftmq consume --topic orders
  raftmq consume --topic orders --queue 1 --from 100 --max 10
  raftmq consume --topic orders --group billing --follow
  raftmq consume --topic orders --tag 'paid || refunded' --json
Without --follow it stops at the end of every queue. With --group it starts from the group's
committed offset (else --from) and commits after each batch. --json prints one object per line.")]
pub struct ConsumeArgs {
    /// Topic.
    #[arg(long)]
    pub topic: String,
    /// One queue (default: every queue of the topic).
    #[arg(long)]
    pub queue: Option<i32>,
    /// Where to start without a committed group offset: earliest, latest or an offset.
    #[arg(long, default_value = "earliest", value_parser = parse_from)]
    pub from: From,
    /// Consumer group: resume from its committed offsets and commit progress.
    #[arg(long)]
    pub group: Option<String>,
    /// Tag expression: "*" or "TagA || TagB".
    #[arg(long, default_value = "*")]
    pub tag: String,
    /// Keep waiting for new messages.
    #[arg(long)]
    pub follow: bool,
    /// Stop after this many messages.
    #[arg(long)]
    pub max: Option<u64>,
}

/// Start position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// The queue's min offset.
    Earliest,
    /// The queue's max offset (only new messages).
    Latest,
    /// A given offset.
    Offset(u64),
}

fn parse_from(s: &str) -> Result<From, String> {
    match s {
        "earliest" => Ok(From::Earliest),
        "latest" => Ok(From::Latest),
        n => n
            .parse()
            .map(From::Offset)
            .map_err(|_| format!("{n:?} is not earliest, latest or an offset")),
    }
}

/// One queue to read: id and its (min, max) offsets at start.
#[derive(Clone, Copy, Debug)]
struct QueueStart {
    queue: i32,
    min: u64,
    max: u64,
}

async fn queues(client: &Client, a: &ConsumeArgs) -> anyhow::Result<Vec<QueueStart>> {
    let topics = client.list_topics().await?;
    let info = topics
        .iter()
        .find(|t| t.config.as_ref().is_some_and(|c| c.name == a.topic))
        .ok_or_else(|| anyhow::anyhow!("no topic {:?} (see `raftmq topic list`)", a.topic))?;
    let mut out: Vec<QueueStart> = info
        .queues
        .iter()
        .map(|q| QueueStart {
            queue: q.queue_id,
            min: q.min_offset,
            max: q.max_offset,
        })
        .collect();
    if out.is_empty() {
        let n = info.config.as_ref().map_or(0, |c| c.queue_count);
        out = (0..n as i32)
            .map(|queue| QueueStart {
                queue,
                min: 0,
                max: 0,
            })
            .collect();
    }
    if let Some(q) = a.queue {
        out.retain(|s| s.queue == q);
        anyhow::ensure!(!out.is_empty(), "topic {:?} has no queue {q}", a.topic);
    }
    Ok(out)
}

/// Reads one queue, sending each message to `tx`; commits the group offset after each batch.
async fn read_queue(
    client: Client,
    a: std::sync::Arc<ConsumeArgs>,
    q: QueueStart,
    tx: mpsc::Sender<MessageView>,
) -> anyhow::Result<()> {
    let committed = match &a.group {
        Some(g) => client.fetch_offset(g, &a.topic, q.queue).await?,
        None => None,
    };
    let mut offset = committed.unwrap_or(match a.from {
        From::Earliest => q.min,
        From::Latest => q.max,
        From::Offset(o) => o,
    });
    loop {
        let reply = client
            .pull(PullRequest {
                topic: a.topic.clone(),
                queue_id: q.queue,
                offset,
                max_count: 64,
                max_bytes: 0,
                tag_expression: a.tag.clone(),
                long_poll_timeout_ms: if a.follow { 2000 } else { 0 },
            })
            .await?;
        let status = PullStatus::try_from(reply.status).unwrap_or(PullStatus::Unspecified);
        match status {
            PullStatus::Found => {
                for m in &reply.messages {
                    if tx.send(MessageView::from(m)).await.is_err() {
                        return Ok(());
                    }
                }
            }
            PullStatus::NoMatchedMsg | PullStatus::NoNewMsg => {}
            PullStatus::OffsetTooSmall => {
                eprintln!(
                    "queue {}: offset {offset} was removed by retention; starting at {}",
                    q.queue, reply.min_offset
                );
                offset = reply.min_offset;
                continue;
            }
            PullStatus::OffsetTooBig if a.follow => {
                offset = reply.max_offset;
                continue;
            }
            PullStatus::OffsetTooBig => return Ok(()),
            other => anyhow::bail!("queue {}: pull answered {other:?}", q.queue),
        }
        let advanced = reply.next_offset != offset;
        offset = reply.next_offset.max(offset);
        if let (Some(g), true) = (&a.group, advanced) {
            client.commit_offset(g, &a.topic, q.queue, offset).await?;
        }
        let at_end = status == PullStatus::NoNewMsg || offset >= reply.max_offset;
        if at_end && !a.follow {
            return Ok(());
        }
    }
}

/// Runs `consume`.
pub async fn run(g: &Global, a: ConsumeArgs) -> anyhow::Result<i32> {
    let client = g.leader_client().await?;
    let starts = queues(&client, &a).await?;
    let a = std::sync::Arc::new(a);
    let (tx, mut rx) = mpsc::channel::<MessageView>(1024);
    let mut tasks = tokio::task::JoinSet::new();
    // Without --follow, queues are read one after another so the output is ordered by queue.
    if a.follow {
        for q in starts {
            tasks.spawn(read_queue(client.clone(), a.clone(), q, tx.clone()));
        }
    } else {
        let (c, a2, tx2) = (client.clone(), a.clone(), tx.clone());
        tasks.spawn(async move {
            for q in starts {
                read_queue(c.clone(), a2.clone(), q, tx2.clone()).await?;
            }
            Ok(())
        });
    }
    drop(tx);
    let mut rows = Vec::new();
    let mut n = 0u64;
    while let Some(m) = rx.recv().await {
        if g.json {
            println!("{}", serde_json::to_string(&m)?);
        } else if a.follow {
            println!("{}", m.row().join("  "));
        } else {
            rows.push(m.row());
        }
        n += 1;
        if a.max.is_some_and(|max| n >= max) {
            tasks.abort_all();
            break;
        }
    }
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(res) => res?,
            Err(e) if e.is_cancelled() => {}
            Err(e) => return Err(e.into()),
        }
    }
    if !g.json && !a.follow {
        println!("{}", table(&MessageView::HEADERS, &rows));
        println!("{n} messages");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_values() {
        assert_eq!(parse_from("earliest").unwrap(), From::Earliest);
        assert_eq!(parse_from("latest").unwrap(), From::Latest);
        assert_eq!(parse_from("42").unwrap(), From::Offset(42));
        assert!(parse_from("soon").is_err());
    }
}
