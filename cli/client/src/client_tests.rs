//! Client tests against small fake `RaftMq` servers on 127.0.0.1 (a real node is not yet
//! available; real-node tests belong to cluster-tests).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use raftmq_proto::v1::raft_mq_server::RaftMq;
use raftmq_proto::v1::raft_mq_server::RaftMqServer;
use raftmq_proto::v1::*;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::Request;
use tonic::Response;
use tonic::Status;

use super::*;

/// A fake node: the leader accepts sends, a follower refuses them with a leader hint.
#[derive(Default)]
struct Fake {
    id: u64,
    /// Client address of the leader ("" = unknown); the node is leader when it is its own.
    leader: Arc<Mutex<String>>,
    own_addr: Mutex<String>,
    /// Members as (id, client addr), for ClusterStatus.
    members: Arc<Mutex<Vec<(u64, String)>>>,
    /// Number of next sends to fail with an ambiguous error (no detail).
    fail_sends: AtomicU32,
    send_calls: AtomicU32,
    pull_calls: AtomicU32,
    /// Answer `SendStream` with UNIMPLEMENTED (an older server).
    no_stream: AtomicBool,
    stream_calls: AtomicU32,
    /// Number of next stream messages the fake reads and then breaks the stream at, unanswered.
    break_stream: AtomicU32,
    /// Answer a batch on `SendStream` as a node from before batches there does.
    no_stream_batch: AtomicBool,
    /// Unary `SendBatch` calls.
    batch_calls: AtomicU32,
    /// (producer id, sequence) of every send that reached the leader, in order.
    identities: Mutex<Vec<(String, String)>>,
}

impl Fake {
    fn is_leader(&self) -> bool {
        *self.leader.lock().unwrap() == *self.own_addr.lock().unwrap()
    }
}

type R<T> = Result<Response<T>, Status>;

/// The service handle (the tests keep another `Arc` to read the counters).
struct FakeSvc(Arc<Fake>);

impl std::ops::Deref for FakeSvc {
    type Target = Fake;

    fn deref(&self) -> &Fake {
        &self.0
    }
}

impl Fake {
    /// One batch: all of it stored, or none (as one entry would be).
    fn do_batch(&self, messages: Vec<Message>) -> Result<Vec<SendResult>, Status> {
        if messages.is_empty() || messages.iter().any(|m| m.topic.is_empty()) {
            return Err(Status::invalid_argument("node 1: a message has no topic"));
        }
        messages
            .into_iter()
            .map(|m| self.do_send(Some(m)))
            .collect()
    }

    fn do_send(&self, msg: Option<Message>) -> Result<SendResult, Status> {
        let n = self.send_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(m) = &msg {
            assert!(
                !m.properties.contains_key(PRODUCER_ID_PROPERTY),
                "sent as fields"
            );
            let producer = String::from_utf8_lossy(&m.producer_id).into_owned();
            let id = (
                producer,
                m.sequence.map(|s| s.to_string()).unwrap_or_default(),
            );
            self.identities.lock().unwrap().push(id);
        }
        if !self.is_leader() {
            let leader = self.leader.lock().unwrap().clone();
            let detail = ErrorDetail {
                reason: ErrorReason::NotLeader as i32,
                leader_id: None,
                leader_addr: leader,
                not_applied: true,
            };
            return Err(raftmq_proto::with_error_detail(
                Status::unavailable(format!("node {} is not the leader", self.id)),
                &detail,
            ));
        }
        if self
            .fail_sends
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
            .is_ok()
        {
            return Err(Status::unavailable("connection reset mid-call"));
        }
        let msg = msg.unwrap_or_default();
        if msg.topic.is_empty() {
            return Err(Status::invalid_argument("topic must not be empty"));
        }
        Ok(SendResult {
            msg_id: u64::from(n) * 100,
            queue_id: 0,
            queue_offset: u64::from(n),
            phys_offset: u64::from(n) * 100,
            log_id: Some(LogId {
                term: 1,
                index: u64::from(n),
            }),
            duplicate: false,
        })
    }
}

type AnswerStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<SendStreamReply, Status>> + Send>>;

