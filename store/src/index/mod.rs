//! The key index: RocketMQ-style IndexFiles mapping key hashes to physical offsets.

pub mod config;
mod file;
pub mod format;
pub mod store;

pub use config::IndexConfig;
pub use store::IndexPut;
pub use store::IndexStore;
pub use store::KeyHashFn;
