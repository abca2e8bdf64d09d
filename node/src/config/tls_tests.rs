//! Tests of the TLS settings ([`TlsConfig`]): defaults, the plaintext rule, all-or-none files,
//! ranges, file keys and flags.

use std::path::Path;
use std::path::PathBuf;

use clap::Parser;

use super::*;

fn invalid_field(c: &NodeConfig) -> (&'static str, String) {
    match c.validate() {
        Err(ConfigError::Invalid { field, reason }) => (field, reason),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn with_tls(mut c: NodeConfig) -> NodeConfig {
    c.tls.tls_cert_file = Some("node.crt".into());
    c.tls.tls_key_file = Some("node.key".into());
    c.tls.tls_ca_file = Some("ca.crt".into());
    c
}

#[test]
fn defaults_are_plaintext_on_loopback_with_generous_limits() {
    let d = NodeConfig::default();
    assert_eq!(d.tls.files(), None);
    assert!(!d.tls.allow_plaintext);
    assert_eq!(d.tls.tls_reload_interval_ms, 2_000);
    assert_eq!(d.tls.max_connections, 10_000);
    assert_eq!(d.tls.max_concurrent_streams, 1_024);
    assert_eq!(d.tls.loopback_congestion_control, "reno");
    d.validate().expect("plaintext on 127.0.0.1 is allowed");
}

#[test]
fn plaintext_on_a_non_loopback_listener_refuses_to_start_naming_the_fix() {
    type Mover = fn(&mut NodeConfig);
    let cases: Vec<(&str, Mover)> = vec![
        ("client-listen-addr", |c| {
            c.client_listen_addr = "0.0.0.0:9201".parse().expect("addr");
            c.client_advertised_addr = Some("h:9201".into());
        }),
        ("raft-listen-addr", |c| {
            c.raft_listen_addr = "10.1.2.3:9101".parse().expect("addr");
        }),
        ("rocketmq-listen-addr", |c| {
            c.rocketmq_listen_addr = Some("[::]:9401".parse().expect("addr"));
            c.rocketmq_advertised_addr = Some("h:9401".into());
        }),
    ];
    for (name, mv) in cases {
        let mut c = NodeConfig::default();
        mv(&mut c);
        let (field, reason) = invalid_field(&c);
        assert_eq!(field, "allow-plaintext", "{name}: {reason}");
        assert!(reason.contains(name), "{reason}");
        assert!(reason.contains("allow-plaintext = true"), "{reason}");
        assert!(reason.contains("tls-cert-file"), "{reason}");
        let mut allowed = c.clone();
        allowed.tls.allow_plaintext = true;
        allowed.validate().expect("allow-plaintext lifts the rule");
        with_tls(c).validate().expect("TLS lifts the rule");
    }
    // The metrics endpoint stays plaintext and is not part of the rule.
    let c = NodeConfig {
        metrics_addr: Some("0.0.0.0:9301".parse().expect("addr")),
        ..NodeConfig::default()
    };
    c.validate().expect("metrics may listen anywhere");
}

#[test]
fn tls_files_are_all_or_none_and_ranges_are_checked() {
    type Breaker = fn(&mut NodeConfig);
    let cases: Vec<(&str, Breaker)> = vec![
        ("tls-key-file", |c| c.tls.tls_key_file = None),
        ("tls-cert-file", |c| c.tls.tls_cert_file = None),
        ("tls-ca-file", |c| c.tls.tls_ca_file = None),
        ("tls-ca-file", |c| c.tls.tls_ca_file = Some(PathBuf::new())),
        ("tls-reload-interval-ms", |c| {
            c.tls.tls_reload_interval_ms = 99
        }),
        ("tls-reload-interval-ms", |c| {
            c.tls.tls_reload_interval_ms = 3_600_001
        }),
        ("max-connections", |c| c.tls.max_connections = 0),
        ("max-concurrent-streams", |c| {
            c.tls.max_concurrent_streams = 0
        }),
        ("max-concurrent-streams", |c| {
            c.tls.max_concurrent_streams = 65_537
        }),
        ("loopback-congestion-control", |c| {
            c.tls.loopback_congestion_control = String::new()
        }),
        ("loopback-congestion-control", |c| {
            c.tls.loopback_congestion_control = "reno; cubic".into()
        }),
        ("loopback-congestion-control", |c| {
            c.tls.loopback_congestion_control = "x".repeat(16)
        }),
    ];
    for (want, breaker) in cases {
        let mut c = with_tls(NodeConfig::default());
        breaker(&mut c);
        let (field, reason) = invalid_field(&c);
        assert_eq!(field, want, "{reason}");
    }
    let mut c = with_tls(NodeConfig::default());
    c.tls.tls_reload_interval_ms = 0;
    c.validate().expect("0 = SIGHUP only");
    assert_eq!(
        c.tls.files(),
        Some(TlsFiles {
            cert: "node.crt".into(),
            key: "node.key".into(),
            ca: "ca.crt".into()
        })
    );
}

#[test]
fn tls_keys_from_file_and_flags() {
    let text = "tls-cert-file = \"/c/node.crt\"\ntls-key-file = \"/c/node.key\"\n\
                tls-ca-file = \"/c/ca.crt\"\nallow-plaintext = true\n\
                tls-reload-interval-ms = 500\nmax-connections = 7\nmax-concurrent-streams = 9\n\
                loopback-congestion-control = \"system\"\n";
    let c = NodeConfig::from_toml_str(text, Path::new("x.toml")).expect("parses");
    c.validate().expect("valid");
    assert_eq!(
        c.tls.tls_cert_file.as_deref(),
        Some(Path::new("/c/node.crt"))
    );
    assert_eq!(c.tls.tls_ca_file.as_deref(), Some(Path::new("/c/ca.crt")));
    assert!(c.tls.allow_plaintext);
    assert_eq!(
        (
            c.tls.tls_reload_interval_ms,
            c.tls.max_connections,
            c.tls.max_concurrent_streams
        ),
        (500, 7, 9)
    );
    assert_eq!(c.tls.loopback_congestion_control, "system");
    let back = NodeConfig::from_toml_str(&c.to_toml_string(), Path::new("t.toml")).expect("parses");
    assert_eq!(back, c);
    let cfg = NodeArgs::try_parse_from([
        "raftmq-node",
        "--tls-cert-file",
        "a.crt",
        "--tls-key-file",
        "a.key",
        "--tls-ca-file",
        "ca.crt",
        "--max-connections",
        "3",
        "--loopback-congestion-control",
        "cubic",
    ])
    .expect("flags parse")
    .resolve()
    .expect("valid");
    assert_eq!(cfg.tls.tls_key_file.as_deref(), Some(Path::new("a.key")));
    assert_eq!(cfg.tls.max_connections, 3);
    assert_eq!(cfg.tls.loopback_congestion_control, "cubic");
    let bad = NodeArgs::try_parse_from([
        "raftmq-node",
        "--raft-listen-addr",
        "0.0.0.0:9101",
        "--raft-advertised-addr",
        "h:9101",
    ])
    .expect("flags parse")
    .resolve()
    .expect_err("plaintext on 0.0.0.0");
    assert!(bad.to_string().contains("allow-plaintext = true"), "{bad}");
}
