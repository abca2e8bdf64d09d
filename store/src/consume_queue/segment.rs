//! One mapped ConsumeQueue file.

use crate::consume_queue::format::CqUnit;
use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::mapped_file::MappedFile;
use crate::types::QueueOffset;

/// A ConsumeQueue file and the queue offset of its first unit.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) start: QueueOffset,
    pub(super) file: MappedFile,
}

impl Segment {
    pub(super) fn unit(&self, i: usize) -> CqUnit {
        let at = i * CQ_UNIT_LEN;
        CqUnit::decode(&self.file.bytes()[at..at + CQ_UNIT_LEN])
            .expect("slice is exactly one unit long")
    }

    pub(super) fn write(&mut self, i: usize, u: &CqUnit) {
        let at = i * CQ_UNIT_LEN;
        self.file.write(at, &u.encode());
    }

    pub(super) fn zero_from(&mut self, i: usize) {
        self.file.zero_from(i * CQ_UNIT_LEN);
    }
}
