//! Snapshot install: the receiver replaces its whole log with the snapshot's segments, staged
//! as files (so memory stays bounded however large the retained log is) and moved into
//! `commitlog/`; the receiver then holds the sender's bytes at the same physical offsets and
//! continues appending exactly where the sender's log ended. The only install path.
//!
//! **Crash safety.** The swap is recorded in `meta/` ([`InstallSwap`], durable) before the
//! first old segment goes, and cleared only after the new log start, purged id and flush
//! checkpoint are durable. [`finish_interrupted`] runs at open: a recorded swap is finished
//! from wherever it stopped (every step is idempotent), so a crash leaves the old log (before
//! the record) or the new one (after it), never a mix. The staged files and their directory
//! are fsynced before the record, so a staged segment is either still staged or already
//! moved in.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::env::Env;
use crate::error::LogError;
use crate::error::LogResult;
use crate::flusher::Flusher;
use crate::format::ENTRY_HEADER_LEN;
use crate::meta::FlushCheckpoint;
use crate::meta::InstallSwap;
use crate::meta::Meta;
use crate::open::load_state;
use crate::segments::parse_segment_name;
use crate::segments::segment_name;
use crate::types::LogId;
use crate::types::RawPhys;
use crate::writer::Writer;

/// Test hook: makes the swap fail after its n-th I/O step, as a crash there would.
#[derive(Debug, Default)]
pub struct Failpoint {
    /// Steps left before the failure; 0: off.
    left: AtomicU64,
}

impl Failpoint {
    /// Fails after the `n`-th next step (`None`: never).
    pub fn set(&self, n: Option<u64>) {
        self.left.store(n.unwrap_or(0), Ordering::SeqCst);
    }

    /// Counts one finished I/O step; fails when the counter reaches zero.
    fn step(&self, what: &'static str) -> LogResult<()> {
        let hit = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok_and(|n| n == 1);
        if hit {
            let e = std::io::Error::other("install failpoint");
            return Err(LogError::io(what, "failpoint", e));
        }
        Ok(())
    }
}

/// Names of the entries of `dir` (none if it does not exist).
fn list(env: &dyn Env, dir: &Path) -> LogResult<Vec<String>> {
    match env.list(dir) {
        Ok(names) => Ok(names),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(LogError::io("list", dir, e)),
    }
}

/// Starts of the segment files in `staged`, checked aligned and contiguous.
fn staged_starts(env: &dyn Env, staged: &Path, seg_bytes: u64) -> LogResult<Vec<RawPhys>> {
    let mut starts = Vec::new();
    for name in env
        .list(staged)
        .map_err(|e| LogError::io("list", staged, e))?
    {
        let start = parse_segment_name(&name)
            .ok_or_else(|| LogError::InvalidArgument(format!("unexpected staged file {name}")))?;
        starts.push(start);
    }
    starts.sort_unstable();
    for (i, s) in starts.iter().enumerate() {
        if s % seg_bytes != 0 || *s != starts[0] + i as u64 * seg_bytes {
            return Err(LogError::InvalidArgument(format!(
                "staged segment {s} is not aligned or not contiguous"
            )));
        }
    }
    if starts.is_empty() {
        return Err(LogError::InvalidArgument("no segments to import".into()));
    }
    Ok(starts)
}

