//! placeholder
mod codec;
pub mod command;
pub mod error;
pub mod hash;
pub mod limits;
pub mod message;
pub mod topic;
pub mod types;

pub use error::Result;
pub use error::StoreError;
