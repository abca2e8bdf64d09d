//! Tests of `raftmq cert`: a CA, then node certificates a node loads; a second CA in the same
//! place is refused.

use clap::Parser;

use super::super::Cli;
use super::super::Command;
use super::*;

fn parse(args: &[&str]) -> (Global, CertCmd) {
    let cli = Cli::try_parse_from(args).expect("parses");
    match cli.command {
        Command::Cert(c) => (cli.global, c),
        other => panic!("not a cert command: {other:?}"),
    }
}

#[test]
fn cert_ca_then_node_issue_a_set_the_node_loads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path().display().to_string();
    let (g, c) = parse(&["raftmq", "cert", "ca", "--dir", &d, "--cluster-id", "prod"]);
    assert_eq!(run(&g, c).expect("ca"), 0);
    let (g, c) = parse(&["raftmq", "cert", "ca", "--dir", &d, "--cluster-id", "prod"]);
    let e = run(&g, c).expect_err("a second CA");
    assert!(e.to_string().contains("already"), "{e}");
    let (g, c) = parse(&[
        "raftmq",
        "cert",
        "node",
        "--dir",
        &d,
        "--cluster-id",
        "prod",
        "--id",
        "2",
        "--host",
        "10.0.0.12",
        "--json",
    ]);
    assert_eq!(run(&g, c).expect("node"), 0);
    let tls = tmp.path().join(certs::TLS_DIR);
    let files = raftmq_node::config::TlsFiles {
        cert: tls.join("node-2.crt"),
        key: tls.join("node-2.key"),
        ca: tls.join(certs::CA_CERT_FILE),
    };
    let m = raftmq_node::tls::Material::load(&files).expect("a usable set");
    assert_eq!(m.leaf.uris, vec!["raftmq://prod/node/2".to_string()]);
    assert!(m.leaf.ips.contains(&"10.0.0.12".parse().expect("ip")));
}
