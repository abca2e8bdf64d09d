//! Dispatch (reput): applying one committed entry to the [`DispatchState`].
//!
//! Deterministic: the result depends only on the entry, its physical offset and the state
//! (never on node-local configuration or clocks), so every replica computes the same queue
//! offsets and the same responses. The pop commands go to [`crate::sm::receive`], which also
//! reads committed records (exact tags) and names its one node-local input (retention).
//! Idempotent: a message whose unit already sits in its queue keeps its queue offset and is
//! answered with it (replay after a crash). A batch with a dedup trailer checks each
//! identified message against the [`crate::dedup::DedupWindow`] first: a retry of a send
//! still in the window is not dispatched and is answered with the original result.

use raftmq_raft_log::format::payload_offset;
use raftmq_raft_log::types::LogId;

use crate::command::BatchMessage;
use crate::command::CommandView;
use crate::dedup::DedupParams;
use crate::dedup::Identity;
use crate::dedup::StoredSend;
use crate::dedup::Unseen;
use crate::error::Result;
use crate::limits::validate_topic_name;
use crate::raft_types::ApplyResponse;
use crate::raft_types::LogStore;
use crate::raft_types::MessageAck;
use crate::raft_types::RejectCode;
use crate::sm::receive::apply_ack;
use crate::sm::receive::apply_change_invisible;
use crate::sm::receive::apply_receive;
use crate::state::DispatchState;
use crate::topic::TopicConfig;
use crate::types::PhysOffset;

fn reject(code: RejectCode, message: String) -> ApplyResponse {
    ApplyResponse::Rejected { code, message }
}

/// Applies a normal entry at `entry_phys` whose payload is `payload`. `log` is the
/// CommitLog the state's units point into (a `Receive` reads exact tags from it).
pub fn apply_normal(
    st: &mut DispatchState,
    log: &LogStore,
    log_id: LogId,
    entry_phys: PhysOffset,
    payload: &[u8],
) -> Result<ApplyResponse> {
    let entry_end = payload_offset(entry_phys).advance(payload.len() as u64);
    // The payload is this node's log entry at `entry_phys` (the caller checked): the log's
    // record CRC covers it.
    let cmd = match CommandView::parse_logged(payload) {
        Ok(c) => c,
        Err(e) => {
            // The leader only proposes encoded commands; a payload that does not parse is
            // refused identically everywhere instead of stopping every replica.
            tracing::error!(log_index = log_id.index, phys_offset = entry_phys.get(), error = %e,
                "committed entry does not decode; rejected");
            return Ok(reject(RejectCode::Invalid, e.to_string()));
        }
    };
    let resp = match cmd {
        CommandView::SendBatch {
            messages,
            auto_create_queues,
            dedup,
        } => {
            let batch = Batch {
                log_id,
                entry_phys,
                auto_create_queues,
                dedup,
            };
            apply_batch(st, &batch, &messages)?
        }
        CommandView::CreateTopic(cfg) => match st.topics.create(cfg.clone()) {
            Ok(()) => ApplyResponse::Topic(cfg),
            Err(e) => reject(RejectCode::TopicExists, e.to_string()),
        },
        CommandView::UpdateTopic(cfg) => match st.topics.update(cfg.clone()) {
            Ok(_) => ApplyResponse::Topic(cfg),
            Err(e) => reject(RejectCode::NoSuchTopic, e.to_string()),
        },
        CommandView::DeleteTopic { topic } => match st.topics.delete(&topic) {
            Ok(_) => {
                st.cqs.remove_topic(&topic)?;
                st.offsets.remove_topic(&topic);
                st.receive.remove_topic(&topic);
                st.dedup.remove_topic(&topic);
                ApplyResponse::TopicDeleted(topic)
            }
            Err(e) => reject(RejectCode::NoSuchTopic, e.to_string()),
        },
        // Only for an existing queue (the leader checked; the topic may have gone since):
        // the offset table never holds client-chosen names of nothing.
        CommandView::CommitOffset(c) => match st.topics.get(&c.topic) {
            None => reject(
                RejectCode::NoSuchTopic,
                format!("topic '{}' does not exist", c.topic),
            ),
            Some(t) if !c.queue_id.is_below(t.queue_count()) => reject(
                RejectCode::NoSuchQueue,
                format!("queue {} of topic '{}' does not exist", c.queue_id, c.topic),
            ),
            Some(_) => {
                st.offsets.commit(&c);
                st.receive.remove_queue(&c.group, &c.topic, c.queue_id);
                ApplyResponse::OffsetCommitted
            }
        },
        CommandView::Receive(r) => apply_receive(st, log, log_id, entry_phys, &r)?,
        CommandView::Ack(a) => apply_ack(st, &a),
        CommandView::ChangeInvisible(c) => apply_change_invisible(st, log_id, &c),
        CommandView::PutUser(u) => {
            let name = u.name.clone();
            match st.users.put(u) {
                Ok(()) => ApplyResponse::UserPut(name),
                Err(e) => reject(RejectCode::Invalid, e.to_string()),
            }
        }
        CommandView::DeleteUser { name } => match st.users.delete(&name) {
            Ok(_) => ApplyResponse::UserDeleted(name),
            Err(e) => reject(RejectCode::NoSuchUser, e.to_string()),
        },
    };
    st.dispatched_phys_end = st.dispatched_phys_end.max(entry_end);
    Ok(resp)
}

