//! Tests of the `MQv2-HMAC-SHA1` signature: vectors computed independently (Python's `hmac`,
//! the same HMAC-SHA1 + lower-case hex the Rust client 5.0.0 computes with `ring`).

use super::*;

const SK: &str = "secret-key-123";
const RFC3339: &str = "2024-05-01T10:20:30.123+02:00";
const RFC3339_SIG: &str = "16b9663c4f92e610e56f1d506bd5e4835ce6d841";
const COMPACT: &str = "20240501T082030Z";
const COMPACT_SIG: &str = "5f317ffb4a665b9f264473199a1e88d872c86d88";

fn header(ak: &str, sig: &str) -> String {
    format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}")
}

#[test]
fn rfc2202_vector() {
    assert_eq!(
        signature_hex(b"Jefe", "what do ya want for nothing?"),
        "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
    );
}

#[test]
fn rust_and_java_client_vectors_verify() {
    for (dt, sig) in [(RFC3339, RFC3339_SIG), (COMPACT, COMPACT_SIG)] {
        assert_eq!(signature_hex(SK.as_bytes(), dt), sig);
        let a = parse_authorization(&header("AK1", sig)).expect("parse");
        assert_eq!(a.access_key, "AK1");
        verify_signature(SK.as_bytes(), dt, &a.signature).expect("verifies");
        assert_eq!(
            verify_signature(b"other", dt, &a.signature),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify_signature(SK.as_bytes(), "2024-05-01T10:20:31.123+02:00", &a.signature),
            Err(SignatureError::BadSignature)
        );
    }
}

#[test]
fn hex_is_read_case_insensitively() {
    let a = parse_authorization(&header("AK1", &RFC3339_SIG.to_uppercase())).expect("parse");
    verify_signature(SK.as_bytes(), RFC3339, &a.signature).expect("upper-case hex verifies");
}

#[test]
fn both_date_formats_name_the_same_instant() {
    let a = parse_date_time(RFC3339).expect("rfc3339");
    let b = parse_date_time(COMPACT).expect("compact");
    assert_eq!(a.unix_timestamp(), b.unix_timestamp());
    assert_eq!(
        parse_date_time("2024-05-01T08:20:30Z")
            .expect("utc")
            .unix_timestamp(),
        b.unix_timestamp()
    );
    for bad in ["", "yesterday", "20240501T082030", "2024-13-01T00:00:00Z"] {
        let e = parse_date_time(bad).expect_err(bad);
        assert!(e.to_string().contains("x-mq-date-time"), "{e}");
    }
}

#[test]
fn sign_round_trips() {
    let now = parse_date_time(RFC3339).expect("parse");
    let (dt, auth) = sign("AK9", SK, now);
    assert_eq!(parse_date_time(&dt).expect("own format"), now);
    let a = parse_authorization(&auth).expect("own header");
    assert_eq!(a.access_key, "AK9");
    verify_signature(SK.as_bytes(), &dt, &a.signature).expect("own signature");
}

#[test]
fn malformed_headers_say_what_is_wrong() {
    let cases = [
        ("", "expected"),
        ("Basic abc", "algorithm"),
        (
            "HMAC Credential=a, SignedHeaders=x-mq-date-time, Signature=00",
            "algorithm",
        ),
        (
            "MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=00",
            "no Credential",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00",
            "empty Credential",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=a, Signature=00",
            "no SignedHeaders",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=host, Signature=00",
            "SignedHeaders",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time",
            "no Signature",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=zz",
            "not hex",
        ),
        (
            "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=00",
            "20",
        ),
        ("MQv2-HMAC-SHA1 Credential=a, Credential=b", "twice"),
        ("MQv2-HMAC-SHA1 Credential=a, Foo=b", "unknown field"),
        ("MQv2-HMAC-SHA1 Credential", "no '='"),
    ];
    for (value, want) in cases {
        let e = parse_authorization(value).expect_err(value);
        let text = e.to_string();
        assert!(
            text.starts_with("malformed authorization header"),
            "{value}: {text}"
        );
        assert!(text.contains(want), "{value}: {text} lacks {want}");
    }
    let huge = format!("MQv2-HMAC-SHA1 Credential={}", "a".repeat(5000));
    assert!(parse_authorization(&huge)
        .expect_err("huge")
        .to_string()
        .contains("at most"));
}
