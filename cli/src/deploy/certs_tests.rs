//! Tests of the certificate generator: files and modes, SANs a node reads, a CA rebuilt
//! from its key issues certificates that chain to the first `ca.crt`.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn leaf_fields(pem: &str) -> raftmq_node::tls::x509::CertFields {
    let der = pem_der(pem);
    raftmq_node::tls::x509::parse(&der).expect("parses")
}

fn pem_der(pem: &str) -> Vec<u8> {
    use raftmq_node::tls::pki::pem::PemObject;
    raftmq_node::tls::pki::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("a PEM certificate")
        .to_vec()
}

#[test]
fn node_certificate_names_member_hosts_and_keys_are_private() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = ClusterCa::generate("c1").expect("ca");
    let ca_path = write_ca(dir.path(), &ca).expect("write ca");
    let paths = write_node_cert(dir.path(), &ca, 3, &["10.0.0.7", "mq-3.example"]).expect("node");
    assert_eq!(paths.ca, ca_path);
    for key in [&paths.key, &dir.path().join(TLS_DIR).join(CA_KEY_FILE)] {
        let mode = std::fs::metadata(key).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", key.display());
    }
    let f = leaf_fields(&std::fs::read_to_string(&paths.cert).expect("read"));
    assert_eq!(f.uris, vec!["raftmq://c1/node/3".to_string()]);
    assert!(f.ips.contains(&"10.0.0.7".parse().expect("ip")), "{f:?}");
    assert!(f.ips.contains(&"127.0.0.1".parse().expect("ip")), "{f:?}");
    assert!(f.dns.contains(&"localhost".to_string()), "{f:?}");
    assert!(f.dns.contains(&"mq-3.example".to_string()), "{f:?}");
    assert!(!f.not_after.is_empty());
    let der = pem_der(&std::fs::read_to_string(&paths.cert).expect("read"));
    assert_eq!(raftmq_node::tls::named_member("c1", &der.into()), Ok(3));
}

#[test]
fn a_ca_loaded_from_its_key_issues_certificates_the_node_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = ClusterCa::generate("c2").expect("ca");
    write_ca(dir.path(), &ca).expect("write ca");
    let again = load_ca(dir.path(), "c2").expect("load");
    let paths = write_node_cert(dir.path(), &again, 4, &[]).expect("node");
    // The node loads the pair with the first ca.crt: the key matches and the certificate
    // chains to that CA (Material::load verifies both).
    let files = raftmq_node::config::TlsFiles {
        cert: paths.cert.clone(),
        key: paths.key.clone(),
        ca: paths.ca.clone(),
    };
    raftmq_node::tls::Material::load(&files).expect("a usable set");
    let other = tempfile::tempdir().expect("tempdir");
    write_ca(other.path(), &ClusterCa::generate("c2").expect("ca")).expect("write");
    let foreign = raftmq_node::config::TlsFiles {
        ca: other.path().join(TLS_DIR).join(CA_CERT_FILE),
        ..files
    };
    let err = raftmq_node::tls::Material::load(&foreign)
        .err()
        .expect("another CA");
    assert!(err.to_string().contains("tls-ca-file"), "{err}");
    let a = leaf_fields(&ca.issue_node(1, &[]).expect("1").cert_pem);
    let b = leaf_fields(&ca.issue_node(1, &[]).expect("1").cert_pem);
    assert_ne!(a.serial_hex, b.serial_hex, "serials are unique");
}

#[test]
fn secure_init_gives_every_node_tls_settings_and_the_manifest_the_ca() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = super::super::local::InitOptions {
        nodes: 2,
        dir: tmp.path().join("c"),
        base_port: 0,
        flush: "sync".into(),
        segment_bytes: 1 << 20,
        cluster_id: "sec".into(),
        settings: vec![],
        secure: true,
    };
    let m = super::super::local::init(&opts).expect("init");
    let ca = m.tls_ca.clone().expect("the manifest names the CA");
    assert_eq!(ca, m.dir.join("tls/ca.crt"));
    let back = super::super::manifest::Manifest::load(&m.path()).expect("load");
    assert_eq!(back.tls_ca, Some(ca.clone()));
    for n in &m.nodes {
        let cfg = raftmq_node::config::NodeConfig::load(&n.config).expect("node config");
        cfg.validate().expect("valid");
        let files = cfg.tls.files().expect("TLS configured");
        assert_eq!(files.ca, ca);
        let mat = raftmq_node::tls::Material::load(&files).expect("loads");
        assert_eq!(mat.leaf.uris, vec![format!("raftmq://sec/node/{}", n.id)]);
    }
}
