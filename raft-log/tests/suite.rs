//! openraft's storage test suite against the real on-disk log.

mod common;

use common::MemStateMachine;
use common::TestConfig;
use openraft::testing::log::StoreBuilder;
use openraft::testing::log::Suite;
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;
use raftmq_raft_log::config::FlushPolicy;
use raftmq_raft_log::config::LogConfig;
use raftmq_raft_log::store::LogStore;

struct Builder {
    flush: FlushPolicy,
}

impl StoreBuilder<TestConfig, LogStore<TestConfig>, MemStateMachine, tempfile::TempDir>
    for Builder
{
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore<TestConfig>, MemStateMachine), StorageError<TestConfig>>
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            segment_bytes: 4096,
            flush: self.flush,
            flush_interval_ms: 5,
            ..LogConfig::default()
        };
        let store = LogStore::open(dir.path(), config).map_err(|e| {
            StorageError::read(TestConfig::err_from_error(&std::io::Error::from(e)))
        })?;
        Ok((dir, store, MemStateMachine::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_sync_policy() -> anyhow::Result<()> {
    Suite::test_all(Builder {
        flush: FlushPolicy::Sync,
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_async_policy() -> anyhow::Result<()> {
    Suite::test_all(Builder {
        flush: FlushPolicy::Async,
    })
    .await?;
    Ok(())
}
