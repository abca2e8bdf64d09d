//! What the state machine (writer), the read handle and snapshots share: `Shared` (config,
//! log, the state lock, caches and test hooks), the [`DispatchState`] behind its lock and the
//! durable [`Checkpoint`] of it, written in the background by `CheckpointWriter`.
//!
//! # Layers
//!
//! Dependencies between the store's own modules point one way, top to bottom:
//!
//! 1. `open` (recovery; builds the two halves below);
//! 2. [`crate::sm`] (the openraft state machine; hands out [`crate::Store`] handles);
//! 3. `store` ([`crate::Store`]: every method of the read handle, delegating to the next layer);
//! 4. [`crate::read`], `receive_read`, [`crate::retention`], [`crate::snapshot`] (work on
//!    `&Shared`);
//! 5. this module;
//! 6. the parts: ConsumeQueue, index, topics, offsets, pop state ([`crate::receive`]),
//!    message and command formats, config, `paths`, errors.
//!
//! Files inside a module import their siblings by path, never through their `mod.rs`, which
//! only declares and re-exports.

pub mod checkpoint;
mod checkpoint_writer;
pub mod dispatch_state;
mod shared;

pub use checkpoint::Checkpoint;
pub use dispatch_state::DispatchState;
pub use shared::InstallStop;
pub(crate) use shared::Shared;
