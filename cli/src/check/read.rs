//! Reading a topic back from one node into a [`ReplicaRead`], the input of the replica
//! checkers: every queue from offset 0 (or its min) to its max, each stored message reduced to
//! its position, the [`MessageTag`] its producer wrote and a digest of its content. Used by
//! `raftmq failover-test` and by `cluster-tests`, which write the tag differently (message
//! properties vs the body), hence [`TagOf`].

use std::collections::hash_map::DefaultHasher;
use std::hash::Hash;
use std::hash::Hasher;
use std::time::Duration;

use raftmq_client::proto;
use raftmq_client::proto::Message;
use raftmq_client::proto::PullReply;
use raftmq_client::proto::PullRequest;
use raftmq_client::proto::PullStatus;
use raftmq_client::Client;

use super::MessageTag;
use super::ReplicaRead;
use super::StoredMessage;

/// Finds the tag a test producer wrote into a message (`None`: not a test message).
pub type TagOf = fn(&Message) -> Option<MessageTag>;

/// Digest of everything a producer chose (topic, tags, keys, sorted properties, body).
pub fn digest(m: &Message) -> u64 {
    let mut h = DefaultHasher::new();
    m.topic.hash(&mut h);
    m.tags.hash(&mut h);
    m.keys.hash(&mut h);
    let mut props: Vec<(&String, &String)> = m.properties.iter().collect();
    props.sort();
    props.hash(&mut h);
    m.body.hash(&mut h);
    h.finish()
}

/// The checker's view of a stored message, its tag found by `tag_of`.
pub fn to_checked(s: &proto::StoredMessage, tag_of: TagOf) -> StoredMessage {
    let m = s.message.clone().unwrap_or_default();
    StoredMessage {
        queue_id: u32::try_from(s.queue_id).unwrap_or(u32::MAX),
        queue_offset: s.queue_offset,
        msg_id: s.msg_id,
        tag: tag_of(&m),
        digest: digest(&m),
    }
}

/// One pull from `addr`, tried up to 6 times (100 ms doubling pauses) before giving up.
async fn pull_retrying(client: &Client, addr: &str, req: PullRequest) -> anyhow::Result<PullReply> {
    let mut last = None;
    for i in 0..6u32 {
        match client.pull_from(addr, req.clone()).await {
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100 << i)).await;
    }
    Err(anyhow::anyhow!(
        "cannot read queue {} from {addr}: {}",
        req.queue_id,
        last.map_or_else(String::new, |e| e.to_string())
    ))
}

/// Every message of queues `0..queues` of `topic` on node `node` at `addr`, with each queue's
/// `(min, max)` as the node last reported it; a queue the node does not have gets no range.
pub async fn read_replica(
    client: &Client,
    node: u64,
    addr: &str,
    topic: &str,
    queues: u32,
    tag_of: TagOf,
) -> anyhow::Result<ReplicaRead> {
    let mut read = ReplicaRead {
        node,
        ..ReplicaRead::default()
    };
    for queue in 0..queues {
        let mut offset = 0u64;
        loop {
            let req = PullRequest {
                topic: topic.to_string(),
                queue_id: i32::try_from(queue)?,
                offset,
                max_count: 256,
                ..PullRequest::default()
            };
            let r = pull_retrying(client, addr, req).await?;
            let status = PullStatus::try_from(r.status).unwrap_or(PullStatus::Unspecified);
            if matches!(status, PullStatus::NoSuchTopic | PullStatus::NoSuchQueue) {
                break;
            }
            read.ranges.insert(queue, (r.min_offset, r.max_offset));
            match status {
                PullStatus::Found => {
                    read.messages
                        .extend(r.messages.iter().map(|s| to_checked(s, tag_of)));
                    anyhow::ensure!(
                        r.next_offset > offset,
                        "node {node} queue {queue}: pull did not advance at {offset}"
                    );
                    offset = r.next_offset;
                }
                PullStatus::OffsetTooSmall if offset < r.min_offset => offset = r.min_offset,
                PullStatus::NoMatchedMsg if r.next_offset > offset => offset = r.next_offset,
                _ => break,
            }
            if offset >= r.max_offset {
                break;
            }
        }
    }
    Ok(read)
}
