//! Opening, recovering and validating a [`ConsumeQueue`].

use std::path::Path;

use crate::consume_queue::config::ConsumeQueueConfig;
use crate::consume_queue::format::file_name;
use crate::consume_queue::format::CQ_UNIT_LEN;
use crate::consume_queue::queue::ConsumeQueue;
use crate::consume_queue::segment::Segment;
use crate::error::Result;
use crate::error::StoreError;
use crate::mapped_file::list_numbered_files;
use crate::mapped_file::MappedFile;
use crate::types::PhysOffset;
use crate::types::QueueId;
use crate::types::QueueOffset;

/// Files at the tail that recovery validates unit by unit.
const RECOVER_TAIL_FILES: usize = 2;

impl ConsumeQueue {
    /// Opens (creating the directory if needed) and recovers the queue in `dir`: finds the last
    /// valid unit, blanks anything after it and removes files past it.
    ///
    /// Blank units before the first valid unit are holes (the queue starts later); from there,
    /// the first blank or non-increasing unit ends the queue. Units are checked one by one in
    /// the last two files only (older files were complete and flushed when the queue moved past
    /// them), so open costs O(units per file), not O(queue length).
    ///
    /// After open, `min_offset` is the first valid unit still in the files; units below the
    /// retention point inside the first file are not remembered, so the caller re-applies
    /// [`delete_below_phys`](Self::delete_below_phys) with the CommitLog's min physical offset,
    /// and [`truncate_phys_beyond`](Self::truncate_phys_beyond) with its recovered end.
    pub fn open(
        dir: &Path,
        topic: &str,
        queue_id: QueueId,
        cfg: &ConsumeQueueConfig,
    ) -> Result<Self> {
        cfg.validate()?;
        let upf = u64::from(cfg.units_per_file);
        let starts: Vec<QueueOffset> = list_numbered_files(dir, "ConsumeQueue")?
            .into_iter()
            .map(QueueOffset::new)
            .collect();
        let mut segments = Vec::with_capacity(starts.len());
        for (k, start) in starts.iter().enumerate() {
            let path = dir.join(file_name(start.get()));
            if let Some(first) = starts.first() {
                if *start != first.advance(k as u64 * upf) {
                    return Err(StoreError::corruption(
                        path.display().to_string(),
                        0,
                        format!(
                            "file starts at {start}, expected {} (gap in the queue)",
                            first.advance(k as u64 * upf)
                        ),
                    ));
                }
            }
            let file = MappedFile::open(&path, upf * CQ_UNIT_LEN as u64)?;
            segments.push(Segment {
                start: *start,
                file,
            });
        }
        let base = starts.first().copied().unwrap_or(QueueOffset::ZERO);
        let mut q = ConsumeQueue {
            dir: dir.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            units_per_file: upf,
            segments,
            min_offset: base,
            max_offset: base,
        };
        q.recover()?;
        Ok(q)
    }

    fn recover(&mut self) -> Result<()> {
        let end = self.end_offset();
        let mut o = self.base();
        while o < end && self.unit(o).is_blank() {
            o = o.next();
        }
        let min = o;
        // Like RocketMQ, trust files before the last RECOVER_TAIL_FILES (they were flushed
        // when the queue moved on) and validate unit by unit from there.
        let tail = self.segments.len().saturating_sub(RECOVER_TAIL_FILES);
        let tail_start = self.segments.get(tail).map_or(min, |s| s.start).max(min);
        let mut prev = None::<PhysOffset>;
        if tail_start > min && tail_start < end && !self.unit(tail_start.prev()).is_blank() {
            o = tail_start;
            prev = Some(self.unit(o.prev()).phys_offset);
        }
        while o < end {
            let u = self.unit(o);
            if u.is_blank() || prev.is_some_and(|p| u.phys_offset <= p) {
                break;
            }
            prev = Some(u.phys_offset);
            o = o.next();
        }
        if min == end {
            // No valid unit at all: an empty queue at the first file's start.
            self.min_offset = self.base();
            self.max_offset = self.base();
        } else {
            self.min_offset = min;
            self.max_offset = o;
        }
        let cut = self.cut_from(self.max_offset)?;
        tracing::info!(topic = %self.topic, queue_id = self.queue_id.get(), min_offset = self.min_offset.get(),
            max_offset = self.max_offset.get(), files = self.segments.len(), files_cut = cut, "consume queue recovered");
        Ok(())
    }

    /// Checks every invariant (O(units); tests and debug builds).
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(StoreError::invalid(format!("{}: {reason}", self.what())));
        for (k, s) in self.segments.iter().enumerate() {
            if s.start != self.base().advance(k as u64 * self.units_per_file) {
                return bad(format!("file {k} starts at {}", s.start));
            }
        }
        if !(self.base() <= self.min_offset && self.min_offset <= self.max_offset) {
            return bad(format!(
                "base {} min {} max {}",
                self.base(),
                self.min_offset,
                self.max_offset
            ));
        }
        if !self.segments.is_empty() && self.max_offset > self.end_offset() {
            return bad(format!(
                "max {} past the files' end {}",
                self.max_offset,
                self.end_offset()
            ));
        }
        let mut prev = None::<PhysOffset>;
        for o in self.min_offset.up_to(self.max_offset) {
            let u = self.unit(o);
            if u.is_blank() || prev.is_some_and(|p| u.phys_offset <= p) {
                return bad(format!("invalid unit {u:?} at {o}"));
            }
            prev = Some(u.phys_offset);
        }
        if self
            .max_offset
            .up_to(self.end_offset())
            .any(|o| !self.unit(o).is_blank())
        {
            return bad("a unit past max_offset is not blank".into());
        }
        Ok(())
    }
}
