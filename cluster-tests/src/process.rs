//! [`ProcCluster`]: real `raftmq-node` processes on 127.0.0.1, for SIGKILL, SIGSTOP/SIGCONT and
//! SIGTERM.
//!
//! The binary is found by [`node_binary`] (`raftmq_cli::locate`: `$RAFTMQ_NODE_BIN`, else
//! `target/<profile>/raftmq-node`, the parent of the test's `deps/`; if it is missing, it is
//! built with `cargo build -p raftmq-node`, same target dir and profile, on first use). Each
//! node gets a TOML config in its data dir; ports are picked below the kernel's ephemeral
//! range, so neither a second pick nor a peer connection's source port can take a node's port
//! before it (re)binds it.

use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::ExitStatus;
use std::process::Stdio;
use std::time::Duration;

pub use raftmq_cli::locate::node_binary;
use raftmq_cli::ports::free_addr;
use raftmq_node::config::FlushPolicy;
use raftmq_node::config::MemberSpec;
use raftmq_node::config::NodeConfig;
use tokio::time::Instant;

use raftmq_client::Client;
use raftmq_client::ClientOptions;

use crate::auth::TestAuth;
use crate::cluster::test_config;
use crate::cluster::unique_cluster_id;
use crate::Security;

/// A cluster of `raftmq-node` processes `1..=n`.
pub struct ProcCluster {
    /// Holds the data dirs and configs.
    pub dir: tempfile::TempDir,
    /// Each node's config (index = id - 1).
    pub configs: Vec<NodeConfig>,
    children: Vec<Option<Child>>,
    bin: PathBuf,
    /// The CA and node certificates when the nodes serve TLS ([`Self::start_tls`],
    /// [`Security::Secure`]).
    pub tls: Option<crate::tls::TestTls>,
    /// The cluster key and root credential when the nodes authenticate
    /// ([`Security::Secure`]); [`Self::client`] signs as root.
    pub auth: Option<TestAuth>,
}

impl ProcCluster {
    /// Starts `flush.len()` node processes bootstrapping one cluster.
    pub fn start(flush: &[FlushPolicy]) -> anyhow::Result<Self> {
        Self::start_inner(flush, false, false, &|_| {})
    }

    /// [`Self::start`] guarded as `security` says ([`Security::Secure`]: TLS, mutual TLS
    /// between the nodes and access-key authentication, as `raftmq cluster up --secure`).
    pub fn start_as(security: Security, flush: &[FlushPolicy]) -> anyhow::Result<Self> {
        let secure = security == Security::Secure;
        Self::start_inner(flush, secure, secure, &|_| {})
    }

    /// [`Self::start`], with `tweak` changing each config first (e.g.
    /// [`crate::auth::TestAuth::apply`]; not the listen addresses).
    pub fn start_with(
        flush: &[FlushPolicy],
        tweak: impl Fn(&mut NodeConfig),
    ) -> anyhow::Result<Self> {
        Self::start_inner(flush, false, false, &tweak)
    }

    /// [`Self::start`] with TLS only (CA and node certificates in the temp dir; see
    /// [`crate::tls::TestTls`]), no authentication.
    pub fn start_tls(flush: &[FlushPolicy]) -> anyhow::Result<Self> {
        Self::start_inner(flush, true, false, &|_| {})
    }

