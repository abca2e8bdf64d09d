//! Raw gRPC access to one node's client API, below `raftmq_client` (no retries, no leader
//! following): the tests of request validation, forwarding and per-node reads use it.

use raftmq_client::Credentials;
use raftmq_client::Signer;
use raftmq_proto::v1 as pb;
use raftmq_proto::v1::raft_mq_client::RaftMqClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// A generated `RaftMq` client on one node's client address, signing every call with the
/// cluster's root credential when the cluster authenticates ([`crate::Security::Secure`]).
pub type GrpcClient = RaftMqClient<InterceptedService<Channel, Signer>>;

/// A plaintext [`GrpcClient`] of `addr` (host:port), connected, signing with `credentials`
/// (None: unsigned).
pub async fn connect(addr: &str, credentials: Option<Credentials>) -> anyhow::Result<GrpcClient> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    Ok(grpc_client(channel, credentials))
}

/// A [`GrpcClient`] over `channel`, signing with `credentials` (None: unsigned).
pub fn grpc_client(channel: Channel, credentials: Option<Credentials>) -> GrpcClient {
    RaftMqClient::with_interceptor(channel, Signer::new(credentials))
}

/// One message read back: (queue id, queue offset, message id, body).
pub type ReadMessage = (i32, u64, u64, Vec<u8>);

/// A message of `topic` with `body` (no keys, tags or queue choice).
pub fn msg(topic: &str, body: &[u8]) -> pb::Message {
    pb::Message {
        topic: topic.into(),
        body: body.to_vec().into(),
        ..Default::default()
    }
}

/// Sends `reqs` on one SendStream of `client` and collects every answer by seq (each exactly
/// once).
pub async fn stream_sends(
    client: &mut GrpcClient,
    reqs: Vec<pb::SendStreamRequest>,
) -> std::collections::HashMap<u64, pb::send_stream_reply::Outcome> {
    let n = reqs.len();
    let mut answers = client
        .send_stream(futures::stream::iter(reqs))
        .await
        .expect("stream")
        .into_inner();
    let mut got = std::collections::HashMap::new();
    while let Some(a) = answers.message().await.expect("answer") {
        got.insert(a.seq, a.outcome.expect("outcome"));
    }
    assert_eq!(got.len(), n, "{got:?}");
    got
}

/// Every message of queues `0..queues` of `topic` on the node `client` talks to, in queue
/// then queue-offset order, starting at each queue's minimum offset.
pub async fn read_all(
    client: &mut GrpcClient,
    topic: &str,
    queues: u32,
) -> anyhow::Result<Vec<ReadMessage>> {
    let mut out = Vec::new();
    for q in 0..queues as i32 {
        let mut offset = 0;
        loop {
            let r = client
                .pull(pb::PullRequest {
                    topic: topic.into(),
                    queue_id: q,
                    offset,
                    max_count: 32,
                    ..Default::default()
                })
                .await?
                .into_inner();
            if r.status == pb::PullStatus::OffsetTooSmall as i32 {
                offset = r.min_offset;
                continue;
            }
            if r.messages.is_empty() {
                break;
            }
            for m in r.messages {
                let body = m.message.map(|m| m.body.to_vec()).unwrap_or_default();
                out.push((m.queue_id, m.queue_offset, m.msg_id, body));
            }
            offset = r.next_offset;
        }
    }
    Ok(out)
}
