//! Tests of [`TlsState`]: a reload takes new files, a bad one keeps the old material, and
//! a start with bad files names the setting.

use super::reload::TlsState;
use crate::config::TlsFiles;

/// A CA and a leaf of it for node `id` (PEMs: ca, cert, key).
fn issue(id: u64) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test ca");
    let ca = ca.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    p.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.subject_alt_names.push(rcgen::SanType::URI(
        rcgen::Ia5String::try_from(format!("raftmq://t/node/{id}")).expect("ascii"),
    ));
    let leaf = p.signed_by(&key, &ca, &ca_key).expect("leaf");
    (ca.pem(), leaf.pem(), key.serialize_pem())
}

fn write(dir: &std::path::Path, (ca, cert, key): &(String, String, String)) -> TlsFiles {
    let f = TlsFiles {
        cert: dir.join("n.crt"),
        key: dir.join("n.key"),
        ca: dir.join("ca.crt"),
    };
    std::fs::write(&f.ca, ca).expect("write");
    std::fs::write(&f.cert, cert).expect("write");
    std::fs::write(&f.key, key).expect("write");
    f
}

#[test]
fn reload_takes_new_files_and_keeps_the_old_material_on_a_bad_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write(dir.path(), &issue(1));
    let state = TlsState::load(files.clone()).expect("loads");
    assert_eq!(
        state.current().leaf.uris,
        vec!["raftmq://t/node/1".to_string()]
    );
    let second = issue(2);
    write(dir.path(), &second);
    state.reload().expect("reloads");
    assert_eq!(state.generation(), 1);
    assert_eq!(
        state.current().leaf.uris,
        vec!["raftmq://t/node/2".to_string()]
    );
    // A key that does not fit the certificate, then garbage: refused, the old set stays.
    std::fs::write(&files.key, issue(3).2).expect("write");
    let e = state.reload().expect_err("mismatched key");
    assert!(e.to_string().contains("tls-key-file"), "{e}");
    std::fs::write(&files.cert, "not pem").expect("write");
    let e = state.reload().expect_err("garbage");
    assert!(e.to_string().contains("tls-cert-file"), "{e}");
    assert_eq!(state.generation(), 1);
    assert_eq!(
        state.current().leaf.uris,
        vec!["raftmq://t/node/2".to_string()]
    );
    std::fs::remove_file(&files.ca).expect("rm");
    let e = TlsState::load(files).expect_err("missing CA");
    assert!(e.to_string().contains("tls-ca-file"), "{e}");
}
