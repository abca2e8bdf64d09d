//! A three-node authenticated cluster (`auth-enabled`): wrong secrets and unknown keys are
//! UNAUTHENTICATED, a producer calling admin RPCs and a consumer reading a topic outside its
//! patterns are PERMISSION_DENIED naming role and action, on the leader and through a
//! follower (which forwards as the same caller); permitted calls keep working. Users created on
//! the leader are enforced by every node, after a leader kill, and on a follower that got them
//! by a snapshot install; no data file ever holds a user's plaintext secret key.

use std::path::Path;
use std::time::Duration;

use cluster_tests::auth::signed;
use cluster_tests::auth::TestAuth;
use cluster_tests::cluster::TestCluster;
use cluster_tests::raw::msg;
use cluster_tests::retention::now_ms;
use cluster_tests::retention::purge_at;
use raftmq_client::proto as pb;
use raftmq_client::Client;
use raftmq_client::ClientError;
use raftmq_client::Credentials;
use raftmq_node::config::FlushPolicy;
use tonic::Code;

const T: Duration = Duration::from_secs(5);

fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>, want: Code, text: &str) {
    match r {
        Err(ClientError::Rejected { code, message, .. }) => {
            assert_eq!(code, want, "{message}");
            assert!(message.contains(text), "{message:?} lacks {text:?}");
        }
        other => panic!("expected {want:?} ({text}), got {other:?}"),
    }
}

fn status_is<T: std::fmt::Debug>(r: Result<T, tonic::Status>, want: Code, text: &str) {
    match r {
        Err(s) => {
            assert_eq!(s.code(), want, "{}", s.message());
            assert!(
                s.message().contains(text),
                "{:?} lacks {text:?}",
                s.message()
            );
        }
        Ok(v) => panic!("expected {want:?} ({text}), got {v:?}"),
    }
}

async fn user(
    admin: &Client,
    name: &str,
    role: &str,
    topics: &[&str],
    groups: &[&str],
) -> Credentials {
    let r = admin
        .create_user(
            name,
            role,
            topics.iter().map(|s| s.to_string()).collect(),
            groups.iter().map(|s| s.to_string()).collect(),
        )
        .await
        .expect("create user");
    let info = r.user.expect("user info");
    assert_eq!(info.role, role);
    Credentials::new(info.access_key, r.secret_key)
}

fn pull(topic: &str) -> pb::PullRequest {
    pb::PullRequest {
        topic: topic.into(),
        queue_id: 0,
        offset: 0,
        max_count: 32,
        ..Default::default()
    }
}

