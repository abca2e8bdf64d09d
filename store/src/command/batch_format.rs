//! Body codec of `SendBatch` (1): where its message records sit in the payload; the layout is
//! in [`super::format`]'s byte table, which calls this.

use crate::codec::Reader;
use crate::error::Result;
use crate::error::StoreError;
use crate::message::format::peek_record_len;

const SRC: &str = "command payload";

/// Record offsets (inside the payload) and the `auto_create_queues` field of a batch body
/// that starts at payload offset `header_len`.
pub(crate) fn batch_offsets(body: &[u8], header_len: usize) -> Result<(Vec<u32>, Option<u32>)> {
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
        at += len;
    }
    if at != body.len() {
        let pos = (header_len + at) as u64;
        return Err(StoreError::corruption(
            SRC,
            pos,
            format!("{} bytes after the last record", body.len() - at),
        ));
    }
    Ok((offsets, (auto_create > 0).then_some(auto_create)))
}
