//! [`Inner`]: the parts of an open log wired together (open and close); [`LogStore`] is its
//! shared handle and delegates to these parts.
//!
//! [`LogStore`]: crate::store::LogStore

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::committer::Committer;
use crate::config::FlushPolicy;
use crate::config::LogConfig;
use crate::durable::DurableWatch;
use crate::env::Env;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flush_queue::FlushQueue;
use crate::flusher::Flusher;
use crate::inline_flush::InlineFlush;
use crate::install;
use crate::meta::Meta;
use crate::open::load_state;
use crate::recycle::Recycler;
use crate::shared::Shared;
use crate::stage_file::STAGE_FILE;
use crate::trim::Trimmer;
use crate::writer::Writer;

/// The parts of an open log; the flusher and committer threads hold only [`Shared`].
pub(crate) struct Inner {
    /// Root directory.
    pub(crate) dir: PathBuf,
    /// State, meta db, flush waiters, durable watch.
    pub(crate) shared: Arc<Shared>,
    /// Append path and segment preallocation.
    pub(crate) writer: Writer,
    /// Truncate, purge, detach.
    pub(crate) trimmer: Trimmer,
    /// Flush cycles and their thread.
    pub(crate) flusher: Arc<Flusher>,
    /// Committed-id persister.
    pub(crate) committer: Arc<Committer>,
    /// Whether a quiet append flushes on its own thread.
    pub(crate) inline: InlineFlush,
    /// Test hook of the snapshot install swap.
    pub(crate) install_failpoint: install::Failpoint,
    /// The file system the log runs on.
    env: Arc<dyn Env>,
}

impl Inner {
    /// Opens (or creates) the log under `dir`: finishes an interrupted snapshot install,
    /// recovers the state and starts the writer, flusher and committer threads.
    pub(crate) fn open(dir: &Path, config: LogConfig, env: Arc<dyn Env>) -> LogResult<Inner> {
        config.validate()?;
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| LogError::io("create dir", &dir, e))?;
        let meta = Meta::open(&dir.join("meta"))?;
        // What a killed `async` process left only in its write stage goes to its segment
        // first, whatever the policy and the environment are now (`stage_file.rs`).
        crate::stage_file::replay(&dir.join(STAGE_FILE), &dir.join("commitlog"))?;
        install::finish_interrupted(
            env.as_ref(),
            &dir.join("commitlog"),
            &meta,
            config.segment_bytes,
        )?;
        let recycler = Arc::new(Recycler::new(
            env.clone(),
            dir.join("commitlog"),
            config.recycle_segments as usize,
        ));
        let state = load_state(&dir, &config, env.clone(), &meta, recycler)?;
        let shared = Arc::new(Shared {
            durable: DurableWatch::new(state.committed),
            state: Mutex::new(state),
            meta,
            waiters: FlushQueue::default(),
            cold: Default::default(),
        });
        let interval = match config.flush {
            FlushPolicy::Sync => None,
            FlushPolicy::Async => Some(Duration::from_millis(config.flush_interval_ms)),
        };
        let cache_bytes = config.cached_read_bytes();
        let writer = Writer::start(shared.clone(), config, env.clone(), dir.join("commitlog"))?;
        let index_dir = dir.join("raft-index");
        let flusher = Flusher::start(shared.clone(), index_dir.clone(), interval, cache_bytes)?;
        let committer = Committer::start(shared.clone())?;
        Ok(Inner {
            trimmer: Trimmer::new(shared.clone(), flusher.clone(), index_dir),
            dir,
            shared,
            writer,
            flusher,
            committer,
            inline: InlineFlush::default(),
            install_failpoint: install::Failpoint::default(),
            env,
        })
    }

    /// Closes the log: optionally flushes, stops the threads, fails leftover waiters.
    pub(crate) fn close(&self, flush: bool) -> LogResult<()> {
        let shared = &*self.shared;
        if shared.state.lock().closed {
            return Ok(());
        }
        let res = if flush {
            self.flusher.flush_once()
        } else {
            self.env.halt();
            Ok(())
        };
        self.flusher.stop();
        self.committer.stop(flush);
        self.writer.stop();
        shared.state.lock().closed = true;
        shared.waiters.fail_all("log closed");
        if flush {
            let mut st = shared.state.lock();
            st.index
                .sync()
                .map_err(|e| LogError::io("fsync raft index", self.dir.join("raft-index"), e))?;
            // Everything is written and flushed, and nothing writes any more: the next open
            // need not look for a torn tail past this end (see `recovery::recover`).
            let clean = (res.is_ok() && st.failed.is_none()).then_some(st.append_pos);
            drop(st);
            match clean {
                Some(end) => shared.meta.set_clean_end(Some(end))?,
                None => shared.meta.flush()?,
            }
        }
        tracing::info!(dir = %self.dir.display(), "log closed");
        res
    }
}