fn topic(name: &str, queues: u32) -> pb::TopicConfig {
    pb::TopicConfig {
        name: name.into(),
        queue_count: queues,
        perm: 0,
    }
}

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn assert_nowhere_on_disk(dir: &Path, secret: &str) {
    let mut all = Vec::new();
    files(dir, &mut all);
    assert!(!all.is_empty());
    for f in all {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds a plaintext secret key",
            f.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn authenticated_cluster_refuses_and_keeps_serving() -> anyhow::Result<()> {
    let auth = TestAuth::new()?;
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| auth.apply(c)).await?;
    let leader = cluster.wait_leader().await?;
    let follower = leader % 3 + 1;
    let admin = cluster.client_as(T, Some(auth.admin.clone()))?;
    admin.create_topic(topic("orders", 1)).await?;
    admin.create_topic(topic("audit", 1)).await?;
    let prod = user(&admin, "billing", "producer", &["orders*"], &[]).await;
    let cons = user(&admin, "reader", "consumer", &["orders"], &["g1"]).await;
    assert_eq!(admin.list_users().await?.len(), 2);

    // Unsigned, wrong secret, unknown key.
    let anon = cluster.client(T)?;
    refused(
        anon.list_topics().await,
        Code::Unauthenticated,
        "missing authorization",
    );
    let wrong = cluster.client_as(T, Some(Credentials::new(&prod.access_key, "wrong")))?;
    refused(
        wrong.send(msg("orders", b"x")).await,
        Code::Unauthenticated,
        "bad signature",
    );
    let unknown = cluster.client_as(T, Some(Credentials::new("AKNOBODY", "x")))?;
    refused(
        unknown.list_topics().await,
        Code::Unauthenticated,
        "unknown access key 'AKNOBODY'",
    );

    // The producer: admin RPCs refused on the leader and on a follower, naming role and action.
    for id in [leader, follower] {
        let mut g = cluster.grpc(id).await?;
        let deny = "role producer (user 'billing') may not";
        status_is(
            g.delete_topic(signed(
                pb::DeleteTopicRequest {
                    name: "orders".into(),
                },
                &prod,
            ))
            .await,
            Code::PermissionDenied,
            &format!("{deny} DeleteTopic"),
        );
        let learner = pb::AddLearnerRequest {
            node_id: 9,
            raft_addr: "127.0.0.1:1".into(),
            client_addr: "127.0.0.1:2".into(),
            wait_caught_up: false,
        };
        status_is(
            g.add_learner(signed(learner, &prod)).await,
            Code::PermissionDenied,
            &format!("{deny} AddLearner"),
        );
        let change = pb::ChangeMembershipRequest {
            remove_voters: vec![follower],
            ..Default::default()
        };
        status_is(
            g.change_membership(signed(change, &prod)).await,
            Code::PermissionDenied,
            &format!("{deny} ChangeMembership"),
        );
        let transfer = pb::TransferLeaderRequest {
            to_node_id: Some(follower),
        };
        status_is(
            g.transfer_leader(signed(transfer, &prod)).await,
            Code::PermissionDenied,
            &format!("{deny} TransferLeader"),
        );
        let create = pb::CreateUserRequest {
            name: "evil".into(),
            role: "admin".into(),
            ..Default::default()
        };
        status_is(
            g.create_user(signed(create, &prod)).await,
            Code::PermissionDenied,
            &format!("{deny} CreateUser"),
        );
        // A send through this node (the follower forwards it as the producer).
        let send = pb::SendRequest {
            message: Some(msg("orders", format!("via {id}").as_bytes())),
        };
        g.send(signed(send, &prod)).await?;
        let send = pb::SendRequest {
            message: Some(msg("audit", b"no")),
        };
        status_is(
            g.send(signed(send, &prod)).await,
            Code::PermissionDenied,
            "may not send to topic 'audit'",
        );
    }
    let producer = cluster.client_as(T, Some(prod.clone()))?;
    producer.send(msg("orders", b"permitted")).await?;
    refused(
        producer.send_batch(vec![msg("audit", b"no")]).await,
        Code::PermissionDenied,
        "may not send to topic 'audit'",
    );
    // A batch (on the client's SendStream) with one forbidden topic is refused whole.
    refused(
        producer
            .send_batch(vec![msg("orders", b"whole"), msg("audit", b"no")])
            .await,
        Code::PermissionDenied,
        "may not send to topic 'audit'",
    );
    // Nothing was removed or transferred.
    assert_eq!(cluster.wait_leader().await?, leader);

    // The consumer, on every node: reads its topic, not another, commits only its group.
    let consumer = cluster.client_as(T, Some(cons.clone()))?;
    let acked = consumer.cluster_status().await?;
    assert_eq!(acked.members.len(), 3, "any user may see the cluster");
    cluster.wait_converged(Duration::from_secs(30)).await?;
    for id in cluster.ids() {
        let mut g = cluster.grpc(id).await?;
        let r = g.pull(signed(pull("orders"), &cons)).await?.into_inner();
        assert_eq!(r.messages.len(), 3, "node {id}: the three permitted sends");
        status_is(
            g.pull(signed(pull("audit"), &cons)).await,
            Code::PermissionDenied,
            "role consumer (user 'reader') may not read topic 'audit'",
        );
        status_is(
            g.pull(signed(pull("orders"), &prod)).await,
            Code::PermissionDenied,
            "role producer (user 'billing') may not read topic 'orders'",
        );
    }
    let commit = |group: &str| pb::CommitOffsetRequest {
        group: group.into(),
        topic: "orders".into(),
        queue_id: 0,
        offset: 1,
    };
    let mut g = cluster.grpc(follower).await?;
    g.commit_offset(signed(commit("g1"), &cons)).await?;
    status_is(
        g.commit_offset(signed(commit("g2"), &cons)).await,
        Code::PermissionDenied,
        "may not use consumer group 'g2'",
    );

    // The leader dies: the new one enforces the same users.
    cluster.kill(leader).await;
    let new_leader = cluster.wait_leader().await?;
    assert_ne!(new_leader, leader);
    producer.send(msg("orders", b"after failover")).await?;
    let mut g = cluster.grpc(new_leader).await?;
    status_is(
        g.delete_topic(signed(
            pb::DeleteTopicRequest {
                name: "orders".into(),
            },
            &prod,
        ))
        .await,
        Code::PermissionDenied,
        "may not DeleteTopic",
    );
    status_is(
        g.pull(signed(pull("audit"), &cons)).await,
        Code::PermissionDenied,
        "may not read topic 'audit'",
    );
    admin.delete_user("billing").await?;
    refused(
        producer.send(msg("orders", b"deleted")).await,
        Code::Unauthenticated,
        "unknown access key",
    );

    // The secret keys exist only in the replies: not in any log, checkpoint or snapshot.
    assert_nowhere_on_disk(cluster.dir.path(), &prod.secret_key);
    assert_nowhere_on_disk(cluster.dir.path(), &cons.secret_key);
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn users_reach_a_follower_by_snapshot_install() -> anyhow::Result<()> {
    let auth = TestAuth::new()?;
    let mut cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| {
        auth.apply(c);
        c.store.file_reserved_hours = 1;
    })
    .await?;
    let leader = cluster.wait_leader().await?;
    let follower = leader % 3 + 1;
    let admin = cluster.client_as(T, Some(auth.admin.clone()))?;
    admin.create_topic(topic("orders", 1)).await?;
    cluster.kill(follower).await;
    let cons = user(&admin, "late", "consumer", &["orders"], &["*"]).await;
    // Enough 4 KiB messages to fill several 64 KiB segments, then expire them.
    let body = vec![b'x'; 4096];
    for _ in 0..20 {
        admin
            .send_batch((0..5).map(|_| msg("orders", &body)).collect())
            .await?;
    }
    let mut purged = false;
    for id in cluster.ids().into_iter().filter(|&i| cluster.is_up(i)) {
        purged |= purge_at(cluster.node(id), now_ms() + 2 * 3_600_000).await?;
    }
    assert!(purged, "retention deleted nothing");
    cluster.restart(follower).await?;
    cluster.wait_converged(Duration::from_secs(60)).await?;
    let log = cluster.node(follower).log().watermarks();
    assert!(
        log.first_index.is_some_and(|i| i.get() > 0),
        "the follower's log should start at the snapshot, got {log:?}"
    );
    assert!(
        cluster
            .node(follower)
            .core()
            .store
            .user_by_access_key(&cons.access_key)
            .is_some(),
        "the installed snapshot carries the user"
    );
    let mut g = cluster.grpc(follower).await?;
    g.pull(signed(pull("orders"), &cons)).await?;
    status_is(
        g.delete_topic(signed(
            pb::DeleteTopicRequest {
                name: "orders".into(),
            },
            &cons,
        ))
        .await,
        Code::PermissionDenied,
        "role consumer (user 'late') may not DeleteTopic",
    );
    assert_nowhere_on_disk(cluster.dir.path(), &cons.secret_key);
    cluster.shutdown().await
}

/// Real `raftmq-node` processes with the auth settings in their TOML config files: they start
/// (key and admin files read, modes checked), elect, and refuse unsigned calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_processes_read_the_auth_settings() -> anyhow::Result<()> {
    let auth = TestAuth::new()?;
    let cluster = cluster_tests::process::ProcCluster::start_with(&[FlushPolicy::Sync; 3], |c| {
        auth.apply(c)
    })?;
    let opts = raftmq_client::ClientOptions {
        credentials: Some(auth.admin.clone()),
        request_timeout: T,
        max_attempts: 50,
        ..Default::default()
    };
    let admin = Client::new(&cluster.seeds(), opts)?;
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match admin.create_topic(topic("orders", 1)).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() < end => {
                tracing::debug!(error = %e, "waiting for the processes");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let prod = user(&admin, "p", "producer", &["*"], &[]).await;
    // The producer's first call may reach a follower that has not applied the user yet: it
    // looks again as it applies (USER_CATCH_UP) instead of refusing.
    let producer = Client::new(
        &cluster.seeds(),
        raftmq_client::ClientOptions {
            credentials: Some(prod),
            ..Default::default()
        },
    )?;
    producer
        .send(msg("orders", b"from a process cluster"))
        .await?;
    let anon = Client::new(&cluster.seeds(), Default::default())?;
    refused(
        anon.list_topics().await,
        Code::Unauthenticated,
        "missing authorization",
    );
    Ok(())
}

/// A follower that has not applied a new user yet looks again as it applies entries (up to
/// `USER_CATCH_UP`) instead of refusing a call the leader would take.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_behind_waits_for_a_new_user() -> anyhow::Result<()> {
    let auth = TestAuth::new()?;
    let cluster = TestCluster::start(&[FlushPolicy::Sync; 3], |c| auth.apply(c)).await?;
    let leader = cluster.wait_leader().await?;
    let behind = leader % 3 + 1;
    let admin = cluster.client_as(T, Some(auth.admin.clone()))?;
    admin.create_topic(topic("orders", 1)).await?;
    cluster.wait_converged(T).await?;
    // The follower hears nothing from the leader while the user is created.
    cluster.partition_pair(leader, behind);
    let prod = user(&admin, "late", "producer", &["orders"], &[]).await;
    let mut g = cluster.grpc(behind).await?;
    let send = pb::SendRequest {
        message: Some(msg("orders", b"to the follower behind")),
    };
    let started = tokio::time::Instant::now();
    let call = tokio::spawn(async move { g.send(signed(send, &prod)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !call.is_finished(),
        "the follower answered before it had the user"
    );
    cluster.heal();
    call.await??;
    tracing::info!(waited = ?started.elapsed(), "the follower took the new user's call");
    cluster.shutdown().await
}
