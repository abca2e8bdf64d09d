//! Tests of [`Authenticator`]: root and table users, unknown key, bad signature (wrong secret,
//! tampered), both date formats, skew, missing headers, auth off.

use super::*;
use raftmq_store::users::Role;
use tonic::metadata::MetadataValue;

const ROOT_SK: &str = "root-secret-0123456789";

fn authn() -> Authenticator {
    Authenticator::with_secrets(
        ClusterKey::from_bytes(&[3; 32]),
        AdminCredential {
            access_key: "ROOT".into(),
            secret_key: ROOT_SK.into(),
        },
        Duration::from_secs(900),
    )
}

fn md(date_time: &str, authorization: &str) -> MetadataMap {
    let mut m = MetadataMap::new();
    m.insert(
        DATE_TIME_KEY,
        MetadataValue::try_from(date_time).expect("ascii"),
    );
    m.insert(
        AUTHORIZATION_KEY,
        MetadataValue::try_from(authorization).expect("ascii"),
    );
    m
}

fn signed(ak: &str, sk: &str, at: OffsetDateTime) -> MetadataMap {
    let (dt, auth) = signature::sign(ak, sk, at);
    md(&dt, &auth)
}

fn now() -> OffsetDateTime {
    signature::parse_date_time("2026-12-01T12:00:00Z").expect("date")
}

fn alice(a: &Authenticator) -> User {
    let key = a.cluster_key().expect("on");
    User {
        name: "alice".into(),
        access_key: "AKALICE".into(),
        secret: key.seal("alice", "AKALICE", "alice-secret").expect("seal"),
        role: Role::Producer,
        topics: vec!["orders*".into()],
        groups: vec![],
    }
}

fn msg(e: NodeError) -> String {
    match e {
        NodeError::Unauthenticated(m) => m,
        other => panic!("expected UNAUTHENTICATED, got {other:?}"),
    }
}

#[test]
fn root_and_table_users_authenticate() {
    let a = authn();
    let u = alice(&a);
    let p = a
        .authenticate_at(&signed("ROOT", ROOT_SK, now()), now(), |_| None)
        .expect("root");
    assert_eq!(p.role(), Role::Admin);
    let p = a
        .authenticate_at(&signed("AKALICE", "alice-secret", now()), now(), |ak| {
            (ak == "AKALICE").then(|| u.clone())
        })
        .expect("alice");
    assert_eq!(p, Principal::User(u));
}

#[test]
fn java_date_format_and_upper_case_hex_accepted() {
    let a = authn();
    let dt = "20261201T115930Z";
    let sig = signature::signature_hex(ROOT_SK.as_bytes(), dt).to_uppercase();
    let h =
        format!("MQv2-HMAC-SHA1 Credential=ROOT, SignedHeaders=x-mq-date-time, Signature={sig}");
    a.authenticate_at(&md(dt, &h), now(), |_| None)
        .expect("java client");
}

#[test]
fn refusals_name_the_reason() {
    let a = authn();
    let u = alice(&a);
    let lookup = |ak: &str| (ak == "AKALICE").then(|| u.clone());
    let e = msg(a
        .authenticate_at(&signed("AKALICE", "wrong", now()), now(), lookup)
        .expect_err("wrong secret"));
    assert_eq!(e, "bad signature");
    let e = msg(a
        .authenticate_at(&signed("AKNOBODY", "x", now()), now(), lookup)
        .expect_err("unknown"));
    assert!(e.contains("unknown access key 'AKNOBODY'"), "{e}");
    // Signature over another date-time than the one sent.
    let (_, auth) = signature::sign("ROOT", ROOT_SK, now());
    let e = msg(a
        .authenticate_at(&md("2026-12-01T12:00:01Z", &auth), now(), |_| None)
        .expect_err("tampered"));
    assert_eq!(e, "bad signature");
    // Skew: 16 minutes off either way.
    for off in [-16i64, 16] {
        let at = now() + time::Duration::minutes(off);
        let e = msg(a
            .authenticate_at(&signed("ROOT", ROOT_SK, at), now(), |_| None)
            .expect_err("skew"));
        assert!(e.contains("outside the allowed skew of 900 s"), "{e}");
    }
    a.authenticate_at(
        &signed("ROOT", ROOT_SK, now() + time::Duration::minutes(14)),
        now(),
        |_| None,
    )
    .expect("inside the window");
    // Missing headers.
    let e = msg(a
        .authenticate_at(&MetadataMap::new(), now(), |_| None)
        .expect_err("none"));
    assert!(e.starts_with("missing authorization"), "{e}");
    let mut m = signed("ROOT", ROOT_SK, now());
    m.remove(DATE_TIME_KEY);
    let e = msg(a.authenticate_at(&m, now(), |_| None).expect_err("no date"));
    assert!(e.starts_with("missing x-mq-date-time"), "{e}");
    let e = msg(a
        .authenticate_at(&md("x", "Basic abc"), now(), |_| None)
        .expect_err("malformed"));
    assert!(e.starts_with("malformed authorization header"), "{e}");
}

#[test]
fn off_means_anonymous() {
    let a = Authenticator::disabled();
    assert!(!a.enabled());
    assert_eq!(
        a.authenticate_at(&MetadataMap::new(), now(), |_| None)
            .expect("anonymous"),
        Principal::Anonymous
    );
}

#[test]
fn internal_calls_act_for_the_forwarded_user_only_under_root() {
    let a = authn();
    let u = alice(&a);
    let lookup = |ak: &str| (ak == "AKALICE").then(|| u.clone());
    let mut m = MetadataMap::new();
    a.sign_internal(&mut m, Some(&Principal::User(u.clone())));
    let p = a
        .authenticate_at(&m, OffsetDateTime::now_utc(), lookup)
        .expect("forwarded");
    assert_eq!(
        p,
        Principal::User(u.clone()),
        "root acting for alice is alice"
    );
    let mut m = MetadataMap::new();
    a.sign_internal(&mut m, None);
    let p = a
        .authenticate_at(&m, OffsetDateTime::now_utc(), lookup)
        .expect("internal");
    assert!(matches!(p, Principal::Root { .. }));
    // A user cannot claim to act for another one.
    let mut m = signed("AKALICE", "alice-secret", now());
    m.insert(ON_BEHALF_OF_KEY, MetadataValue::from_static("ROOT"));
    assert_eq!(
        a.authenticate_at(&m, now(), lookup).expect("alice"),
        Principal::User(u)
    );
    // Off: nothing is signed.
    let mut m = MetadataMap::new();
    Authenticator::disabled().sign_internal(&mut m, None);
    assert!(m.is_empty());
}
