//! The payload codec of the peer protocol: openraft's serde structs as postcard 1.x bytes.
//!
//! postcard is deterministic (same value, same bytes), compact (varint integers) and its wire
//! format is specified and frozen for all 1.x versions, so two nodes built months apart still
//! understand each other. It is a positional format: openraft keeps its structs decodable by
//! such formats (see its `SnapshotMeta` wire notes), and a field added upstream is a protocol
//! change, which is why every request names its [`Codec`].

use raftmq_proto::v1::Codec;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The codec this build speaks.
pub const CODEC: Codec = Codec::PostcardV1;

/// A payload that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[error("{what}: postcard {op} failed: {source}")]
pub struct CodecError {
    /// Which payload (e.g. "AppendEntriesRequest").
    pub what: &'static str,
    /// "encode" or "decode".
    pub op: &'static str,
    #[source]
    pub source: postcard::Error,
}

/// Encodes `value` (named `what` in errors).
pub fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_stdvec(value).map_err(|source| CodecError {
        what,
        op: "encode",
        source,
    })
}

/// [`encode`] into a buffer of `capacity` bytes to start with: a caller that knows about how
/// big the encoding gets (an AppendEntries request: its payloads) saves the regrowth copies.
pub fn encode_sized<T: Serialize>(
    what: &'static str,
    value: &T,
    capacity: usize,
) -> Result<Vec<u8>, CodecError> {
    postcard::serialize_with_flavor(value, VecFlavor(Vec::with_capacity(capacity))).map_err(
        |source| CodecError {
            what,
            op: "encode",
            source,
        },
    )
}

/// The size of `value`'s encoding, without encoding it (byte strings are only counted).
pub fn encoded_size<T: Serialize>(what: &'static str, value: &T) -> Result<usize, CodecError> {
    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default()).map_err(
        |source| CodecError {
            what,
            op: "encode",
            source,
        },
    )
}

/// Encodes `value` into `sink`, piece by piece (the same bytes as [`encode`]).
pub fn encode_to<T: Serialize>(
    what: &'static str,
    value: &T,
    sink: &mut dyn FnMut(&[u8]),
) -> Result<(), CodecError> {
    postcard::serialize_with_flavor(value, SinkFlavor(sink)).map_err(|source| CodecError {
        what,
        op: "encode",
        source,
    })
}

/// postcard output handed to a closure.
struct SinkFlavor<'a>(&'a mut dyn FnMut(&[u8]));

impl postcard::ser_flavors::Flavor for SinkFlavor<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        (self.0)(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        (self.0)(&[data]);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// postcard output into a `Vec` the caller sized. postcard's own `to_extend` copies a byte
/// string one byte at a time (`Extend<u8>` over an iterator): in a leader's profile that
/// loop was 1.5% of its samples at 4 x 64, copying each entry's payload into the
/// AppendEntries request of each follower. This copies a byte string with one `memcpy`.
struct VecFlavor(Vec<u8>);

impl postcard::ser_flavors::Flavor for VecFlavor {
    type Output = Vec<u8>;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// Decodes a `T` from `bytes`; trailing bytes are an error (they mean a schema mismatch).
pub fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, CodecError> {
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|source| CodecError {
        what,
        op: "decode",
        source,
    })?;
    if !rest.is_empty() {
        return Err(CodecError {
            what,
            op: "decode",
            source: postcard::Error::DeserializeBadEncoding,
        });
    }
    Ok(value)
}

/// [`decode`] from a shared buffer: the entry payloads in it come out as slices of `bytes`
/// rather than copies ([`raftmq_raft_log::types::decode_sharing`]).
pub fn decode_shared<T: DeserializeOwned>(
    what: &'static str,
    bytes: &tonic::codegen::Bytes,
) -> Result<T, CodecError> {
    raftmq_raft_log::types::decode_sharing(bytes, || decode(what, bytes))
}

/// [`decode_shared`] from a message in several buffers (the HTTP/2 frames a request arrived
/// in, see `raw_append`): the entry payloads that lie within one buffer come out as slices of
/// it, a payload across two is copied. A message in one buffer is [`decode_shared`].
pub fn decode_parts<T: DeserializeOwned>(
    what: &'static str,
    parts: &[tonic::codegen::Bytes],
) -> Result<T, CodecError> {
    if let [whole] = parts {
        return decode_shared(what, whole);
    }
    let err = |source| CodecError {
        what,
        op: "decode",
        source,
    };
    let straddled = std::cell::Cell::new(false);
    let decoded = raftmq_raft_log::types::decode_sharing_parts(parts, || {
        let mut de = postcard::Deserializer::from_flavor(Parts::new(parts, &straddled));
        let value = T::deserialize(&mut de)?;
        match de.finalize()? {
            0 => Ok(value),
            _ => Err(postcard::Error::DeserializeBadEncoding),
        }
    });
    match decoded {
        Ok(value) => Ok(value),
        // A borrowed string or byte string across two buffers (no type we decode asks for
        // one): decode a contiguous copy instead.
        Err(_) if straddled.get() => decode(what, &parts.concat()),
        Err(e) => Err(err(e)),
    }
}

/// postcard input from consecutive buffers.
struct Parts<'de> {
    parts: &'de [tonic::codegen::Bytes],
    /// The buffer being read and the position in it.
    at: usize,
    pos: usize,
    /// Bytes across two buffers, copied for a temporary borrow.
    scratch: Vec<u8>,
    /// Set when a borrow for `'de` would have crossed two buffers.
    straddled: &'de std::cell::Cell<bool>,
}