#[tonic::async_trait]
impl RaftMq for FakeSvc {
    async fn send(&self, r: Request<SendRequest>) -> R<SendReply> {
        let result = self.do_send(r.into_inner().message)?;
        Ok(Response::new(SendReply {
            result: Some(result),
        }))
    }

    type SendStreamStream = AnswerStream;

    async fn send_stream(
        &self,
        r: Request<tonic::Streaming<SendStreamRequest>>,
    ) -> R<AnswerStream> {
        use futures::StreamExt;
        self.stream_calls.fetch_add(1, Ordering::SeqCst);
        if self.no_stream.load(Ordering::SeqCst) {
            return Err(Status::unimplemented("SendStream"));
        }
        let fake = self.0.clone();
        let answers = r.into_inner().map(move |req| {
            let req = req?;
            if fake
                .break_stream
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
                .is_ok()
            {
                return Err(Status::unavailable("connection reset"));
            }
            let outcome = match (req.batch, fake.no_stream_batch.load(Ordering::SeqCst)) {
                (Some(_), true) => Err(Status::invalid_argument("node 1: message is missing")),
                (Some(b), false) => fake
                    .do_batch(b.messages)
                    .map(|results| send_stream_reply::Outcome::Batch(SendBatchReply { results })),
                (None, _) => fake
                    .do_send(req.message)
                    .map(send_stream_reply::Outcome::Result),
            };
            let outcome = outcome.unwrap_or_else(|s| {
                send_stream_reply::Outcome::Error(raftmq_proto::send_error(&s))
            });
            Ok(SendStreamReply {
                seq: req.seq,
                outcome: Some(outcome),
                leader_addr: String::new(),
            })
        });
        // An error item ends the answer stream (as a broken connection would).
        let answers = answers.scan(false, |ended, item| {
            let out = (!*ended).then_some(item);
            if matches!(out, Some(Err(_))) {
                *ended = true;
            }
            futures::future::ready(out)
        });
        Ok(Response::new(Box::pin(answers)))
    }

    async fn pull(&self, r: Request<PullRequest>) -> R<PullReply> {
        self.pull_calls.fetch_add(1, Ordering::SeqCst);
        let req = r.into_inner();
        Ok(Response::new(PullReply {
            status: PullStatus::NoNewMsg as i32,
            messages: vec![],
            next_offset: req.offset,
            min_offset: 0,
            max_offset: req.offset,
        }))
    }

    async fn cluster_status(&self, _r: Request<ClusterStatusRequest>) -> R<ClusterStatusReply> {
        let leader = self.leader.lock().unwrap().clone();
        let members: Vec<MemberStatus> = self
            .members
            .lock()
            .unwrap()
            .iter()
            .map(|(id, addr)| MemberStatus {
                node_id: *id,
                client_addr: addr.clone(),
                ..Default::default()
            })
            .collect();
        let leader_id = members
            .iter()
            .find(|m| m.client_addr == leader)
            .map(|m| m.node_id);
        Ok(Response::new(ClusterStatusReply {
            cluster_id: "fake".into(),
            responder_id: self.id,
            leader_id,
            term: 1,
            members,
        }))
    }

    async fn send_batch(&self, r: Request<SendBatchRequest>) -> R<SendBatchReply> {
        self.batch_calls.fetch_add(1, Ordering::SeqCst);
        let results = self.do_batch(r.into_inner().messages)?;
        Ok(Response::new(SendBatchReply { results }))
    }

    async fn query_by_id(&self, _r: Request<QueryByIdRequest>) -> R<QueryByIdReply> {
        Err(Status::unimplemented("query_by_id"))
    }

    async fn query_by_key(&self, _r: Request<QueryByKeyRequest>) -> R<QueryByKeyReply> {
        Err(Status::unimplemented("query_by_key"))
    }

    async fn commit_offset(&self, _r: Request<CommitOffsetRequest>) -> R<CommitOffsetReply> {
        Err(Status::unimplemented("commit_offset"))
    }

    async fn fetch_offset(&self, _r: Request<FetchOffsetRequest>) -> R<FetchOffsetReply> {
        Err(Status::unimplemented("fetch_offset"))
    }

