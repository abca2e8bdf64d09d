//! Serializable views of the wire types, for `--json` output and tables.

use std::collections::BTreeMap;

use raftmq_client::proto::SendResult;
use raftmq_client::proto::StoredMessage;
use serde::Serialize;

/// Where a sent message was stored.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SendView {
    /// Message id (= physical offset).
    pub msg_id: u64,
    /// Queue.
    pub queue_id: i32,
    /// Offset in the queue.
    pub queue_offset: u64,
    /// Physical offset in the CommitLog.
    pub phys_offset: u64,
    /// Raft term of the entry.
    pub log_term: Option<u64>,
    /// Raft index of the entry.
    pub log_index: Option<u64>,
}

impl From<&SendResult> for SendView {
    fn from(r: &SendResult) -> Self {
        Self {
            msg_id: r.msg_id,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            phys_offset: r.phys_offset,
            log_term: r.log_id.map(|l| l.term),
            log_index: r.log_id.map(|l| l.index),
        }
    }
}

/// A stored message.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MessageView {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Offset in the queue.
    pub queue_offset: u64,
    /// Message id (= physical offset).
    pub msg_id: u64,
    /// Tag.
    pub tags: String,
    /// Keys.
    pub keys: Vec<String>,
    /// Properties.
    pub properties: BTreeMap<String, String>,
    /// Body as UTF-8 (invalid bytes replaced).
    pub body: String,
    /// Body length in bytes.
    pub body_bytes: usize,
    /// Leader's clock at store time, ms since the epoch.
    pub store_timestamp_ms: u64,
    /// Producer's clock, ms since the epoch.
    pub born_timestamp_ms: u64,
}

impl From<&StoredMessage> for MessageView {
    fn from(s: &StoredMessage) -> Self {
        let m = s.message.clone().unwrap_or_default();
        Self {
            topic: m.topic,
            queue_id: s.queue_id,
            queue_offset: s.queue_offset,
            msg_id: s.msg_id,
            tags: m.tags,
            keys: m.keys,
            properties: m.properties.into_iter().collect(),
            body: String::from_utf8_lossy(&m.body).into_owned(),
            body_bytes: m.body.len(),
            store_timestamp_ms: s.store_timestamp_ms,
            born_timestamp_ms: m.born_timestamp_ms,
        }
    }
}

impl MessageView {
    /// One table row: QUEUE, OFFSET, MSG ID, TAG, KEYS, BODY (cut to 60 chars).
    pub fn row(&self) -> Vec<String> {
        let mut body: String = self.body.chars().take(60).collect();
        if self.body.chars().count() > 60 {
            body.push_str("...");
        }
        vec![
            self.queue_id.to_string(),
            self.queue_offset.to_string(),
            self.msg_id.to_string(),
            self.tags.clone(),
            self.keys.join(","),
            body,
        ]
    }

    /// Headers of [`MessageView::row`].
    pub const HEADERS: [&'static str; 6] = ["QUEUE", "OFFSET", "MSG ID", "TAG", "KEYS", "BODY"];
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftmq_client::proto::LogId;
    use raftmq_client::proto::Message;

    #[test]
    fn json_shapes() {
        let r = SendResult {
            msg_id: 7,
            queue_id: 1,
            queue_offset: 2,
            phys_offset: 7,
            log_id: Some(LogId { term: 3, index: 4 }),
            duplicate: false,
        };
        let j = serde_json::to_value(SendView::from(&r)).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"msg_id":7,"queue_id":1,"queue_offset":2,"phys_offset":7,"log_term":3,"log_index":4})
        );
        let s = StoredMessage {
            message: Some(Message {
                topic: "t".into(),
                tags: "A".into(),
                keys: vec!["k".into()],
                properties: [("p".to_string(), "v".to_string())].into_iter().collect(),
                body: b"hello".to_vec().into(),
                ..Message::default()
            }),
            msg_id: 7,
            queue_id: 1,
            queue_offset: 2,
            phys_offset: 7,
            store_timestamp_ms: 9,
            log_id: None,
        };
        let v = MessageView::from(&s);
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["body"], "hello");
        assert_eq!(j["properties"]["p"], "v");
        assert_eq!(j["keys"][0], "k");
        assert_eq!(v.row()[5], "hello");
    }
}
