//! Reading the test topic back from every node ([`ReplicaRead`]) and sampling cluster status
//! ([`Observation`]) for the checkers.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hash;
use std::hash::Hasher;
use std::time::Duration;

use raftmq_client::check;
use raftmq_client::check::MessageTag;
use raftmq_client::check::Observation;
use raftmq_client::check::ReplicaRead;
use raftmq_client::proto::ClusterStatusReply;
use raftmq_client::proto::Message;
use raftmq_client::proto::PullRequest;
use raftmq_client::proto::PullStatus;
use raftmq_client::proto::StoredMessage;
use raftmq_client::Client;

/// Message property holding the producer id.
pub const PRODUCER_PROP: &str = "raftmq-test-producer";
/// Message property holding the sequence number.
pub const SEQ_PROP: &str = "raftmq-test-seq";

/// The message a test producer sends for `tag` (identical on every retry).
pub fn tagged_message(topic: &str, tag: MessageTag, size: usize) -> Message {
    let head = format!("{tag} ");
    let body: Vec<u8> = head
        .bytes()
        .chain(std::iter::repeat(b'.'))
        .take(size.max(head.len()))
        .collect();
    Message {
        topic: topic.to_string(),
        properties: [
            (PRODUCER_PROP.to_string(), tag.producer.to_string()),
            (SEQ_PROP.to_string(), tag.seq.to_string()),
        ]
        .into_iter()
        .collect(),
        body,
        ..Message::default()
    }
}

/// The tag a message carries, if both properties parse.
pub fn tag_of(m: &Message) -> Option<MessageTag> {
    let producer = m.properties.get(PRODUCER_PROP)?.parse().ok()?;
    let seq = m.properties.get(SEQ_PROP)?.parse().ok()?;
    Some(MessageTag { producer, seq })
}

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

/// The checker's view of a stored message.
pub fn to_checked(s: &StoredMessage) -> check::StoredMessage {
    let m = s.message.clone().unwrap_or_default();
    check::StoredMessage {
        queue_id: u32::try_from(s.queue_id).unwrap_or(u32::MAX),
        queue_offset: s.queue_offset,
        msg_id: s.msg_id,
        tag: tag_of(&m),
        digest: digest(&m),
    }
}

async fn pull_retrying(
    client: &Client,
    addr: &str,
    req: PullRequest,
) -> anyhow::Result<raftmq_client::proto::PullReply> {
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

/// Every message of every queue of `topic` on node `node` at `addr`.
pub async fn read_replica(
    client: &Client,
    node: u64,
    addr: &str,
    topic: &str,
    queues: u32,
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
                    read.messages.extend(r.messages.iter().map(to_checked));
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

/// One node's status as an [`Observation`].
pub fn observation(r: &ClusterStatusReply, at_us: u64, restarted: bool) -> Observation {
    let committed = r
        .members
        .iter()
        .find(|m| m.node_id == r.responder_id)
        .and_then(|m| m.watermarks)
        .and_then(|w| w.committed_index);
    Observation {
        at_us,
        node: r.responder_id,
        term: r.term,
        is_leader: r.leader_id == Some(r.responder_id),
        committed,
        restarted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_digests_differ() {
        let tag = MessageTag {
            producer: 3,
            seq: 41,
        };
        let m = tagged_message("t", tag, 32);
        assert_eq!(m.body.len(), 32);
        assert_eq!(tag_of(&m), Some(tag));
        let other = tagged_message(
            "t",
            MessageTag {
                producer: 3,
                seq: 42,
            },
            32,
        );
        assert_ne!(digest(&m), digest(&other));
        assert_eq!(digest(&m), digest(&m.clone()));
        assert_eq!(tag_of(&Message::default()), None);
    }
}