    async fn create_topic(&self, _r: Request<CreateTopicRequest>) -> R<CreateTopicReply> {
        Err(Status::unimplemented("create_topic"))
    }

    async fn update_topic(&self, _r: Request<UpdateTopicRequest>) -> R<UpdateTopicReply> {
        Err(Status::unimplemented("update_topic"))
    }

    async fn delete_topic(&self, _r: Request<DeleteTopicRequest>) -> R<DeleteTopicReply> {
        Err(Status::unimplemented("delete_topic"))
    }

    async fn list_topics(&self, _r: Request<ListTopicsRequest>) -> R<ListTopicsReply> {
        Err(Status::unimplemented("list_topics"))
    }

    async fn transfer_leader(&self, _r: Request<TransferLeaderRequest>) -> R<TransferLeaderReply> {
        Err(Status::unimplemented("transfer_leader"))
    }

    async fn add_learner(&self, _r: Request<AddLearnerRequest>) -> R<AddLearnerReply> {
        Err(Status::unimplemented("add_learner"))
    }

    async fn change_membership(
        &self,
        _r: Request<ChangeMembershipRequest>,
    ) -> R<ChangeMembershipReply> {
        Err(Status::unimplemented("change_membership"))
    }

    async fn create_user(&self, _r: Request<CreateUserRequest>) -> R<CreateUserReply> {
        Err(Status::unimplemented("create_user"))
    }

    async fn list_users(&self, _r: Request<ListUsersRequest>) -> R<ListUsersReply> {
        Err(Status::unimplemented("list_users"))
    }

    async fn delete_user(&self, _r: Request<DeleteUserRequest>) -> R<DeleteUserReply> {
        Err(Status::unimplemented("delete_user"))
    }
}

/// Starts fake nodes 1..=n sharing one leader slot and member list; node 1 leads.
async fn fakes(n: u64) -> Vec<(Arc<Fake>, String)> {
    let leader = Arc::new(Mutex::new(String::new()));
    let members = Arc::new(Mutex::new(Vec::new()));
    let mut out = Vec::new();
    for id in 1..=n {
        let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = incoming.local_addr().unwrap().to_string();
        let fake = Arc::new(Fake {
            id,
            leader: leader.clone(),
            members: members.clone(),
            own_addr: Mutex::new(addr.clone()),
            ..Default::default()
        });
        members.lock().unwrap().push((id, addr.clone()));
        let svc = RaftMqServer::new(FakeSvc(fake.clone()));
        tokio::spawn(
            Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming),
        );
        out.push((fake, addr));
    }
    *leader.lock().unwrap() = out[0].1.clone();
    out
}

fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn quick() -> ClientOptions {
    ClientOptions {
        backoff_initial: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        request_timeout: Duration::from_secs(3),
        ..Default::default()
    }
}

