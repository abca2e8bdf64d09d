//! Bytes in consecutive pieces (the HTTP/2 frames a request arrived in), read as one buffer
//! and taken apart again without copying.

use std::collections::VecDeque;

use prost::bytes::Buf;
use prost::bytes::Bytes;

/// Bytes in consecutive pieces, read as one buffer.
#[derive(Debug, Default)]
pub(super) struct Rope {
    pieces: VecDeque<Bytes>,
    len: usize,
}

impl From<Vec<Bytes>> for Rope {
    fn from(pieces: Vec<Bytes>) -> Self {
        let len = pieces.iter().map(Bytes::len).sum();
        let pieces = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        Rope { pieces, len }
    }
}

impl Rope {
    pub(super) fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push_back(piece);
        }
    }

    /// The next `n` bytes (at most what is here) as slices of the pieces.
    pub(super) fn take_pieces(&mut self, n: usize) -> Vec<Bytes> {
        let mut n = n.min(self.len);
        self.len -= n;
        let mut out = Vec::new();
        while n > 0 {
            let Some(front) = self.pieces.front_mut() else {
                break;
            };
            if front.len() <= n {
                n -= front.len();
                out.extend(self.pieces.pop_front());
            } else {
                out.push(front.split_to(n));
                n = 0;
            }
        }
        out
    }
}

impl Buf for Rope {
    fn remaining(&self) -> usize {
        self.len
    }

    fn chunk(&self) -> &[u8] {
        self.pieces.front().map_or(&[], |p| p)
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.len, "advance past the end of the rope");
        self.len -= cnt;
        while cnt > 0 {
            let Some(front) = self.pieces.front_mut() else {
                return;
            };
            if front.len() <= cnt {
                cnt -= front.len();
                self.pieces.pop_front();
            } else {
                front.advance(cnt);
                cnt = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads, advances and takes across pieces see the one buffer the pieces make.
    #[test]
    fn pieces_read_as_one_buffer() {
        let whole: Vec<u8> = (0..40u8).collect();
        for a in 0..=whole.len() {
            for b in a..=whole.len() {
                let pieces = vec![
                    Bytes::copy_from_slice(&whole[..a]),
                    Bytes::copy_from_slice(&whole[a..b]),
                    Bytes::copy_from_slice(&whole[b..]),
                ];
                let mut rope = Rope::from(pieces.clone());
                assert_eq!(rope.remaining(), 40);
                let mut head = [0u8; 7];
                rope.copy_to_slice(&mut head);
                assert_eq!(head[..], whole[..7]);
                rope.advance(3);
                let taken = rope.take_pieces(20);
                assert_eq!(taken.concat(), whole[10..30]);
                let within = |t: &Bytes| {
                    pieces.iter().any(|p| {
                        let (s, at) = (p.as_ptr() as usize, t.as_ptr() as usize);
                        at >= s && at + t.len() <= s + p.len()
                    })
                };
                assert!(taken.iter().all(within), "slices, not copies");
                assert_eq!(rope.remaining(), 10);
                assert_eq!(
                    rope.take_pieces(99).concat(),
                    whole[30..],
                    "at most what is here"
                );
                assert_eq!(rope.remaining(), 0);
                assert!(rope.chunk().is_empty());
            }
        }
        let mut rope = Rope::default();
        rope.push(Bytes::new());
        rope.push(Bytes::from_static(b"ab"));
        assert_eq!(rope.chunk(), b"ab");
    }
}
