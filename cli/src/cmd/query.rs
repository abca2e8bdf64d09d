//! `raftmq query`: a message by id, or messages by key.

use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use clap::Args;
use raftmq_client::proto::QueryByKeyRequest;

use super::view::MessageView;
use super::Global;
use crate::output::print_json;
use crate::output::table;

/// `query` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  raftmq query --id 4096
  raftmq query --key order-17 --topic orders
  raftmq query --key order-17 --topic orders --since 1h --until 2026-01-01T12:00:00Z
--since/--until take a duration before now (10m, 2h) or an RFC 3339 time.")]
pub struct QueryArgs {
    /// Message id (physical offset).
    #[arg(long, conflicts_with = "key", required_unless_present = "key")]
    pub id: Option<u64>,
    /// Message key.
    #[arg(long, requires = "topic")]
    pub key: Option<String>,
    /// Topic of the key.
    #[arg(long)]
    pub topic: Option<String>,
    /// Stored at or after (duration ago or RFC 3339).
    #[arg(long, value_parser = parse_time_ms)]
    pub since: Option<u64>,
    /// Stored at or before (duration ago or RFC 3339).
    #[arg(long, value_parser = parse_time_ms)]
    pub until: Option<u64>,
    /// Most messages to return.
    #[arg(long, default_value_t = 64)]
    pub max: u32,
}

/// Milliseconds since the epoch of `s`: a duration before now, or an RFC 3339 time.
pub fn parse_time_ms(s: &str) -> Result<u64, String> {
    let at = match humantime::parse_duration(s) {
        Ok(d) => SystemTime::now()
            .checked_sub(d)
            .ok_or_else(|| format!("{s:?} is too far back"))?,
        Err(_) => humantime::parse_rfc3339_weak(s)
            .map_err(|_| format!("{s:?} is neither a duration (10m) nor an RFC 3339 time"))?,
    };
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .map_err(|_| format!("{s:?} is before 1970"))
}

/// Runs `query`.
pub async fn run(g: &Global, a: QueryArgs) -> anyhow::Result<i32> {
    let client = g.leader_client().await?;
    let found: Vec<MessageView> = if let Some(id) = a.id {
        let m = client
            .query_by_id(id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no message with id {id}"))?;
        vec![MessageView::from(&m)]
    } else {
        let req = QueryByKeyRequest {
            topic: a.topic.clone().unwrap_or_default(),
            key: a.key.clone().unwrap_or_default(),
            begin_ms: a.since.unwrap_or(0),
            end_ms: a.until.unwrap_or(0),
            max_count: a.max,
        };
        client
            .query_by_key(req)
            .await?
            .iter()
            .map(MessageView::from)
            .collect()
    };
    if g.json {
        print_json(&found)?;
    } else {
        let rows: Vec<Vec<String>> = found.iter().map(MessageView::row).collect();
        println!("{}", table(&MessageView::HEADERS, &rows));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let now = parse_time_ms("0s").unwrap();
        let hour_ago = parse_time_ms("1h").unwrap();
        assert!((now - hour_ago).abs_diff(3_600_000) < 1000);
        assert_eq!(parse_time_ms("1970-01-01T00:00:01Z").unwrap(), 1000);
        assert!(parse_time_ms("yesterday").is_err());
    }
}
