//! [`Manifest`]: `<dir>/cluster.toml`, the record of a local cluster deployed by `raftmq cluster
//! up`: every node's id, addresses, files and the pid of its running process.
//!
//! Invariant: node ids are unique; `pid` is set only while the CLI believes the process runs
//! (it is re-checked against the OS before use, see [`super::process::is_running`]).
//!
//! Concurrency: every change goes through [`Manifest::update`] (or [`Manifest::save`]), which
//! holds the directory's [`ManifestLock`] across re-reading the file, changing it and writing
//! it, so commands running at once never lose each other's pids. The file is replaced
//! atomically: a temp file of this process, fsynced, renamed over it, the directory fsynced.

use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;
use serde::Serialize;

use super::lock::ManifestLock;

/// File name of the manifest inside the cluster directory.
pub const MANIFEST_FILE: &str = "cluster.toml";

/// One node of a local cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeEntry {
    /// Raft node id.
    pub id: u64,
    /// host:port of the peer (Raft) service.
    pub raft_addr: String,
    /// host:port of the client service.
    pub client_addr: String,
    /// host:port of the metrics endpoint.
    pub metrics_addr: String,
    /// host:port of the RocketMQ 5 protocol (what the official RocketMQ clients dial); empty
    /// in a manifest written before raftmq spoke it.
    #[serde(default)]
    pub rocketmq_addr: String,
    /// `sync` or `async`.
    pub flush_policy: String,
    /// The node's directory (`<dir>/node-N`): config, log and data live here.
    pub node_dir: PathBuf,
    /// The node's config file (`<node_dir>/node.toml`).
    pub config: PathBuf,
    /// The node's log file (`<node_dir>/node.log`).
    pub log: PathBuf,
    /// Pid of the running process; unset when stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// The whole local cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Manifest {
    /// The cluster id every node was configured with.
    pub cluster_id: String,
    /// The cluster directory (absolute).
    pub dir: PathBuf,
    /// Base port: node N uses base+N (Raft), base+100+N (client), base+200+N (metrics);
    /// 0 when the ports were picked free at random.
    pub base_port: u16,
    /// CommitLog segment size of every node.
    pub segment_bytes: u64,
    /// The `cluster up --set KEY=VALUE` settings, as given; in every node's config, also of a
    /// node added later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_settings: Vec<String>,
    /// The nodes, by id.
    pub nodes: Vec<NodeEntry>,
    /// Access key every `raftmq --cluster ...` command signs with (`cluster up --secure`: the
    /// admin credential); `--access-key` / `RAFTMQ_ACCESS_KEY` override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key: Option<String>,
    /// File holding the secret key of `access-key` (mode 0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// The cluster CA certificate of a `cluster up --secure` cluster (its nodes serve TLS;
    /// the `raftmq` command's clients trust this CA). None: plaintext.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
}

