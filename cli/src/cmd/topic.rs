//! `raftmq topic ...`: topic administration.

use clap::Subcommand;
use clap::ValueEnum;
use raftmq_client::proto::TopicConfig;
use raftmq_client::proto::TopicInfo;
use raftmq_client::proto::TopicPerm;
use raftmq_client::proto::UpdateTopicRequest;
use serde::Serialize;

use super::Global;
use crate::output::print_json;
use crate::output::table;

/// Topic commands.
#[derive(Debug, Subcommand)]
pub enum TopicCmd {
    /// Create a topic.
    #[command(after_help = "Example: raftmq topic create orders --queues 8")]
    Create {
        /// Name.
        name: String,
        /// Queue count.
        #[arg(long, default_value_t = 4)]
        queues: u32,
        /// Permission.
        #[arg(long, value_enum, default_value = "rw")]
        perm: Perm,
    },
    /// Change a topic's queue count (grow only) or permission.
    #[command(after_help = "Example: raftmq topic update orders --queues 16 --perm r")]
    Update {
        /// Name.
        name: String,
        /// New queue count.
        #[arg(long)]
        queues: Option<u32>,
        /// New permission.
        #[arg(long, value_enum)]
        perm: Option<Perm>,
    },
    /// Delete a topic.
    #[command(after_help = "Example: raftmq topic delete orders")]
    Delete {
        /// Name.
        name: String,
    },
    /// List topics with their queues' offset ranges.
    #[command(after_help = "Example: raftmq topic list --json")]
    List,
}

/// Topic permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Perm {
    /// Read and write.
    Rw,
    /// Read only.
    R,
    /// Write only.
    W,
    /// Neither.
    Deny,
}

impl Perm {
    fn wire(self) -> TopicPerm {
        match self {
            Perm::Rw => TopicPerm::ReadWrite,
            Perm::R => TopicPerm::ReadOnly,
            Perm::W => TopicPerm::WriteOnly,
            Perm::Deny => TopicPerm::Deny,
        }
    }
}

fn perm_name(p: i32) -> &'static str {
    match TopicPerm::try_from(p).unwrap_or(TopicPerm::Unspecified) {
        TopicPerm::ReadWrite | TopicPerm::Unspecified => "rw",
        TopicPerm::ReadOnly => "r",
        TopicPerm::WriteOnly => "w",
        TopicPerm::Deny => "deny",
    }
}

/// One queue's offset range.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct QueueView {
    queue_id: i32,
    min_offset: u64,
    max_offset: u64,
}

/// A topic for output.
#[derive(Debug, Serialize)]
pub struct TopicView {
    name: String,
    queue_count: u32,
    perm: &'static str,
    queues: Vec<QueueView>,
    messages: u64,
}

fn view(c: &TopicConfig, queues: &[QueueView]) -> TopicView {
    TopicView {
        name: c.name.clone(),
        queue_count: c.queue_count,
        perm: perm_name(c.perm),
        queues: queues.to_vec(),
        messages: queues
            .iter()
            .map(|q| q.max_offset.saturating_sub(q.min_offset))
            .sum(),
    }
}

fn from_info(t: &TopicInfo) -> TopicView {
    let queues: Vec<QueueView> = t
        .queues
        .iter()
        .map(|q| QueueView {
            queue_id: q.queue_id,
            min_offset: q.min_offset,
            max_offset: q.max_offset,
        })
        .collect();
    view(&t.config.clone().unwrap_or_default(), &queues)
}

fn print(g: &Global, topics: &[TopicView]) -> anyhow::Result<()> {
    if g.json {
        return print_json(&topics);
    }
    let rows: Vec<Vec<String>> = topics
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.queue_count.to_string(),
                t.perm.to_string(),
                t.messages.to_string(),
            ]
        })
        .collect();
    println!("{}", table(&["TOPIC", "QUEUES", "PERM", "MESSAGES"], &rows));
    Ok(())
}

/// Runs a topic command.
pub async fn run(g: &Global, cmd: TopicCmd) -> anyhow::Result<i32> {
    let client = g.leader_client().await?;
    match cmd {
        TopicCmd::Create { name, queues, perm } => {
            let c = client
                .create_topic(TopicConfig {
                    name,
                    queue_count: queues,
                    perm: perm.wire() as i32,
                })
                .await?;
            print(g, &[view(&c, &[])])?;
        }
        TopicCmd::Update { name, queues, perm } => {
            anyhow::ensure!(
                queues.is_some() || perm.is_some(),
                "give --queues and/or --perm"
            );
            let c = client
                .update_topic(UpdateTopicRequest {
                    name,
                    queue_count: queues,
                    perm: perm.map_or(TopicPerm::Unspecified, Perm::wire) as i32,
                })
                .await?;
            print(g, &[view(&c, &[])])?;
        }
        TopicCmd::Delete { name } => {
            client.delete_topic(&name).await?;
            if g.json {
                print_json(&serde_json::json!({ "deleted": name }))?;
            } else {
                println!("deleted topic {name}");
            }
        }
        TopicCmd::List => {
            let mut topics: Vec<TopicView> =
                client.list_topics().await?.iter().map(from_info).collect();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            print(g, &topics)?;
        }
    }
    Ok(0)
}
