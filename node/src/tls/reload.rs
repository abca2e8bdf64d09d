//! [`TlsState`]: the node's current TLS [`Material`], replaced whole on reload; [`watch`]
//! reloads it on SIGHUP and when a file's modification time or size changes.
//!
//! New connections (accepted and dialed) take the material current at their start; existing
//! connections keep theirs. A reload that fails (unreadable file, key not matching the
//! certificate, a half-written file) is logged and the old material stays in use: a node never
//! runs without a certificate, and a later change of the files is tried again.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::RwLock;
use std::time::Duration;
use std::time::SystemTime;

use tokio::sync::watch;

use super::material::Material;
use super::material::TlsError;
use crate::config::TlsFiles;

/// The TLS material a node serves and dials with now.
pub struct TlsState {
    files: TlsFiles,
    /// Invariant: always a fully loaded, self-consistent set (never replaced by a failed load).
    current: RwLock<Arc<Material>>,
    /// Incremented on every successful reload (0 = as loaded at start).
    generation: AtomicU64,
}

/// What identifies one version of a file: modification time and length.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &std::path::Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl TlsState {
    /// Loads the files; an error here stops the node from starting.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let m = Material::load(&files)?;
        log_active(&m, 0);
        Ok(Arc::new(Self {
            files,
            current: RwLock::new(Arc::new(m)),
            generation: AtomicU64::new(0),
        }))
    }

    /// The material for a connection starting now.
    pub fn current(&self) -> Arc<Material> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// How many reloads succeeded.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Reads the files again; on success new connections use them, on error the old
    /// material stays (the caller logs the error).
    pub fn reload(&self) -> Result<(), TlsError> {
        let m = Material::load(&self.files)?;
        let mut cur = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *cur = Arc::new(m);
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        log_active(&cur, generation);
        Ok(())
    }

    /// The files this state loads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    fn stamps(&self) -> [Stamp; 3] {
        [
            stamp(&self.files.cert),
            stamp(&self.files.key),
            stamp(&self.files.ca),
        ]
    }
}

impl std::fmt::Debug for TlsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsState")
            .field("files", &self.files)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

fn log_active(m: &Material, generation: u64) {
    tracing::info!(
        serial = %m.leaf.serial_hex,
        not_after = %m.leaf.not_after,
        uris = ?m.leaf.uris,
        generation,
        "TLS certificate active"
    );
}

/// Reloads `state` on SIGHUP and, with `poll` > 0, when a file changed; until `stop`.
pub async fn watch(state: Arc<TlsState>, poll: Duration, mut stop: watch::Receiver<bool>) {
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; TLS files reload only on change");
            None
        }
    };
    let mut seen = state.stamps();
    let mut tick = tokio::time::interval(if poll.is_zero() {
        Duration::from_secs(3600)
    } else {
        poll
    });
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = stop.changed() => return,
            Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
            _ = tick.tick(), if !poll.is_zero() => {
                let now = state.stamps();
                if now == seen {
                    continue;
                }
                "file change"
            }
        };
        if *stop.borrow() {
            return;
        }
        // Stamped before reading: a write after this point changes the stamp again, so a
        // half-written set that fails now is retried once the writer is done.
        seen = state.stamps();
        match state.reload() {
            Ok(()) => tracing::info!(reason = why, "TLS files reloaded"),
            Err(e) => {
                tracing::error!(reason = why, error = %e, "TLS reload failed; keeping the current certificate")
            }
        }
    }
}
