//! Reads every queue of a topic back from every node into [`ReplicaRead`]s.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hash;
use std::hash::Hasher;

use raftmq_client::check::ReplicaRead;
use raftmq_client::check::StoredMessage;
use raftmq_client::proto as pb;
use raftmq_client::Client;

use crate::workload::parse_tag;

/// Digest of a message's body and properties (compares replicas byte for byte).
pub fn digest(m: &pb::Message) -> u64 {
    let mut h = DefaultHasher::new();
    m.body.hash(&mut h);
    let mut props: Vec<_> = m.properties.iter().collect();
    props.sort();
    props.hash(&mut h);
    m.tags.hash(&mut h);
    m.keys.hash(&mut h);
    h.finish()
}

/// Reads queues `0..queues` of `topic` from the node at `addr` (node id `node`), from each
/// queue's min offset to its max.
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
        let mut offset = 0;
        let mut range = None;
        loop {
            let r = client
                .pull_from(
                    addr,
                    pb::PullRequest {
                        topic: topic.into(),
                        queue_id: queue as i32,
                        offset,
                        max_count: 256,
                        ..Default::default()
                    },
                )
                .await?;
            range.get_or_insert((r.min_offset, r.max_offset));
            let status = pb::PullStatus::try_from(r.status).unwrap_or_default();
            match status {
                pb::PullStatus::Found => {}
                pb::PullStatus::OffsetTooSmall if offset < r.min_offset => {
                    offset = r.min_offset;
                    range = Some((r.min_offset, r.max_offset));
                    continue;
                }
                pb::PullStatus::NoSuchTopic | pb::PullStatus::NoSuchQueue => {
                    range = None;
                    break;
                }
                _ => break,
            }
            for m in &r.messages {
                let msg = m.message.clone().unwrap_or_default();
                read.messages.push(StoredMessage {
                    queue_id: m.queue_id as u32,
                    queue_offset: m.queue_offset,
                    msg_id: m.msg_id,
                    tag: parse_tag(&msg.body),
                    digest: digest(&msg),
                });
            }
            if r.next_offset <= offset {
                anyhow::bail!("node {node} queue {queue}: pull did not advance from {offset}");
            }
            offset = r.next_offset;
            if let Some(rg) = range.as_mut() {
                rg.1 = rg.1.max(r.max_offset);
            }
        }
        if let Some(rg) = range {
            read.ranges.insert(queue, rg);
        }
    }
    Ok(read)
}

/// Reads `topic` from every `(node id, client address)`.
pub async fn read_all(
    client: &Client,
    nodes: &[(u64, String)],
    topic: &str,
    queues: u32,
) -> anyhow::Result<Vec<ReplicaRead>> {
    let mut out = Vec::new();
    for (id, addr) in nodes {
        out.push(read_replica(client, *id, addr, topic, queues).await?);
    }
    Ok(out)
}
