//! The owned forms of the replicated commands: [`Command`] as the leader builds it and the
//! [`CommitOffset`] it carries (encoded by [`super::format`]; [`super::CommandView`] is the
//! borrowed form apply parses).

use crate::command::pop::Ack;
use crate::command::pop::ChangeInvisible;
use crate::command::pop::Receive;
use crate::dedup::DedupParams;
use crate::message::Message;
use crate::topic::TopicConfig;
use crate::types::QueueId;
use crate::types::QueueOffset;
use crate::users::User;

/// A consumer group's committed progress on one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitOffset {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: QueueId,
    /// Next queue offset the group will consume.
    pub offset: QueueOffset,
}

/// A command as the leader builds it (owned form of [`CommandView`](super::CommandView)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// One or more messages, one Raft entry. Queue ids are chosen by the leader (in each
    /// record). `auto_create_queues: Some(n)` makes apply create a missing topic with `n`
    /// read/write queues (deterministically, on every replica); `None` rejects the batch at
    /// apply time if the topic does not exist.
    SendBatch {
        /// The messages, in order.
        messages: Vec<Message>,
        /// Queue count of a topic created on the fly, if allowed.
        auto_create_queues: Option<u32>,
        /// The dedup window's bounds (the leader's settings), stamped when a message carries
        /// an identity ([`crate::dedup`]); `None`: apply neither looks up nor remembers.
        dedup: Option<DedupParams>,
    },
    /// Create a topic.
    CreateTopic(TopicConfig),
    /// Replace a topic's config.
    UpdateTopic(TopicConfig),
    /// Delete a topic.
    DeleteTopic {
        /// Topic name.
        topic: String,
    },
    /// Commit a consumer group offset. On a queue where the group pops, it also resets the
    /// group's pop state there (the next `Receive` starts at this offset).
    CommitOffset(CommitOffset),
    /// Hand out messages to a group (pop, see [`crate::receive`]).
    Receive(Receive),
    /// Ack popped messages.
    Ack(Ack),
    /// Move a popped message's invisibility deadline (new receipt handle).
    ChangeInvisible(ChangeInvisible),
    /// Add a user or replace the one of that name (its secret sealed by the leader).
    PutUser(User),
    /// Delete a user.
    DeleteUser {
        /// User name.
        name: String,
    },
}

impl Command {
    /// A batch that requires its topics to exist.
    pub fn batch(messages: Vec<Message>) -> Command {
        Command::SendBatch {
            messages,
            auto_create_queues: None,
            dedup: None,
        }
    }
}
