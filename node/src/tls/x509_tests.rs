//! Tests of the certificate reader and the member check: fields of an rcgen certificate,
//! member URIs, and no panic on any truncation or flipped byte of a certificate.

use super::admission::named_member;
use super::admission::parse_member_uri;
use super::x509::parse;

fn cert(uris: &[&str]) -> Vec<u8> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    p.subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    for u in uris {
        p.subject_alt_names.push(rcgen::SanType::URI(
            rcgen::Ia5String::try_from(u.to_string()).expect("ascii"),
        ));
    }
    p.serial_number = Some(rcgen::SerialNumber::from(vec![0x01, 0x02, 0x03]));
    p.not_after = rcgen::date_time_ymd(2031, 7, 9);
    p.self_signed(&key).expect("cert").der().to_vec()
}

#[test]
fn reads_serial_not_after_and_names() {
    let f = parse(&cert(&["raftmq://c/node/7"])).expect("parses");
    assert_eq!(f.serial_hex, "010203");
    assert_eq!(f.not_after, "2031-07-09T00:00:00Z");
    assert_eq!(f.uris, vec!["raftmq://c/node/7".to_string()]);
    assert_eq!(f.dns, vec!["localhost".to_string()]);
    assert_eq!(
        f.ips,
        vec!["127.0.0.1".parse::<std::net::IpAddr>().expect("ip")]
    );
}

#[test]
fn member_uris_name_cluster_and_node() {
    assert_eq!(parse_member_uri("raftmq://c1/node/3"), Some(("c1", 3)));
    assert_eq!(parse_member_uri("raftmq://c1/node/x"), None);
    assert_eq!(parse_member_uri("spiffe://c1/node/3"), None);
    let der = cert(&["spiffe://x/y", "raftmq://c1/node/5"]);
    assert_eq!(named_member("c1", &der.clone().into()), Ok(5));
    let e = named_member("c2", &der.into()).expect_err("another cluster");
    assert!(e.contains("another cluster"), "{e}");
    let e = named_member("c1", &cert(&[]).into()).expect_err("no member URI");
    assert!(e.contains("names no raftmq node"), "{e}");
}

#[test]
fn damaged_certificates_are_errors_never_panics() {
    let der = cert(&["raftmq://c/node/1"]);
    for n in 0..der.len() {
        assert!(parse(&der[..n]).is_err(), "truncated at {n} parsed");
    }
    for i in 0..der.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = der.clone();
            bad[i] ^= bit;
            let _ = parse(&bad);
        }
    }
}
