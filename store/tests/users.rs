//! The replicated user table: PutUser / DeleteUser apply deterministically, refuse a taken
//! access key, and survive a checkpoint + reopen and a snapshot install; the sealed secret is
//! stored as given (never anything else).

mod common;

use common::open_node;
use common::small_config;
use common::transfer;
use openraft::storage::RaftSnapshotBuilder;
use openraft::storage::RaftStateMachine;
use raftmq_store::command::Command;
use raftmq_store::users::Role;
use raftmq_store::users::SealedSecret;
use raftmq_store::users::User;
use raftmq_store::ApplyResponse;
use raftmq_store::RejectCode;

const SEG: u64 = 4096;

fn user(name: &str, ak: &str) -> User {
    User {
        name: name.into(),
        access_key: ak.into(),
        secret: SealedSecret(vec![0x5A; 52]),
        role: Role::Producer,
        topics: vec!["orders*".into()],
        groups: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_apply_checkpoint_reopen_and_snapshot_install() {
    let da = tempfile::tempdir().expect("tempdir");
    let db = tempfile::tempdir().expect("tempdir");
    let mut a = open_node(da.path(), small_config(), SEG);
    let mut b = open_node(db.path(), small_config(), SEG);
    assert_eq!(
        a.propose(&Command::PutUser(user("alice", "AK1"))),
        ApplyResponse::UserPut("alice".into())
    );
    a.propose(&Command::PutUser(user("bob", "AK2")));
    let taken = a.propose(&Command::PutUser(user("carol", "AK1")));
    assert!(
        matches!(&taken, ApplyResponse::Rejected { code: RejectCode::Invalid, message }
            if message.contains("belongs to user 'alice'")),
        "{taken:?}"
    );
    assert_eq!(
        a.propose(&Command::DeleteUser { name: "bob".into() }),
        ApplyResponse::UserDeleted("bob".into())
    );
    assert!(matches!(
        a.propose(&Command::DeleteUser { name: "bob".into() }),
        ApplyResponse::Rejected {
            code: RejectCode::NoSuchUser,
            ..
        }
    ));
    assert_eq!(a.store.users(), vec![user("alice", "AK1")]);
    assert_eq!(
        a.store.user_by_access_key("AK1"),
        Some(user("alice", "AK1"))
    );
    assert_eq!(a.store.user_by_access_key("AK2"), None);

    // Snapshot to b: b enforces the same users.
    let snap =
        a.sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
    let file = transfer(&snap.snapshot, &b).await;
    b.sm.install_snapshot(&snap.meta, file)
        .await
        .expect("install");
    assert_eq!(b.store.users(), a.store.users());
    b.store.validate().expect("valid");

    // Checkpoint + reopen of a: the table comes back from the checkpoint.
    a.store.checkpoint().expect("checkpoint");
    a.store.close().expect("close");
    drop(a);
    let a = open_node(da.path(), small_config(), SEG);
    assert_eq!(
        a.store.user_by_access_key("AK1"),
        Some(user("alice", "AK1"))
    );
    // And b from its installed snapshot's checkpoint.
    b.store.close().expect("close");
    drop(b);
    let b = open_node(db.path(), small_config(), SEG);
    assert_eq!(b.store.users(), vec![user("alice", "AK1")]);
}
