//! openraft's storage suite with the real CommitLog and this state machine.

mod common;

use openraft::testing::log::StoreBuilder;
use openraft::testing::log::Suite;
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_store::LogStore;
use raftmq_store::StateMachine;
use raftmq_store::TypeConfig;

struct Builder {
    flush: FlushPolicy,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = |e: std::io::Error| StorageError::read(TypeConfig::err_from_error(&e));
        let cfg = LogConfig {
            flush: self.flush,
            flush_interval_ms: 5,
            ..common::log_config(4096)
        };
        let log = LogStore::open(dir.path(), cfg).map_err(|e| err(e.into()))?;
        let (_store, sm) = raftmq_store::open(dir.path(), common::small_config(), log.clone())
            .map_err(|e| err(e.into()))?;
        Ok((dir, log, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_with_commitlog_and_state_machine() -> anyhow::Result<()> {
    Suite::test_all(Builder {
        flush: FlushPolicy::Sync,
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_with_async_flush() -> anyhow::Result<()> {
    Suite::test_all(Builder {
        flush: FlushPolicy::Async,
    })
    .await?;
    Ok(())
}
