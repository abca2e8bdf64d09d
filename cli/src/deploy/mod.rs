//! Local deployment: the cluster manifest, per-node configs, node processes.

pub mod certs;
pub mod credentials;
pub mod local;
pub mod lock;
pub mod manifest;
pub mod node_config;
pub mod process;