/// Replaces the whole log under `dir` with the segment files in `staged` (see
/// `LogStore::replace_from_files`): between flush cycles, under the log lock, refused below
/// the committed id; any error after the swap is recorded stops the log (the next open
/// finishes the swap).
pub fn replace_from_files(
    writer: &Writer,
    flusher: &Flusher,
    failpoint: &Failpoint,
    dir: &Path,
    staged: &Path,
    purged: LogId,
    end: RawPhys,
) -> LogResult<()> {
    let shared = writer.shared();
    let config = writer.config();
    let env = writer.env().as_ref();
    let seg_bytes = config.segment_bytes;
    let starts = staged_starts(env, staged, seg_bytes)?;
    env.sync_dir(staged)
        .map_err(|e| LogError::io("fsync dir", staged, e))?;
    failpoint.step("fsync staged dir")?;
    let _cycle = flusher.lock_cycle();
    flusher.flush_locked()?;
    let mut st = shared.state.lock();
    st.check_writable()?;
    if st.committed.is_some_and(|c| c > purged) {
        let c = st.committed;
        return Err(LogError::InvalidArgument(format!(
            "snapshot {purged} is below the committed id {c:?}"
        )));
    }
    // The preallocator must not create an old-log segment among the new ones.
    writer.discard_prepared_segment();
    st.recent.clear();
    let swap = InstallSwap {
        staged: staged.to_path_buf(),
        start: starts[0],
        segments: starts.len() as u64,
        end,
        purged,
    };
    // From here on the old entries go: none past the snapshot counts as flushed any more.
    shared.durable.note_log_cut(Some(purged.index));
    let result = (|| {
        shared.meta.set_install_swap(Some(&swap))?;
        failpoint.step("record install swap")?;
        finish_swap(
            env,
            st.segments.dir(),
            &shared.meta,
            &swap,
            seg_bytes,
            failpoint,
        )?;
        let epoch = st.checkpoint_epoch + 1;
        let recycler = st.segments.recycler().clone();
        *st = load_state(dir, config, writer.env().clone(), &shared.meta, recycler)?;
        st.checkpoint_epoch = epoch;
        // A tail too short for a record header is skipped by recovery: the next append
        // goes to the next segment either way.
        let short_tail = st.append_pos > end
            && st.append_pos % seg_bytes == 0
            && st.append_pos - end < ENTRY_HEADER_LEN as u64;
        if st.append_pos != end && !short_tail {
            return Err(LogError::InvalidArgument(format!(
                "imported segments end at {}, expected {end}",
                st.append_pos
            )));
        }
        Ok(())
    })();
    if let Err(e) = result {
        drop(st);
        return Err(shared.fail(e));
    }
    tracing::info!(min_phys_offset = st.min_phys, phys_offset = st.append_pos, purged = %purged,
        "log replaced from staged segment files");
    writer.request_next_segment(&st);
    st.debug_validate();
    Ok(())
}

/// At open, before recovery: finishes a swap a crash interrupted (see the module docs).
pub fn finish_interrupted(
    env: &dyn Env,
    seg_dir: &Path,
    meta: &Meta,
    seg_bytes: u64,
) -> LogResult<()> {
    let Some(swap) = meta.install_swap()? else {
        return Ok(());
    };
    tracing::warn!(min_phys_offset = swap.start, phys_offset = swap.end, purged = %swap.purged,
        "finishing a snapshot install interrupted by a crash");
    finish_swap(env, seg_dir, meta, &swap, seg_bytes, &Failpoint::default())
}

/// The swap from any intermediate state: old segments out, staged ones in, old raft index
/// removed, new log start, purged id and checkpoint, record cleared. Each step is idempotent.
fn finish_swap(
    env: &dyn Env,
    seg_dir: &Path,
    meta: &Meta,
    swap: &InstallSwap,
    seg_bytes: u64,
    fp: &Failpoint,
) -> LogResult<()> {
    let new: BTreeSet<RawPhys> = (0..swap.segments)
        .map(|i| swap.start + i * seg_bytes)
        .collect();
    let staged: BTreeSet<RawPhys> = list(env, &swap.staged)?
        .iter()
        .filter_map(|n| parse_segment_name(n))
        .collect();
    let present = list(env, seg_dir)?;
    for name in &present {
        let old = parse_segment_name(name).is_some_and(|s| !new.contains(&s));
        if old || name.ends_with(".tmp") {
            let p = seg_dir.join(name);
            env.remove(&p)
                .map_err(|e| LogError::io("remove segment", p, e))?;
            fp.step("remove old segment")?;
        }
    }
    let sync = |fp: &Failpoint| {
        env.sync_dir(seg_dir)
            .map_err(|e| LogError::io("fsync dir", seg_dir, e))?;
        fp.step("fsync dir")
    };
    sync(fp)?;
    for s in &new {
        let to = seg_dir.join(segment_name(*s));
        if staged.contains(s) {
            let from = swap.staged.join(segment_name(*s));
            env.rename(&from, &to)
                .map_err(|e| LogError::io("rename segment", &to, e))?;
            fp.step("rename segment")?;
        } else if !present.contains(&segment_name(*s)) {
            return Err(LogError::Corruption {
                file: to,
                offset: 0,
                reason: "snapshot install cannot finish: segment neither staged nor moved in"
                    .into(),
            });
        }
    }
    sync(fp)?;
    // The old log's raft index must not stand in for the new segments at open.
    if let Some(root) = seg_dir.parent() {
        let index = root.join("raft-index").join("index");
        env.remove(&index)
            .map_err(|e| LogError::io("remove raft index", index, e))?;
        fp.step("remove raft index")?;
    }
    meta.set_log_start(swap.start)?;
    fp.step("set log start")?;
    meta.set_purged(&swap.purged)?;
    fp.step("set purged")?;
    let cp = FlushCheckpoint {
        phys_end: swap.end,
        log_id: None,
    };
    meta.set_checkpoint(&cp, true)?;
    fp.step("set checkpoint")?;
    meta.set_install_swap(None)?;
    fp.step("clear install swap")
}
