//! [`DispatchState`]: everything `apply` changes, behind one lock shared by the state machine
//! (writer) and the read handle (readers).

use crate::consume_queue::ConsumeQueueSet;
use crate::dedup::DedupWindow;
use crate::error::Result;
use crate::error::StoreError;
use crate::index::IndexStore;
use crate::offsets::ConsumerOffsetTable;
use crate::raft_types::StoredMembership;
use crate::receive::ReceiveTable;
use crate::state::checkpoint::Checkpoint;
use crate::topic::TopicTable;
use crate::types::PhysOffset;
use crate::users::UserTable;
use raftmq_raft_log::types::LogId;

/// The state derived from the committed entries applied so far.
#[derive(Debug)]
pub struct DispatchState {
    /// Every ConsumeQueue.
    pub cqs: ConsumeQueueSet,
    /// The key index.
    pub index: IndexStore,
    /// Replicated topic table.
    pub topics: TopicTable,
    /// Replicated consumer offsets.
    pub offsets: ConsumerOffsetTable,
    /// Replicated pop state. Invariant: for every group and queue in it, `offsets` holds
    /// the state's progress (kept in step by apply).
    pub receive: ReceiveTable,
    /// Replicated dedup window of idempotent sends (see [`crate::dedup`]).
    pub dedup: DedupWindow,
    /// Replicated users (secrets sealed; see [`crate::users`]).
    pub users: UserTable,
    /// Invariant: `last_applied >= checkpoint.last_applied`; every entry up to it is
    /// dispatched (its units are in the ConsumeQueues, maybe not yet flushed).
    pub last_applied: Option<LogId>,
    /// Last applied membership.
    pub membership: StoredMembership,
    /// Invariant: physical end of the last applied normal entry; every unit points below it.
    pub dispatched_phys_end: PhysOffset,
    /// Entries applied since the last checkpoint.
    pub since_checkpoint: u64,
    /// `last_applied` of the newest checkpoint known durable (a background write counts once
    /// it ended).
    pub checkpoint_applied: Option<LogId>,
}

impl DispatchState {
    /// The replicated part as a checkpoint record.
    pub fn to_checkpoint(&self) -> Checkpoint {
        Checkpoint {
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            topics: self.topics.clone(),
            offsets: self.offsets.clone(),
            receive: self.receive.clone(),
            dedup: self.dedup.clone(),
            users: self.users.clone(),
            dispatched_phys_end: self.dispatched_phys_end,
        }
    }

    /// Takes the replicated part from a checkpoint (open, snapshot install).
    pub fn load_checkpoint(&mut self, c: Checkpoint) {
        self.last_applied = c.last_applied;
        self.checkpoint_applied = c.last_applied;
        self.membership = c.membership;
        self.topics = c.topics;
        self.offsets = c.offsets;
        self.receive = c.receive;
        self.dedup = c.dedup;
        self.users = c.users;
        self.dispatched_phys_end = c.dispatched_phys_end;
        self.since_checkpoint = 0;
    }

    /// Flushes ConsumeQueues and index (the log must be flushed by the caller first).
    pub fn flush(&mut self) -> Result<()> {
        self.cqs.flush()?;
        self.index.flush()
    }

    /// Checks the invariants that are cheap to check.
    pub fn validate(&self) -> Result<()> {
        if self.checkpoint_applied > self.last_applied {
            return Err(StoreError::invalid(format!(
                "checkpoint {:?} ahead of last applied {:?}",
                self.checkpoint_applied, self.last_applied
            )));
        }
        for q in self.cqs.iter() {
            if let Some(u) = q.last_unit() {
                if u.end_phys() > self.dispatched_phys_end {
                    return Err(StoreError::invalid(format!(
                        "unit of {}/{} ends at {} past dispatched end {}",
                        q.topic(),
                        q.queue_id(),
                        u.end_phys(),
                        self.dispatched_phys_end
                    )));
                }
            }
        }
        self.topics.validate()?;
        self.receive.validate()?;
        self.dedup.validate()?;
        self.users.validate()?;
        for (g, t, q, s) in self.receive.iter() {
            if self.offsets.get(g, t, q) != Some(s.progress()) {
                return Err(StoreError::invalid(format!(
                    "receive progress {} of {g}/{t}/{q} is not the committed offset {:?}",
                    s.progress(),
                    self.offsets.get(g, t, q)
                )));
            }
        }
        self.index.validate()
    }
}
