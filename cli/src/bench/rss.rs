//! Anonymous memory of a node process (`RssAnon` in `/proc/<pid>/status`): heap and other
//! private pages, not the mapped CommitLog and ConsumeQueue files the kernel can drop.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often [`PeakSampler`] reads the process status.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The `RssAnon` line of a `/proc/<pid>/status` text, in KiB (None if absent or malformed).
pub fn parse_rss_anon_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    let mut words = line["RssAnon:".len()..].split_whitespace();
    let kib = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib)
}

/// `RssAnon` of process `pid` in KiB, None when it is gone or the kernel does not say.
pub fn rss_anon_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_rss_anon_kib(&text)
}

/// Samples a process's `RssAnon` every 100 ms until [`PeakSampler::stop`]; keeps the peak.
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Option<u64>>,
}

impl PeakSampler {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = None;
            while !flag.load(Ordering::Relaxed) {
                if let Some(kib) = rss_anon_kib(pid) {
                    peak = Some(peak.map_or(kib, |p: u64| p.max(kib)));
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            peak
        });
        Self { stop, task }
    }

    /// Stops sampling; the highest `RssAnon` seen, KiB (None: never readable).
    pub async fn stop(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_status_line() {
        let text = "Name:\traftmq-node\nVmRSS:\t  9000 kB\nRssAnon:\t    4242 kB\nRssFile:\t1 kB\n";
        assert_eq!(parse_rss_anon_kib(text), Some(4242));
        assert_eq!(parse_rss_anon_kib("RssAnon:\tlots kB\n"), None);
        assert_eq!(parse_rss_anon_kib("RssAnon:\t12 pages\n"), None);
        assert_eq!(parse_rss_anon_kib("VmRSS:\t12 kB\n"), None);
    }

    #[tokio::test]
    async fn samples_this_process() {
        let me = std::process::id();
        assert!(rss_anon_kib(me).is_some_and(|k| k > 0));
        let s = PeakSampler::start(me);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(s.stop().await.is_some_and(|k| k > 0));
    }
}
