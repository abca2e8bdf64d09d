//! placeholder
pub mod types;