impl Manifest {
    /// Reads a manifest file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read cluster manifest {} (start a cluster with `raftmq cluster up`, or \
                 give --cluster <dir>/cluster.toml or --servers host:port,...)",
                path.display()
            )
        })?;
        let m: Manifest = toml::from_str(&text)
            .with_context(|| format!("cannot parse cluster manifest {}", path.display()))?;
        m.validate()
            .with_context(|| format!("bad cluster manifest {}", path.display()))?;
        Ok(m)
    }

    /// Writes the manifest to `<dir>/cluster.toml` under the directory's lock, replacing
    /// whatever is there (for a new cluster; changes to an existing one use [`Self::update`]).
    pub fn save(&self) -> anyhow::Result<()> {
        let _lock = ManifestLock::acquire(&self.dir)?;
        self.write_atomic()
    }

    /// Under the directory's lock: re-reads the manifest from disk (when the file exists),
    /// applies `change` to it and, if `change` succeeds and changed it (or there was no file),
    /// writes it back. `self` is then the re-read manifest as `change` left it; an error of
    /// `change` leaves the file as it was.
    pub fn update<T>(
        &mut self,
        change: impl FnOnce(&mut Manifest) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let _lock = ManifestLock::acquire(&self.dir)?;
        let path = self.path();
        let existed = path.exists();
        if existed {
            *self = Self::load(&path)?;
        }
        let before = self.clone();
        let out = change(self)?;
        // Nothing changed: no write (and no fsync) at all.
        if !existed || *self != before {
            self.write_atomic()?;
        }
        Ok(out)
    }

    /// Temp file (named after this process, so two writers never share one), fsync, rename
    /// over `cluster.toml`, fsync of the directory. The caller holds the lock.
    fn write_atomic(&self) -> anyhow::Result<()> {
        use std::io::Write;
        self.validate()?;
        let path = self.path();
        let tmp = self
            .dir
            .join(format!("{MANIFEST_FILE}.tmp.{}", std::process::id()));
        let text = toml::to_string(self).context("cannot encode the cluster manifest")?;
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot replace {}", path.display()))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot fsync directory {}", self.dir.display()))?;
        Ok(())
    }

    /// `<dir>/cluster.toml`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(MANIFEST_FILE)
    }

    /// Checks that node ids are unique and non-zero.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut ids = std::collections::BTreeSet::new();
        for n in &self.nodes {
            anyhow::ensure!(n.id != 0, "node id 0 is not allowed");
            anyhow::ensure!(ids.insert(n.id), "node id {} appears twice", n.id);
        }
        Ok(())
    }

    /// The node with this id.
    pub fn node(&self, id: u64) -> anyhow::Result<&NodeEntry> {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .with_context(|| format!("no node {id} in the cluster (ids: {:?})", self.ids()))
    }

    /// The node with this id, mutably.
    pub fn node_mut(&mut self, id: u64) -> anyhow::Result<&mut NodeEntry> {
        let ids = self.ids();
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .with_context(|| format!("no node {id} in the cluster (ids: {ids:?})"))
    }

    /// Every node id.
    pub fn ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Every node's client address.
    pub fn client_addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.client_addr.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(dir: &Path) -> Manifest {
        let nodes = (1..=3)
            .map(|id| NodeEntry {
                id,
                raft_addr: format!("127.0.0.1:{}", 9100 + id),
                client_addr: format!("127.0.0.1:{}", 9200 + id),
                metrics_addr: format!("127.0.0.1:{}", 9300 + id),
                rocketmq_addr: format!("127.0.0.1:{}", 9400 + id),
                flush_policy: "sync".into(),
                node_dir: dir.join(format!("node-{id}")),
                config: dir.join(format!("node-{id}/node.toml")),
                log: dir.join(format!("node-{id}/node.log")),
                pid: (id != 2).then_some(1000 + id as u32),
            })
            .collect();
        Manifest {
            cluster_id: "raftmq".into(),
            dir: dir.to_path_buf(),
            base_port: 9100,
            segment_bytes: 1 << 30,
            node_settings: vec!["disk-reject-ratio=0.95".into()],
            nodes,
            access_key: None,
            secret_file: None,
            tls_ca: Some(dir.join("tls/ca.crt")),
        }
    }

    #[test]
    fn round_trip_through_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let m = sample(tmp.path());
        m.save().unwrap();
        let text = std::fs::read_to_string(m.path()).unwrap();
        assert!(text.contains("client-addr = \"127.0.0.1:9201\""), "{text}");
        assert!(text.contains("[[nodes]]"), "{text}");
        let back = Manifest::load(&m.path()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.node(2).unwrap().pid, None);
        assert_eq!(back.client_addrs().len(), 3);
    }

    #[test]
    fn duplicate_ids_and_missing_files_are_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = sample(tmp.path());
        m.nodes[1].id = 1;
        assert!(m.save().unwrap_err().to_string().contains("appears twice"));
        let err = Manifest::load(&tmp.path().join("nope.toml")).unwrap_err();
        assert!(format!("{err:#}").contains("raftmq cluster up"));
        assert!(sample(tmp.path()).node(9).is_err());
    }

    #[test]
    fn update_rereads_the_file_so_a_stale_copy_loses_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = sample(tmp.path());
        a.save().unwrap();
        // Two commands loaded the same file; each records the pid of the node it started.
        let mut b = a.clone();
        a.update(|m| {
            m.node_mut(2)?.pid = Some(7002);
            Ok(())
        })
        .unwrap();
        b.update(|m| {
            m.node_mut(3)?.pid = Some(7003);
            Ok(())
        })
        .unwrap();
        let back = Manifest::load(&a.path()).unwrap();
        assert_eq!(back.node(2).unwrap().pid, Some(7002));
        assert_eq!(back.node(3).unwrap().pid, Some(7003));
        assert_eq!(back, b);
        // A failed change writes nothing.
        let err = b.update(|m| -> anyhow::Result<()> {
            m.node_mut(1)?.pid = None;
            anyhow::bail!("no")
        });
        assert!(err.is_err());
        assert_eq!(
            Manifest::load(&a.path()).unwrap().node(1).unwrap().pid,
            Some(1001)
        );
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