impl<'de> Parts<'de> {
    fn new(
        parts: &'de [tonic::codegen::Bytes],
        straddled: &'de std::cell::Cell<bool>,
    ) -> Parts<'de> {
        let mut p = Parts {
            parts,
            at: 0,
            pos: 0,
            scratch: Vec::new(),
            straddled,
        };
        p.skip_spent();
        p
    }

    /// Moves past buffers read to their end (and empty ones).
    fn skip_spent(&mut self) {
        while self.at < self.parts.len() && self.pos == self.parts[self.at].len() {
            self.at += 1;
            self.pos = 0;
        }
    }

    fn remaining(&self) -> usize {
        let rest: usize = self.parts.iter().skip(self.at).map(|p| p.len()).sum();
        rest - self.pos
    }
}

impl<'de> postcard::de_flavors::Flavor<'de> for Parts<'de> {
    /// The bytes left unread.
    type Remainder = usize;
    type Source = &'de [tonic::codegen::Bytes];

    fn pop(&mut self) -> postcard::Result<u8> {
        let part: &'de [u8] = self
            .parts
            .get(self.at)
            .ok_or(postcard::Error::DeserializeUnexpectedEnd)?;
        let byte = part[self.pos];
        self.pos += 1;
        self.skip_spent();
        Ok(byte)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining())
    }

    fn try_take_n(&mut self, ct: usize) -> postcard::Result<&'de [u8]> {
        let Some(part) = self.parts.get(self.at) else {
            return match ct {
                0 => Ok(&[]),
                _ => Err(postcard::Error::DeserializeUnexpectedEnd),
            };
        };
        let part: &'de [u8] = part;
        match part.get(self.pos..self.pos + ct) {
            Some(taken) => {
                self.pos += ct;
                self.skip_spent();
                Ok(taken)
            }
            None => {
                self.straddled.set(ct <= self.remaining());
                Err(postcard::Error::DeserializeUnexpectedEnd)
            }
        }
    }

    fn try_take_n_temp<'a>(&'a mut self, ct: usize) -> postcard::Result<&'a [u8]>
    where
        'de: 'a,
    {
        let within = self
            .parts
            .get(self.at)
            .is_some_and(|p| self.pos + ct <= p.len());
        if within || ct == 0 {
            return self.try_take_n(ct);
        }
        if ct > self.remaining() {
            return Err(postcard::Error::DeserializeUnexpectedEnd);
        }
        self.scratch.clear();
        while self.scratch.len() < ct {
            let part = &self.parts[self.at];
            let n = (ct - self.scratch.len()).min(part.len() - self.pos);
            self.scratch
                .extend_from_slice(&part[self.pos..self.pos + n]);
            self.pos += n;
            self.skip_spent();
        }
        Ok(&self.scratch)
    }

    fn finalize(self) -> postcard::Result<usize> {
        Ok(self.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_encoding_is_the_same_bytes() {
        let v = (7u64, Some("x".to_string()), vec![9u8; 3000]);
        let plain = encode("t", &v).unwrap();
        for cap in [0, 10, plain.len(), 1 << 16] {
            assert_eq!(encode_sized("t", &v, cap).unwrap(), plain);
        }
        // A byte string (an entry's payload) goes through the flavor's slice copy.
        let p = (
            3u8,
            raftmq_raft_log::types::AppPayload::from(vec![5u8; 70_000]),
        );
        let plain = encode("p", &p).unwrap();
        for cap in [0, 100, plain.len()] {
            assert_eq!(encode_sized("p", &p, cap).unwrap(), plain);
        }
    }

    #[test]
    fn sized_and_sink_encodings_are_the_same_bytes() {
        let p = (
            3u8,
            Some("x".to_string()),
            raftmq_raft_log::types::AppPayload::from(vec![5u8; 70_000]),
        );
        let plain = encode("p", &p).unwrap();
        assert_eq!(encoded_size("p", &p).unwrap(), plain.len());
        let mut out = Vec::new();
        encode_to("p", &p, &mut |b| out.extend_from_slice(b)).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn round_trip_and_trailing_bytes_rejected() {
        let v = (7u64, Some("x".to_string()), vec![1u8, 2, 3]);
        let bytes = encode("t", &v).expect("encodes");
        assert_eq!(encode("t", &v).expect("encodes"), bytes, "deterministic");
        let back: (u64, Option<String>, Vec<u8>) = decode("t", &bytes).expect("decodes");
        assert_eq!(back, v);
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<(u64, Option<String>, Vec<u8>)>("t", &longer).is_err());
        assert!(decode::<(u64, Option<String>, Vec<u8>)>("t", &bytes[..2]).is_err());
    }

    /// A shared decode hands out the payloads as slices of the buffer (the same bytes); a plain
    /// one copies them, and the source is forgotten after the shared decode.
    #[test]
    fn shared_decode_takes_payloads_as_slices_of_the_buffer() {
        use raftmq_raft_log::types::AppPayload;
        let v = (
            7u64,
            vec![
                AppPayload::from(vec![1u8; 3000]),
                AppPayload::from(Vec::new()),
                AppPayload::from((0..=255u8).collect::<Vec<_>>()),
            ],
        );
        let buf = tonic::codegen::Bytes::from(encode("p", &v).expect("encodes"));
        let within = |p: &AppPayload| {
            let (at, start) = (p.0.as_ptr() as usize, buf.as_ptr() as usize);
            at >= start && at + p.0.len() <= start + buf.len()
        };
        let shared: (u64, Vec<AppPayload>) = decode_shared("p", &buf).expect("decodes");
        assert_eq!(shared, v);
        assert!(
            within(&shared.1[0]) && within(&shared.1[2]),
            "slices of the buffer"
        );
        let copied: (u64, Vec<AppPayload>) = decode("p", &buf).expect("decodes");
        assert_eq!(copied, v);
        assert!(!within(&copied.1[0]), "a plain decode copies");
        // A payload the shared decode does not read from its source is copied.
        let other = tonic::codegen::Bytes::from_static(b"elsewhere");
        let from_elsewhere: (u64, Vec<AppPayload>) =
            raftmq_raft_log::types::decode_sharing(&other, || decode("p", &buf)).expect("decodes");
        assert_eq!(from_elsewhere, v);
        assert!(!within(&from_elsewhere.1[0]));
        let truncated = buf.slice(..buf.len() - 1);
        assert!(decode_shared::<(u64, Vec<AppPayload>)>("p", &truncated).is_err());
    }

    /// `AppPayload` goes on the wire as a byte string; in postcard that must stay the same
    /// bytes as the sequence of `u8` older builds sent, both ways.
    #[test]
    fn app_payload_bytes_match_the_u8_sequence_form() {
        use raftmq_raft_log::types::AppPayload;
        for len in [0usize, 1, 127, 128, 1024, 70_000] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let as_bytes = encode("p", &AppPayload::from(raw.clone())).expect("encodes");
            let as_seq = encode("p", &raw).expect("encodes");
            assert_eq!(as_bytes, as_seq, "len {len}");
            let back: AppPayload = decode("p", &as_seq).expect("decodes");
            assert_eq!(back.0, raw);
        }
    }
}
