//! `raftmq send`: one message, a file, or N generated messages.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use raftmq_client::proto::Message;
use serde::Serialize;

use super::view::SendView;
use super::Global;
use crate::bench::load::filler;
use crate::clock::now_ms;
use crate::output::print_json;
use crate::output::table;

/// `send` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  raftmq send --topic orders --body 'hello'
  raftmq send --topic orders --tag paid --key order-17 --property region=eu --body '{\"id\":17}'
  raftmq send --topic orders --file ./payload.bin --queue 2
  raftmq send --topic orders --count 1000 --size 256 --batch 32")]
pub struct SendArgs {
    /// Topic (created on first send when the server auto-creates topics).
    #[arg(long)]
    pub topic: String,
    /// Tag (consumers filter on it).
    #[arg(long)]
    pub tag: Option<String>,
    /// Key indexed for `query --key` (repeatable).
    #[arg(long = "key")]
    pub keys: Vec<String>,
    /// Property k=v (repeatable).
    #[arg(long = "property", value_parser = parse_property)]
    pub properties: Vec<(String, String)>,
    /// Queue to write to (default: the broker chooses).
    #[arg(long)]
    pub queue: Option<i32>,
    /// Body text.
    #[arg(long, conflicts_with_all = ["file", "count"])]
    pub body: Option<String>,
    /// Body read from a file.
    #[arg(long, conflicts_with = "count")]
    pub file: Option<PathBuf>,
    /// Send this many generated messages (with --size).
    #[arg(long, requires = "size")]
    pub count: Option<u64>,
    /// Body size of generated messages, bytes.
    #[arg(long, requires = "count")]
    pub size: Option<usize>,
    /// Messages per SendBatch for --count.
    #[arg(long, default_value_t = 1, requires = "count")]
    pub batch: usize,
}

fn parse_property(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not k=v"))?;
    if k.is_empty() {
        return Err(format!("{s:?} has an empty key"));
    }
    Ok((k.to_string(), v.to_string()))
}

impl SendArgs {
    fn message(&self, body: Vec<u8>) -> Message {
        Message {
            topic: self.topic.clone(),
            queue_id: self.queue,
            tags: self.tag.clone().unwrap_or_default(),
            keys: self.keys.clone(),
            properties: self.properties.iter().cloned().collect(),
            body: body.into(),
            born_timestamp_ms: now_ms(),
            born_host: "raftmq-cli".into(),
            ..Default::default()
        }
    }
}

/// Summary of `send --count`.
#[derive(Debug, Serialize)]
struct CountSummary {
    messages: u64,
    bytes: u64,
    elapsed_s: f64,
    first: Option<SendView>,
    last: Option<SendView>,
}

/// Runs `send`.
pub async fn run(g: &Global, a: SendArgs) -> anyhow::Result<i32> {
    let client = g.client()?;
    if let (Some(count), Some(size)) = (a.count, a.size) {
        return send_count(g, &client, &a, count, size).await;
    }
    let body = match (&a.body, &a.file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(f)) => {
            std::fs::read(f).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?
        }
        (None, None) => anyhow::bail!("give --body, --file or --count with --size"),
    };
    let result = client.send(a.message(body)).await?;
    let v = SendView::from(&result);
    if g.json {
        print_json(&v)?;
    } else {
        println!("{}", table(&HEADERS, &[row(&v)]));
    }
    Ok(0)
}

const HEADERS: [&str; 5] = ["MSG ID", "QUEUE", "QUEUE OFFSET", "PHYS OFFSET", "LOG ID"];

fn row(v: &SendView) -> Vec<String> {
    vec![
        v.msg_id.to_string(),
        v.queue_id.to_string(),
        v.queue_offset.to_string(),
        v.phys_offset.to_string(),
        match (v.log_term, v.log_index) {
            (Some(t), Some(i)) => format!("{t}-{i}"),
            _ => "-".into(),
        },
    ]
}

async fn send_count(
    g: &Global,
    client: &raftmq_client::Client,
    a: &SendArgs,
    count: u64,
    size: usize,
) -> anyhow::Result<i32> {
    let start = Instant::now();
    let batch = a.batch.max(1) as u64;
    let mut first = None;
    let mut last = None;
    let mut sent = 0u64;
    while sent < count {
        let n = batch.min(count - sent);
        let messages: Vec<Message> = (0..n).map(|i| a.message(filler(size, sent + i))).collect();
        let results = if n == 1 {
            vec![
                client
                    .send(messages.into_iter().next().unwrap_or_default())
                    .await?,
            ]
        } else {
            client.send_batch(messages).await?
        };
        first = first.or_else(|| results.first().map(SendView::from));
        last = results.last().map(SendView::from).or(last);
        sent += n;
    }
    let s = CountSummary {
        messages: sent,
        bytes: sent * size as u64,
        elapsed_s: start.elapsed().as_secs_f64(),
        first,
        last,
    };
    if g.json {
        print_json(&s)?;
    } else {
        println!(
            "sent {} messages ({} bytes) in {:.2} s; first id {}, last id {}",
            s.messages,
            s.bytes,
            s.elapsed_s,
            s.first.as_ref().map_or(0, |v| v.msg_id),
            s.last.as_ref().map_or(0, |v| v.msg_id)
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_and_filler() {
        assert_eq!(parse_property("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_property("=x").is_err());
        assert!(parse_property("x").is_err());
        assert_eq!(filler(8, 3), b"msg-3-xx".to_vec());
        assert_eq!(filler(2, 3), b"ms".to_vec());
    }
}
