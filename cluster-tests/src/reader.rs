//! Reads every queue of a topic back from every node into [`ReplicaRead`]s, with the replica
//! reader of `raftmq_cli::check::read`; the scenarios' producers write the tag into the body
//! ([`crate::workload::tagged_body`]).

use raftmq_cli::check::read;
use raftmq_cli::check::MessageTag;
use raftmq_cli::check::ReplicaRead;
use raftmq_client::proto as pb;
use raftmq_client::Client;

use crate::workload::parse_tag;

/// The tag a scenario producer wrote into `m`'s body.
fn tag_of(m: &pb::Message) -> Option<MessageTag> {
    parse_tag(&m.body)
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
    read::read_replica(client, node, addr, topic, queues, tag_of).await
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
