//! placeholder
pub mod config;
pub mod env;
pub mod error;
pub mod flusher;
pub mod format;
pub mod import;
pub mod mem_env;
pub mod meta;
pub mod raft_index;
pub mod recovery;
pub mod segments;
pub mod state;
pub mod storage_impl;
pub mod store;
pub mod types;
pub mod writer;
