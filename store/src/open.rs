//! [`open`]: recovery at open. Cuts units past the recovered CommitLog end after an unclean
//! shutdown, loads the checkpoint, finishes an interrupted snapshot install, and returns the
//! two halves over one [`Shared`]: the read handle [`Store`] and the [`StateMachine`].

use std::path::Path;
use std::sync::Arc;

use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueSet;
use crate::error::Result;
use crate::error::StoreError;
use crate::index::IndexStore;
use crate::index::KeyHashFn;
use crate::mapped_file::sync_dir;
use crate::paths::abort_path;
use crate::paths::checkpoint_path;
use crate::paths::consume_queue_dir;
use crate::paths::index_dir;
use crate::paths::intent_path;
use crate::raft_types::LogStore;
use crate::sm::StateMachine;
use crate::snapshot::remove_leftovers;
use crate::snapshot::resume_install;
use crate::state::Checkpoint;
use crate::state::DispatchState;
use crate::state::Shared;
use crate::store::Store;
use crate::types::PhysOffset;

/// Opens the state machine over an opened CommitLog (same data dir). Recovery happens here:
/// if the abort marker is present (unclean shutdown), ConsumeQueue and index units at or past
/// the recovered CommitLog end are cut; openraft then re-applies the committed entries after
/// the checkpoint's last applied id, which re-dispatch handles idempotently. A snapshot install
/// interrupted after its log swap is run again from its pending file (see `snapshot/intent.rs`).
pub fn open(data_dir: &Path, config: StoreConfig, log: LogStore) -> Result<(Store, StateMachine)> {
    open_with_hasher(data_dir, config, log, crate::hash::key_hash)
}

/// [`open`] with a given key hash (tests force hash collisions with it).
#[doc(hidden)]
pub fn open_with_hasher(
    data_dir: &Path,
    config: StoreConfig,
    log: LogStore,
    hasher: KeyHashFn,
) -> Result<(Store, StateMachine)> {
    config.validate()?;
    std::fs::create_dir_all(data_dir).map_err(|e| StoreError::io("create dir", data_dir, e))?;
    let unclean = abort_path(data_dir).exists();
    remove_leftovers(data_dir)?;
    // An interrupted install swapped the log under the old checkpoint: it is finished below.
    let install_pending = intent_path(data_dir).exists();
    let state = recover_state(data_dir, &config, &log, hasher, unclean, install_pending)?;
    create_abort_marker(data_dir)?;
    tracing::info!(data_dir = %data_dir.display(), unclean, last_applied = ?state.last_applied,
        "store opened");
    let shared = Arc::new(Shared::new(data_dir.to_owned(), config, log, state));
    resume_install(&shared)?;
    Ok((Store::new(shared.clone()), StateMachine::new(shared)))
}

/// Opens ConsumeQueues and index, loads the checkpoint and, after an unclean shutdown, cuts
/// units at or past the recovered CommitLog end. With `install_pending` the checkpoint may
/// describe the log an interrupted install replaced; the install is run again right after.
fn recover_state(
    data_dir: &Path,
    config: &StoreConfig,
    log: &LogStore,
    hasher: KeyHashFn,
    unclean: bool,
    install_pending: bool,
) -> Result<DispatchState> {
    let mut cqs =
        ConsumeQueueSet::open(&consume_queue_dir(data_dir), config.consume_queue.clone())?;
    let mut index =
        IndexStore::open_with_hasher(&index_dir(data_dir), config.index.clone(), hasher)?;
    let checkpoint = Checkpoint::load(data_dir)?;
    let w = log.watermarks();
    if unclean {
        let end = w.appended_phys_end;
        let cut_units = cqs.truncate_phys_beyond(end)?;
        let cut_keys = index.truncate_phys_beyond(end)?;
        tracing::warn!(
            phys_offset = end.get(),
            cut_units,
            cut_keys,
            "unclean shutdown: units past the recovered commitlog end cut"
        );
    }
    if !install_pending {
        // Retention removes ConsumeQueue and index files only whole, so a reopened queue would
        // start at its first file's first unit, below the log's start: a pull there found the
        // record gone and answered OffsetTooSmall with that same minimum (a client following it
        // went round in circles). What retention set before the restart, again.
        cqs.delete_below_phys(w.min_phys_offset)?;
        index.delete_files_below(w.min_phys_offset)?;
    }
    if !install_pending && checkpoint.dispatched_phys_end > w.appended_phys_end {
        return Err(StoreError::corruption(
            checkpoint_path(data_dir).display().to_string(),
            0,
            format!(
                "checkpoint covers phys {} but the commitlog ends at {}",
                checkpoint.dispatched_phys_end, w.appended_phys_end
            ),
        ));
    }
    let mut state = DispatchState {
        cqs,
        index,
        topics: Default::default(),
        offsets: Default::default(),
        receive: Default::default(),
        dedup: Default::default(),
        users: Default::default(),
        last_applied: None,
        membership: Default::default(),
        dispatched_phys_end: PhysOffset::ZERO,
        since_checkpoint: 0,
        checkpoint_applied: None,
    };
    state.load_checkpoint(checkpoint);
    // Units dispatched after the checkpoint may exist (they will be replayed); the dispatched
    // end must cover them.
    let unit_end = state
        .cqs
        .iter()
        .filter_map(|q| q.last_unit())
        .map(|u| u.end_phys())
        .max();
    state.dispatched_phys_end = state
        .dispatched_phys_end
        .max(unit_end.unwrap_or(PhysOffset::ZERO));
    Ok(state)
}

fn create_abort_marker(data_dir: &Path) -> Result<()> {
    let p = abort_path(data_dir);
    std::fs::File::create(&p).map_err(|e| StoreError::io("create", &p, e))?;
    sync_dir(data_dir)
}
