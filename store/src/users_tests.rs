//! Tests of the user table and the pattern language.

use super::*;

fn user(name: &str, ak: &str, role: Role) -> User {
    User {
        name: name.into(),
        access_key: ak.into(),
        secret: SealedSecret(vec![7; 40]),
        role,
        topics: vec!["orders*".into()],
        groups: vec!["*".into()],
    }
}

#[test]
fn patterns() {
    let yes = [
        ("*", ""),
        ("*", "orders"),
        ("orders", "orders"),
        ("orders*", "orders"),
        ("orders*", "orders-eu"),
        ("*-audit", "billing-audit"),
        ("a*b*c", "axxbyyc"),
        ("a*b*c", "abcbc"),
        ("**", "x"),
    ];
    let no = [
        ("orders", "orders2"),
        ("orders*", "order"),
        ("*-audit", "billing-audits"),
        ("a*b*c", "axxbyy"),
        ("", "x"),
    ];
    for (p, n) in yes {
        assert!(pattern_matches(p, n), "{p} should match {n}");
    }
    for (p, n) in no {
        assert!(!pattern_matches(p, n), "{p} should not match {n}");
    }
}

#[test]
fn put_replace_delete() {
    let mut t = UserTable::default();
    t.put(user("alice", "AK1", Role::Producer)).expect("put");
    t.put(user("bob", "AK2", Role::Consumer)).expect("put");
    assert_eq!(t.by_access_key("AK2").map(|u| u.name.as_str()), Some("bob"));
    // Replace keeps the name, may change the key.
    t.put(user("alice", "AK3", Role::Admin)).expect("replace");
    assert!(t.by_access_key("AK1").is_none());
    assert_eq!(t.get("alice").map(|u| u.role), Some(Role::Admin));
    // Another user's key is refused.
    let e = t
        .put(user("carol", "AK2", Role::Producer))
        .expect_err("dup key");
    assert!(e.to_string().contains("belongs to user 'bob'"), "{e}");
    t.delete("bob").expect("delete");
    assert!(t.delete("bob").is_err());
    assert_eq!(t.len(), 1);
    t.validate().expect("valid");
}

#[test]
fn bad_fields_are_refused() {
    let mut t = UserTable::default();
    let mut u = user("a b", "AK1", Role::Producer);
    assert!(t.put(u.clone()).is_err());
    u.name = "ok".into();
    u.topics = vec!["bad/topic".into()];
    assert!(t
        .put(u.clone())
        .expect_err("pattern")
        .to_string()
        .contains("topic pattern"));
    u.topics = vec![];
    u.secret = SealedSecret(vec![]);
    assert!(t.put(u).is_err());
    assert!(t.is_empty());
}

#[test]
fn sealed_secret_serde_and_debug() {
    let u = user("alice", "AK1", Role::Producer);
    let json = serde_json::to_string(&u).expect("ser");
    assert!(json.contains("\"role\":\"producer\""), "{json}");
    assert_eq!(serde_json::from_str::<User>(&json).expect("de"), u);
    assert_eq!(format!("{:?}", u.secret), "SealedSecret(<40 bytes>)");
    assert!(serde_json::from_str::<SealedSecret>("\"abc\"").is_err());
    assert!(serde_json::from_str::<SealedSecret>("\"zz\"").is_err());
}

#[test]
fn roles_parse() {
    for r in [Role::Admin, Role::Producer, Role::Consumer] {
        assert_eq!(Role::parse(r.as_str()).expect("parse"), r);
        assert_eq!(Role::from_u8(r.to_u8()), Some(r));
    }
    assert!(Role::parse("root").is_err());
    assert_eq!(Role::from_u8(0), None);
}
