//! placeholder
mod codec;
pub mod command;
pub mod consume_queue;
pub mod error;
pub mod filter;
pub mod hash;
pub mod index;
pub mod limits;
mod mapped_file;
pub mod message;
pub mod topic;
pub mod types;

pub use error::Result;
pub use error::StoreError;
