//! Finding the binaries that local clusters and tests run: `raftmq-node` ([`node_binary`]) and
//! `raftmq` itself ([`raftmq_binary`]), one search order for the `raftmq` command, its tests and
//! `cluster-tests`.
//!
//! Search order for a [`Binary`]:
//! 1. its environment variable (`$RAFTMQ_NODE_BIN`, `$RAFTMQ_BIN`), which must name a file;
//! 2. next to the running executable, then in that directory's parent: `<target>/<profile>/`
//!    both for a binary cargo built and for a test executable in `<target>/<profile>/deps/`
//!    (`CARGO_BIN_EXE_<name>` exists only for binaries of the package under test);
//! 3. when run by cargo (`cargo run`, `cargo test`: `CARGO` is set), `cargo build -p <package>
//!    --bin <name>` with the same cargo, profile and target dir, so that `cargo run --release
//!    --bin raftmq -- cluster up` works on a fresh checkout and tests build what they spawn;
//! 4. on `PATH`.
//!
//! A test executable run by cargo (in `<target>/<profile>/deps/`, `CARGO` set) runs step 3
//! first, once per process, even when the binary exists: the build is a no-op when it is up
//! to date, and a test never spawns a binary older than the code under test.
//!
//! Steps 2 to 4 run once per binary and process: the answer (or the error) is remembered, so
//! concurrent tests build at most once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::sync::Mutex;

use anyhow::Context;

/// A binary of the workspace that can be located (and built).
#[derive(Clone, Copy, Debug)]
pub struct Binary {
    /// File name of the binary.
    pub name: &'static str,
    /// Cargo package that builds it.
    pub package: &'static str,
    /// Environment variable naming the binary to run (overrides the lookup).
    pub env: &'static str,
}

/// The broker node.
pub const NODE: Binary = Binary {
    name: "raftmq-node",
    package: "raftmq-node",
    env: "RAFTMQ_NODE_BIN",
};

/// The `raftmq` command.
pub const RAFTMQ: Binary = Binary {
    name: "raftmq",
    package: "raftmq-cli",
    env: "RAFTMQ_BIN",
};

/// The `raftmq-node` binary (see the module docs for the search order).
pub fn node_binary() -> anyhow::Result<PathBuf> {
    find(&NODE)
}

/// The `raftmq` binary (see the module docs for the search order).
pub fn raftmq_binary() -> anyhow::Result<PathBuf> {
    find(&RAFTMQ)
}

/// Answers of steps 2 to 4, per binary name.
static FOUND: Mutex<BTreeMap<&'static str, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());

/// `bin` by the search order of the module docs.
pub fn find(bin: &Binary) -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(bin.env) {
        let p = PathBuf::from(p);
        anyhow::ensure!(p.is_file(), "{}={} is not a file", bin.env, p.display());
        return Ok(p);
    }
    // Held across the search, so that concurrent callers wait for one build.
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    found
        .entry(bin.name)
        .or_insert_with(|| search(bin).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn search(bin: &Binary) -> anyhow::Result<PathBuf> {
    let built_first = is_cargo_test();
    if built_first {
        if let Some(built) = build_under_cargo(bin)? {
            return Ok(built);
        }
    }
    let mut beside = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            beside.push(dir.join(bin.name));
            if let Some(up) = dir.parent() {
                beside.push(up.join(bin.name));
            }
        }
    }
    if let Some(found) = beside.into_iter().find(|p| p.is_file()) {
        return Ok(found);
    }
    if !built_first {
        if let Some(built) = build_under_cargo(bin)? {
            return Ok(built);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(bin.name))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "cannot find the {} binary next to this executable or on PATH; build it \
                 with `cargo build --release -p {}` (same profile as raftmq), or set {}",
                bin.name, bin.package, bin.env
            )
        })
}

/// True for a test executable that cargo runs (`<target>/<profile>/deps/`, `CARGO` set).
fn is_cargo_test() -> bool {
    std::env::var_os("CARGO").is_some()
        && std::env::current_exe()
            .ok()
            .and_then(|exe| {
                exe.parent()
                    .and_then(|d| d.file_name())
                    .map(|n| n == "deps")
            })
            .unwrap_or(false)
}

/// When run by cargo (`CARGO` set), builds `bin` with the same cargo, profile and target dir
/// as the running executable (`<target>/<profile>/`, or `<target>/<profile>/deps/` for a test).
/// Returns the binary, or `None` when not run by cargo or the build left no binary there.
fn build_under_cargo(bin: &Binary) -> anyhow::Result<Option<PathBuf>> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(None);
    };
    let exe = std::env::current_exe()?;
    let Some(mut profile_dir) = exe.parent() else {
        return Ok(None);
    };
    if profile_dir.file_name().is_some_and(|n| n == "deps") {
        let Some(up) = profile_dir.parent() else {
            return Ok(None);
        };
        profile_dir = up;
    }
    let Some(target_dir) = profile_dir.parent() else {
        return Ok(None);
    };
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => return Ok(None),
    };
    let (name, package) = (bin.name, bin.package);
    eprintln!("building {name} (cargo build --profile {profile} -p {package}) ...");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--profile", &profile, "-p", package, "--bin", name])
        .env("CARGO_TARGET_DIR", target_dir)
        .stdout(Stdio::null());
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        cmd.current_dir(dir);
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot run cargo to build {name}"))?;
    anyhow::ensure!(
        status.success(),
        "cargo build -p {package} failed ({status})"
    );
    let built = profile_dir.join(name);
    Ok(built.is_file().then_some(built))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_error_says_how_to_build() {
        std::env::set_var(NODE.env, "/definitely/not/here");
        let err = node_binary().unwrap_err().to_string();
        std::env::remove_var(NODE.env);
        assert!(err.contains("not a file"), "{err}");
    }
}