fn msg(topic: &str) -> Message {
    Message {
        topic: topic.into(),
        body: b"hello".to_vec().into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn send_follows_leader_hint_from_a_follower() {
    let nodes = fakes(3).await;
    let (leader, leader_addr) = &nodes[0];
    let (follower, follower_addr) = &nodes[2];
    let client = Client::new(std::slice::from_ref(follower_addr), quick()).unwrap();
    let r = client
        .send(msg("t"))
        .await
        .expect("send lands on the leader");
    assert_eq!(r.msg_id, 100);
    assert_eq!(
        follower.send_calls.load(Ordering::SeqCst),
        1,
        "refused once"
    );
    assert_eq!(
        leader.send_calls.load(Ordering::SeqCst),
        1,
        "sent exactly once"
    );
    assert_eq!(client.leader_hint().as_deref(), Some(leader_addr.as_str()));
    // The next send goes straight to the leader.
    client.send(msg("t")).await.unwrap();
    assert_eq!(follower.send_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn connect_learns_members_and_leader_from_one_seed() {
    let nodes = fakes(3).await;
    let client = Client::connect(std::slice::from_ref(&nodes[1].1), quick())
        .await
        .expect("connects");
    assert_eq!(client.nodes().len(), 3);
    assert_eq!(client.leader_hint().as_deref(), Some(nodes[0].1.as_str()));

    let err = Client::connect(&[dead_addr()], quick())
        .await
        .err()
        .expect("nobody answers");
    assert!(matches!(err, ClientError::Unavailable { .. }), "{err}");
    assert!(matches!(
        Client::new(&[], quick()),
        Err(ClientError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn ambiguous_send_failure_is_unknown_outcome_and_not_resent() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    leader.fail_sends.store(1, Ordering::SeqCst);
    let plain = ClientOptions {
        idempotent: false,
        ..quick()
    };
    let client = Client::new(std::slice::from_ref(addr), plain.clone()).unwrap();
    let err = client.send(msg("t")).await.expect_err("ambiguous");
    assert!(err.is_unknown_outcome(), "{err}");
    assert_eq!(leader.send_calls.load(Ordering::SeqCst), 1, "not resent");

    // Opting in resends it.
    leader.fail_sends.store(1, Ordering::SeqCst);
    let opts = ClientOptions {
        retry_unknown_writes: true,
        ..plain
    };
    let client = Client::new(std::slice::from_ref(addr), opts).unwrap();
    client.send(msg("t")).await.expect("resent and acked");
    assert_eq!(leader.send_calls.load(Ordering::SeqCst), 3);
    let ids = leader.identities.lock().unwrap().clone();
    assert!(
        ids.iter().all(|(p, s)| p.is_empty() && s.is_empty()),
        "no identity: {ids:?}"
    );
}

#[tokio::test]
async fn idempotent_send_is_resent_with_the_same_identity() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    let client = Client::new(std::slice::from_ref(addr), quick()).unwrap();
    leader.fail_sends.store(2, Ordering::SeqCst);
    client
        .send(msg("t"))
        .await
        .expect("resent after unknown outcomes, acked");
    client.send(msg("t")).await.expect("next message");
    let ids = leader.identities.lock().unwrap().clone();
    let me = client.producer_id().to_string();
    let want = |s: &str| (me.clone(), s.to_string());
    assert_eq!(ids, vec![want("0"), want("0"), want("0"), want("1")]);
    // Every attempt failed ambiguously: the caller resends the identified message itself.
    leader.fail_sends.store(100, Ordering::SeqCst);
    let m = client.identify(msg("t"));
    let err = client.send(m.clone()).await.expect_err("attempts used up");
    assert!(err.is_unknown_outcome(), "{err}");
    leader.fail_sends.store(0, Ordering::SeqCst);
    client.send(m).await.expect("resent by the caller");
    let ids = leader.identities.lock().unwrap().clone();
    assert!(ids[4..].iter().all(|i| *i == want("2")), "{ids:?}");
    // A clone is the same producer.
    client.clone().send(msg("t")).await.expect("clone");
    assert_eq!(leader.identities.lock().unwrap().last(), Some(&want("3")));
}

#[tokio::test]
async fn refused_send_is_a_definite_failure() {
    let nodes = fakes(1).await;
    let client = Client::new(std::slice::from_ref(&nodes[0].1), quick()).unwrap();
    let err = client.send(msg("")).await.expect_err("refused");
    assert!(err.is_definite_failure());
    assert_eq!(err.code(), Some(tonic::Code::InvalidArgument));
    assert_eq!(nodes[0].0.send_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dead_seed_is_skipped_for_reads_and_sends() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    let client = Client::new(&[dead_addr(), addr.clone()], quick()).unwrap();
    let reply = client
        .pull(PullRequest {
            topic: "t".into(),
            offset: 7,
            ..Default::default()
        })
        .await
        .expect("pull served by the live node");
    assert_eq!(reply.next_offset, 7);
    assert_eq!(leader.pull_calls.load(Ordering::SeqCst), 1);

    // A connect failure proves the send never left: it is retried on the next node.
    let client = Client::new(&[dead_addr(), addr.clone()], quick()).unwrap();
    client
        .send(msg("t"))
        .await
        .expect("send reaches the live node");

    // All nodes dead: reads give up with Unavailable after the attempt budget.
    let client = Client::new(&[dead_addr(), dead_addr()], quick()).unwrap();
    let err = client
        .pull(PullRequest::default())
        .await
        .expect_err("all dead");
    assert!(
        matches!(err, ClientError::Unavailable { attempts: 6, .. }),
        "{err}"
    );
    let err = client.send(msg("t")).await.expect_err("all dead");
    assert!(
        matches!(err, ClientError::Unavailable { .. }),
        "definite: {err}"
    );
}

#[tokio::test]
async fn concurrent_sends_share_one_stream() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    let client = Client::new(std::slice::from_ref(addr), quick()).unwrap();
    let sends = (0..50).map(|_| {
        let c = client.clone();
        tokio::spawn(async move { c.send(msg("t")).await })
    });
    let mut ids: Vec<u64> = Vec::new();
    for s in sends {
        ids.push(s.await.unwrap().expect("acked").msg_id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50, "each send got its own answer");
    assert_eq!(leader.send_calls.load(Ordering::SeqCst), 50);
    assert_eq!(leader.stream_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn server_without_send_stream_gets_unary_sends() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    leader.no_stream.store(true, Ordering::SeqCst);
    let client = Client::new(std::slice::from_ref(addr), quick()).unwrap();
    client.send(msg("t")).await.expect("falls back to Send");
    client.send(msg("t")).await.expect("and stays there");
    assert_eq!(leader.stream_calls.load(Ordering::SeqCst), 1);
    assert_eq!(leader.send_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn broken_stream_is_unknown_outcome_and_the_next_send_reopens() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    leader.break_stream.store(1, Ordering::SeqCst);
    let plain = ClientOptions {
        idempotent: false,
        ..quick()
    };
    let client = Client::new(std::slice::from_ref(addr), plain).unwrap();
    let err = client.send(msg("t")).await.expect_err("stream broke");
    assert!(err.is_unknown_outcome(), "{err}");
    let r = client.send(msg("t")).await.expect("a new stream");
    assert_eq!(r.msg_id, 100, "the broken one was never stored by the fake");
    assert_eq!(leader.stream_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn batches_share_the_send_stream_and_keep_their_order() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    let client = Client::new(std::slice::from_ref(addr), quick()).unwrap();
    let batches = (0..10).map(|_| {
        let c = client.clone();
        tokio::spawn(async move { c.send_batch(vec![msg("t"); 3]).await })
    });
    let mut ids: Vec<u64> = Vec::new();
    for b in batches {
        let results = b.await.unwrap().expect("acked");
        assert_eq!(results.len(), 3);
        assert!(
            results.windows(2).all(|w| w[0].msg_id < w[1].msg_id),
            "in request order: {results:?}"
        );
        ids.extend(results.iter().map(|r| r.msg_id));
    }
    client
        .send(msg("t"))
        .await
        .expect("a single send on the same stream");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 30, "each message got its own result");
    assert_eq!(leader.stream_calls.load(Ordering::SeqCst), 1);
    assert_eq!(leader.batch_calls.load(Ordering::SeqCst), 0);
    let err = client
        .send_batch(vec![msg("t"), msg("")])
        .await
        .expect_err("refused whole");
    assert!(
        matches!(
            err,
            ClientError::Rejected {
                code: tonic::Code::InvalidArgument,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        leader.send_calls.load(Ordering::SeqCst),
        31,
        "nothing of it stored"
    );
}

#[tokio::test]
async fn node_without_batches_on_its_stream_gets_unary_batches() {
    let nodes = fakes(1).await;
    let (leader, addr) = &nodes[0];
    leader.no_stream_batch.store(true, Ordering::SeqCst);
    let client = Client::new(std::slice::from_ref(addr), quick()).unwrap();
    let r = client
        .send_batch(vec![msg("t"); 2])
        .await
        .expect("falls back");
    assert_eq!(r.len(), 2);
    client
        .send_batch(vec![msg("t")])
        .await
        .expect("and stays there");
    client
        .send(msg("t"))
        .await
        .expect("single sends keep the stream");
    assert_eq!(leader.batch_calls.load(Ordering::SeqCst), 2);
    assert_eq!(leader.stream_calls.load(Ordering::SeqCst), 1);
}
