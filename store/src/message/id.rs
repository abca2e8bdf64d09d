//! Message ids: the one place that turns an entry's physical offset and a record's offset inside
//! the entry payload into the message id (the physical offset of the message record).

use raftmq_raft_log::format::payload_offset;

use crate::types::PhysOffset;

/// Id of the message whose record sits `record_in_payload` bytes into the payload of the
/// CommitLog entry that starts at `entry`: the physical offset of the record, i.e. entry start +
/// raft-log's entry header length + the record's offset inside the payload (the offsets
/// [`crate::command::record_offsets`] returns).
pub fn message_id(entry: PhysOffset, record_in_payload: u32) -> PhysOffset {
    payload_offset(entry).advance(u64::from(record_in_payload))
}

#[cfg(test)]
mod tests {
    use raftmq_raft_log::format::ENTRY_HEADER_LEN;

    use super::message_id;
    use crate::types::PhysOffset;

    #[test]
    fn message_id_is_entry_plus_header_plus_record_offset() {
        let entry = PhysOffset::new(4096);
        assert_eq!(message_id(entry, 0).get(), 4096 + ENTRY_HEADER_LEN as u64);
        assert_eq!(
            message_id(entry, 17).get(),
            4096 + ENTRY_HEADER_LEN as u64 + 17
        );
    }
}
