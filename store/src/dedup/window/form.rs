//! The window's persisted forms: its sends, oldest first, each with its key inline, as serde
//! (snapshots, tests) and as the dispatch checkpoint's binary form.

use raftmq_raft_log::types::LogId;
use serde::Deserialize;
use serde::Serialize;

use super::DedupWindow;
use super::StoredSend;
use crate::codec::Reader;
use crate::codec::Writer;
use crate::error::Result;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// One remembered send (serde form: the key inline).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct Remembered {
    pub(super) key: Box<str>,
    #[serde(flatten)]
    pub(super) send: StoredSend,
}

/// The serde form of the window: its sends, oldest first.
#[derive(Serialize, Deserialize)]
pub(super) struct WindowRepr(pub(super) Vec<Remembered>);

impl From<WindowRepr> for DedupWindow {
    fn from(r: WindowRepr) -> Self {
        let mut w = DedupWindow::default();
        for m in r.0 {
            // A key twice (a hand-edited file): the first stays, as apply would keep it.
            w.insert(&m.key, m.send);
        }
        w
    }
}

impl From<DedupWindow> for WindowRepr {
    fn from(w: DedupWindow) -> Self {
        WindowRepr(w.remembered().collect())
    }
}

impl DedupWindow {
    /// The sends with their keys, oldest first (the serde form).
    pub(super) fn remembered(&self) -> impl Iterator<Item = Remembered> + '_ {
        (0..self.order.len()).map(|i| Remembered {
            key: self.key(i).into(),
            send: self.order[i].send,
        })
    }

    /// Writes the sends, oldest first, in the dispatch checkpoint's binary form
    /// ([`crate::state::checkpoint`]): their count (`u64`), then per send its key
    /// ([`Writer::blob32`], UTF-8), queue id (`u32`), queue offset, physical offset, store
    /// timestamp, and the term and index of its entry (`u64` each). Streams through `out`
    /// one send at a time (the window is megabytes: no buffer of it all).
    pub(crate) fn write_binary(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(&(self.order.len() as u64).to_le_bytes())?;
        let mut scratch = Vec::with_capacity(128);
        for (i, slot) in self.order.iter().enumerate() {
            scratch.clear();
            let mut w = Writer::new(&mut scratch);
            let s = &slot.send;
            w.blob32("dedup key", self.key(i).as_bytes())
                .map_err(std::io::Error::other)?;
            w.u32(s.queue_id.get());
            w.u64(s.queue_offset.get());
            w.u64(s.phys_offset.get());
            w.u64(s.store_timestamp_ms);
            w.u64(s.log_id.leader_id.term);
            w.u64(s.log_id.index);
            out.write_all(&scratch)?;
        }
        Ok(())
    }

    /// Reads a window [`write_binary`](Self::write_binary) wrote (a key twice, only a damaged
    /// file has that: as in the serde form, the first stays).
    pub(crate) fn read_binary(r: &mut Reader<'_>) -> Result<DedupWindow> {
        /// Bytes of a send with an empty key.
        const MIN_SEND_BYTES: usize = 4 + 4 + 5 * 8;
        let count = r.u64("dedup window send count")?;
        // The count is file input: reserve no more than the bytes left can hold.
        let fit = r.remaining() / MIN_SEND_BYTES;
        let mut sends = Vec::with_capacity(usize::try_from(count).unwrap_or(usize::MAX).min(fit));
        for _ in 0..count {
            let at = r.pos();
            let key = std::str::from_utf8(r.blob32("dedup key")?)
                .map_err(|e| r.corrupt(at, format!("dedup key is not UTF-8: {e}")))?;
            let send = StoredSend {
                queue_id: QueueId::new(r.u32("dedup queue id")?),
                queue_offset: QueueOffset::new(r.u64("dedup queue offset")?),
                phys_offset: PhysOffset::new(r.u64("dedup physical offset")?),
                store_timestamp_ms: r.u64("dedup store timestamp")?,
                log_id: LogId::new_term_index(r.u64("dedup term")?, r.u64("dedup index")?),
            };
            sends.push(Remembered {
                key: key.into(),
                send,
            });
        }
        Ok(DedupWindow::from(WindowRepr(sends)))
    }
}
