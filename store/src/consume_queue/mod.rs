//! ConsumeQueues: per `topic/queue_id`, the array of [`CqUnit`]s indexed by queue offset,
//! pointing into the CommitLog. Only committed entries are dispatched here.

pub mod config;
pub mod format;
pub mod queue;
mod recover;
mod segment;
pub mod set;

pub use config::ConsumeQueueConfig;
pub use format::CqUnit;
pub use queue::ConsumeQueue;
pub use queue::PutOutcome;
pub use set::ConsumeQueueSet;
