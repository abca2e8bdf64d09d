//! Pop consumption state (RocketMQ 5 `ReceiveMessage` / `AckMessage` /
//! `ChangeInvisibleDuration`): the replicated [`ReceiveTable`] the `Receive`, `Ack` and
//! `ChangeInvisible` commands change on apply ([`crate::sm::receive`]).
//!
//! Per `(group, topic, queue)` it keeps the first offset never handed to the group (`next`)
//! and the messages handed out but not acked yet (in flight), each with its invisibility
//! deadline, delivery attempt and receipt handle (the log index of the entry that last
//! delivered it or moved its deadline). Part of the state machine, the dispatch checkpoint
//! and the snapshot manifest; `BTreeMap`s only, and every clock value comes from the command
//! (the leader stamps `now_ms`), so every replica holds the same table.
//!
//! A delayed message ([`delay`]) not due yet when a `Receive` scans it is parked: in flight
//! with attempt 0 and its delivery time as deadline, so `next` moves on; the first delivery
//! after that time has attempt 1.
//!
//! A FIFO group (the `Receive` says so, stamped by the leader from its setting) gets a queue's
//! messages one delivery at a time: while a delivered message is in flight
//! ([`QueueReceive::has_delivered_inflight`]) nothing new goes out from that queue, only
//! expired ones come back, in offset order.

pub mod delay;
mod table;

pub use table::AckCheck;
pub use table::Inflight;
pub use table::QueueReceive;
pub use table::ReceiveTable;
pub use table::RECEIVE_SCAN_UNITS;
