//! Body codec of `SendBatch` (1): where its message records sit in the payload; the layout is
//! in [`super::format`]'s byte table, which calls this.

use crate::codec::prefetch;
use crate::codec::Reader;
use crate::codec::CACHE_LINE;
use crate::dedup::DedupParams;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::format::peek_record_len;

const SRC: &str = "command payload";

/// Magic of the optional dedup trailer of a batch body (`"DDUP"` as little-endian bytes).
pub(crate) const DEDUP_TRAILER_MAGIC: u32 = 0x5055_4444;
/// Bytes of the dedup trailer: magic u32, `window_ms` u64, `max_entries` u32.
pub(crate) const DEDUP_TRAILER_LEN: usize = 16;

const _: () = assert!(DEDUP_TRAILER_LEN == 4 + 8 + 4);

/// What a batch body holds besides its records.
pub(crate) struct BatchLayout {
    /// Record offsets inside the payload.
    pub offsets: Vec<u32>,
    /// `auto_create_queues` (0 on disk = `None`).
    pub auto_create_queues: Option<u32>,
    /// The dedup trailer, if present.
    pub dedup: Option<DedupParams>,
}

/// Parses the dedup trailer `t` found at payload offset `pos` after the last record.
fn dedup_trailer(t: &[u8], pos: u64) -> Result<DedupParams> {
    let rebase = |e: StoreError| e.locate(SRC, pos);
    let mut r = Reader::new(t, SRC);
    let magic = r.u32("dedup trailer magic").map_err(rebase)?;
    if magic != DEDUP_TRAILER_MAGIC || t.len() != DEDUP_TRAILER_LEN {
        return Err(StoreError::corruption(
            SRC,
            pos,
            format!("{} bytes after the last record", t.len()),
        ));
    }
    let window_ms = r.u64("dedup window").map_err(rebase)?;
    let max_entries = r.u32("dedup max entries").map_err(rebase)?;
    if window_ms == 0 || max_entries == 0 {
        return Err(StoreError::corruption(
            SRC,
            pos,
            format!(
                "dedup trailer window {window_ms} ms, max entries {max_entries}: both must be >= 1"
            ),
        ));
    }
    Ok(DedupParams {
        window_ms,
        max_entries,
    })
}

/// How many records ahead [`batch_offsets`] asks for.
const PREFETCH_RECORDS: usize = 8;
/// How much of each record ahead [`batch_offsets`] asks for: the header and the strings of a
/// record with a few properties; the body, which apply does not read, is left out.
const PREFETCH_TEXT_BYTES: usize = 256;
/// Record offsets (inside the payload), the `auto_create_queues` field and the dedup trailer
/// of a batch body that starts at payload offset `header_len`.
pub(crate) fn batch_offsets(body: &[u8], header_len: usize) -> Result<BatchLayout> {
    let rebase = |e: StoreError| e.locate(SRC, header_len as u64);
    let mut r = Reader::new(body, SRC);
    let count = r.u32("message count").map_err(rebase)?;
    if count == 0 {
        return Err(StoreError::corruption(
            SRC,
            header_len as u64,
            "batch has no message",
        ));
    }
    let auto_create = r.u32("auto create queues").map_err(rebase)?;
    let mut offsets = Vec::with_capacity((count as usize).min(body.len() / 4));
    let mut at = 8usize;
    for i in 0..count {
        let pos = (header_len + at) as u64;
        let len = peek_record_len(&body[at..]).ok_or_else(|| {
            StoreError::corruption(SRC, pos, format!("record {i} of {count} missing"))
        })? as usize;
        if len == 0 || len > body.len() - at {
            return Err(StoreError::corruption(
                SRC,
                pos,
                format!("record {i} length {len} overruns the body"),
            ));
        }
        let pos32 = u32::try_from(pos)
            .map_err(|_| StoreError::corruption(SRC, pos, "record offset does not fit a u32"))?;
        offsets.push(pos32);
        // Each length read waits for the one before it, and on a follower the payload has
        // left the cache by apply (3-4% of a follower's samples at batch-32, in this loop).
        // A batch's records are mostly of one size: ask for the lines the same stride
        // further on, so that the loads of the records ahead overlap. Not only the length's
        // line: apply's parse then reads each record's header and strings (about 150 bytes
        // with an identity), which otherwise missed the cache once more per record.
        let ahead = at.saturating_add(PREFETCH_RECORDS.saturating_mul(len));
        let mut line = 0;
        while line < len.min(PREFETCH_TEXT_BYTES) {
            prefetch(body, ahead.saturating_add(line));
            line += CACHE_LINE;
        }
        at += len;
    }
    let dedup = match at == body.len() {
        true => None,
        false => Some(dedup_trailer(&body[at..], (header_len + at) as u64)?),
    };
    Ok(BatchLayout {
        offsets,
        auto_create_queues: (auto_create > 0).then_some(auto_create),
        dedup,
    })
}