/// Checks every message of a batch against the topic table; returns the topics to create.
fn check_batch(
    st: &DispatchState,
    messages: &[BatchMessage<'_>],
    auto_create_queues: Option<u32>,
) -> std::result::Result<Vec<TopicConfig>, ApplyResponse> {
    let mut create: Vec<TopicConfig> = Vec::new();
    for m in messages {
        let (topic, q) = (m.view.topic, m.view.queue_id);
        let cfg = match st.topics.get(topic) {
            Some(cfg) => cfg,
            None => match (auto_create_queues, create.iter().find(|c| c.name == topic)) {
                (_, Some(c)) => c,
                (None, None) => {
                    return Err(reject(
                        RejectCode::NoSuchTopic,
                        format!("topic '{topic}' does not exist"),
                    ))
                }
                (Some(n), None) => {
                    if let Err(e) = validate_topic_name(topic) {
                        return Err(reject(RejectCode::Invalid, e.to_string()));
                    }
                    create.push(TopicConfig::new(topic, n));
                    create.last().expect("just pushed")
                }
            },
        };
        if !cfg.perm.write {
            return Err(reject(
                RejectCode::NoPermission,
                format!("topic '{topic}' is not writable"),
            ));
        }
        if !q.is_below(cfg.write_queue_count) {
            return Err(reject(
                RejectCode::NoSuchQueue,
                format!(
                    "queue {q} of topic '{topic}' does not exist (write queues: {})",
                    cfg.write_queue_count
                ),
            ));
        }
    }
    Ok(create)
}

/// A `SendBatch` entry's fields besides its messages.
struct Batch {
    log_id: LogId,
    entry_phys: PhysOffset,
    auto_create_queues: Option<u32>,
    dedup: Option<DedupParams>,
}

/// The original result of `m` if it retries a send in the window; else its dedup key
/// (hashed), to remember it once dispatched. `keyed` is `m`'s identity and key hash from
/// [`dedup_keys`] (`None`: an unstamped batch, or a message without an identity).
fn dedup_lookup(
    st: &mut DispatchState,
    params: Option<DedupParams>,
    m: &BatchMessage<'_>,
    keyed: Option<(Identity<'_>, Option<u64>)>,
) -> std::result::Result<Option<Unseen>, MessageAck> {
    let (Some(params), Some((identity, hash))) = (params, keyed) else {
        return Ok(None);
    };
    st.dedup.expire(m.view.store_timestamp_ms, params);
    match (st.dedup).lookup_identity(hash, &identity, m.view.topic) {
        Ok(s) => Err(MessageAck {
            msg_id: s.phys_offset,
            topic: m.view.topic.to_owned(),
            queue_id: s.queue_id,
            queue_offset: s.queue_offset,
            phys_offset: s.phys_offset,
            store_timestamp_ms: s.store_timestamp_ms,
            duplicate_of: Some(s.log_id),
        }),
        Err(unseen) => Ok(Some(unseen)),
    }
}

/// The identity of each message of a stamped batch (`None` for a message without an
/// identity; empty for an unstamped batch), with its dedup key's hash and the window's table
/// entry for it loaded into the cache (see [`crate::dedup::DedupWindow::prefetch`]), unless
/// it is a producer's sequence: the window finds those by producer, not by hash.
fn dedup_keys<'a>(
    st: &DispatchState,
    params: Option<DedupParams>,
    messages: &'a [BatchMessage<'a>],
) -> Vec<Option<(Identity<'a>, Option<u64>)>> {
    if params.is_none() {
        return Vec::new();
    }
    let mut scratch = String::new();
    let keyed: Vec<Option<(Identity<'a>, Option<u64>)>> = messages
        .iter()
        .map(|m| {
            let identity = Identity::of_record(&m.view.properties)?;
            let write = |keys: &mut String| identity.write_key(keys, m.view.topic);
            let hash = (!identity.is_sequence()).then(|| st.dedup.hash_with(&mut scratch, write));
            Some((identity, hash))
        })
        .collect();
    st.dedup
        .prefetch(keyed.iter().flatten().filter_map(|&(_, hash)| hash));
    keyed
}

fn apply_batch(
    st: &mut DispatchState,
    batch: &Batch,
    messages: &[BatchMessage<'_>],
) -> Result<ApplyResponse> {
    let entry_phys = batch.entry_phys;
    let create = match check_batch(st, messages, batch.auto_create_queues) {
        Ok(c) => c,
        Err(r) => return Ok(r),
    };
    for cfg in create {
        tracing::info!(topic = %cfg.name, queues = cfg.write_queue_count, "topic auto-created");
        st.topics.create(cfg)?;
    }
    let keyed = dedup_keys(st, batch.dedup, messages);
    let mut acks = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let key = match dedup_lookup(st, batch.dedup, m, keyed.get(i).copied().flatten()) {
            Ok(key) => key,
            Err(original) => {
                tracing::debug!(
                    topic = m.view.topic,
                    phys_offset = original.phys_offset.get(),
                    "retried send answered from the dedup window"
                );
                acks.push(original);
                continue;
            }
        };
        let unit = m.cq_unit(entry_phys);
        let (topic, queue_id) = (m.view.topic, m.view.queue_id);
        let cq = st.cqs.get_or_create(topic, queue_id)?;
        let fresh = cq
            .last_unit()
            .is_none_or(|u| u.phys_offset < unit.phys_offset);
        let queue_offset = match fresh {
            true => cq.max_offset(),
            false => cq
                .offset_of_phys(unit.phys_offset)
                .unwrap_or(cq.max_offset()),
        };
        cq.put(queue_offset, unit)?;
        for key in &m.view.keys {
            st.index
                .put(key, unit.phys_offset, m.view.store_timestamp_ms)?;
        }
        tracing::trace!(
            topic,
            queue_id = queue_id.get(),
            queue_offset = queue_offset.get(),
            phys_offset = unit.phys_offset.get(),
            "message dispatched"
        );
        if let Some(key) = key {
            let send = StoredSend {
                queue_id,
                queue_offset,
                phys_offset: unit.phys_offset,
                store_timestamp_ms: m.view.store_timestamp_ms,
                log_id: batch.log_id,
            };
            st.dedup.remember(key, send);
        }
        acks.push(MessageAck {
            msg_id: unit.phys_offset,
            topic: topic.to_owned(),
            queue_id,
            queue_offset,
            phys_offset: unit.phys_offset,
            store_timestamp_ms: m.view.store_timestamp_ms,
            duplicate_of: None,
        });
    }
    tracing::debug!(
        phys_offset = entry_phys.get(),
        messages = acks.len(),
        "batch dispatched"
    );
    Ok(ApplyResponse::Sent(acks))
}