    fn start_inner(
        flush: &[FlushPolicy],
        tls: bool,
        auth: bool,
        tweak: &dyn Fn(&mut NodeConfig),
    ) -> anyhow::Result<Self> {
        crate::init_tracing();
        let bin = node_binary()?;
        let dir = tempfile::tempdir()?;
        let cluster_id = unique_cluster_id("proc");
        let tls = match tls {
            true => Some(crate::tls::TestTls::new(dir.path(), &cluster_id)?),
            false => None,
        };
        let auth = match auth {
            true => Some(TestAuth::new()?),
            false => None,
        };
        let mut members = Vec::new();
        for i in 0..flush.len() {
            members.push(MemberSpec {
                id: i as u64 + 1,
                raft_addr: free_addr()?.to_string(),
                client_addr: free_addr()?.to_string(),
            });
        }
        let mut configs = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let data = dir.path().join(format!("node-{}", m.id));
            let mut cfg = test_config(m.id, &cluster_id, data, flush[i]);
            cfg.raft_listen_addr = m.raft_addr.parse()?;
            cfg.client_listen_addr = m.client_addr.parse()?;
            cfg.rocketmq_listen_addr = Some(free_addr()?);
            cfg.initial_members = members.clone();
            if let Some(t) = &tls {
                t.configure(&mut cfg)?;
            }
            if let Some(a) = &auth {
                a.apply(&mut cfg);
            }
            tweak(&mut cfg);
            configs.push(cfg);
        }
        let mut c = Self {
            dir,
            children: configs.iter().map(|_| None).collect(),
            configs,
            bin,
            tls,
            auth,
        };
        for id in c.ids() {
            c.spawn(id)?;
        }
        Ok(c)
    }

    /// Node ids.
    pub fn ids(&self) -> Vec<u64> {
        (1..=self.configs.len() as u64).collect()
    }

    /// Client addresses of every node.
    pub fn seeds(&self) -> Vec<String> {
        self.configs
            .iter()
            .map(|c| c.client_listen_addr.to_string())
            .collect()
    }

    /// A client library instance seeded with every node, trusting the CA and signing as root
    /// when the cluster is secure; `request_timeout` bounds one attempt.
    pub fn client(&self, request_timeout: Duration) -> anyhow::Result<Client> {
        let opts = ClientOptions {
            credentials: self.auth.as_ref().map(|a| a.admin.clone()),
            request_timeout,
            connect_timeout: Duration::from_millis(300),
            max_attempts: 8,
            backoff_max: Duration::from_millis(300),
            tls: self.tls.as_ref().map(crate::tls::TestTls::client_tls),
            ..ClientOptions::default()
        };
        Ok(Client::new(&self.seeds(), opts)?)
    }

    /// Client address of node `id`.
    pub fn client_addr(&self, id: u64) -> String {
        self.configs[id as usize - 1].client_listen_addr.to_string()
    }

    /// Starts (or restarts) node `id`'s process on its data dir.
    pub fn spawn(&mut self, id: u64) -> anyhow::Result<()> {
        let cfg = &self.configs[id as usize - 1];
        std::fs::create_dir_all(&cfg.data_dir)?;
        let path = cfg.data_dir.join("node.toml");
        std::fs::write(&path, cfg.to_toml_string())?;
        let child = Command::new(&self.bin)
            .arg("--config")
            .arg(&path)
            .arg("--no-metrics")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        self.children[id as usize - 1] = Some(child);
        self.wait_listening(id, Duration::from_secs(30))
    }

    /// Waits until node `id` accepts connections on its client port; fails at once, with its
    /// exit status, if the process exits first (bad config, port taken, refused recovery).
    fn wait_listening(&mut self, id: u64, timeout: Duration) -> anyhow::Result<()> {
        let addr = self.configs[id as usize - 1].client_listen_addr;
        let start = std::time::Instant::now();
        loop {
            let child = self.children[id as usize - 1]
                .as_mut()
                .expect("node process was just spawned");
            if let Some(st) = child.try_wait()? {
                self.children[id as usize - 1] = None;
                anyhow::bail!("node {id} exited at start with {st} (its stderr is above)");
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            anyhow::ensure!(
                start.elapsed() < timeout,
                "node {id} is not listening on {addr} after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self, id: u64) -> i32 {
        let child = self.children[id as usize - 1]
            .as_ref()
            .expect("node process is running");
        i32::try_from(child.id()).expect("pids fit in i32")
    }

    /// SIGHUP node `id` (a TLS node reloads its certificate files).
    pub fn hangup(&self, id: u64) -> anyhow::Result<()> {
        self.signal(id, libc::SIGHUP)
    }

    fn signal(&self, id: u64, sig: i32) -> anyhow::Result<()> {
        // SAFETY: kill(2) on a pid of a child this struct owns and has not reaped.
        let rc = unsafe { libc::kill(self.pid(id), sig) };
        anyhow::ensure!(
            rc == 0,
            "kill({sig}) of node {id}: {}",
            std::io::Error::last_os_error()
        );
        Ok(())
    }

    /// SIGKILL node `id` and reap it.
    pub fn kill9(&mut self, id: u64) -> anyhow::Result<()> {
        self.signal(id, libc::SIGKILL)?;
        if let Some(mut c) = self.children[id as usize - 1].take() {
            c.wait()?;
        }
        Ok(())
    }

    /// SIGSTOP node `id` (it keeps its sockets but answers nothing).
    pub fn pause(&self, id: u64) -> anyhow::Result<()> {
        self.signal(id, libc::SIGSTOP)
    }

    /// SIGCONT node `id`.
    pub fn resume(&self, id: u64) -> anyhow::Result<()> {
        self.signal(id, libc::SIGCONT)
    }

    /// SIGTERM node `id` and wait (up to `timeout`) for its exit status.
    pub async fn terminate(&mut self, id: u64, timeout: Duration) -> anyhow::Result<ExitStatus> {
        self.signal(id, libc::SIGTERM)?;
        let mut child = self.children[id as usize - 1]
            .take()
            .expect("node process is running");
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("node {id} did not exit within {timeout:?} after SIGTERM");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether node `id`'s process is running (not reaped).
    pub fn is_up(&self, id: u64) -> bool {
        self.children[id as usize - 1].is_some()
    }
}

impl Drop for ProcCluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            // SAFETY: as in `signal`; SIGCONT first so a paused child can die.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGCONT);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
