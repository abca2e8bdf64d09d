//! The suite's one table: every case's figures next to issue 14's targets (relative to the
//! peer, to the disk probed right before that case, or to another case), with the ratio, and
//! the same as JSON.

use serde::Serialize;

use super::cases::Case;
use super::cases::PeerFigures;
use crate::bench::cpu::CpuFigures;
use crate::bench::cpu::MachineShares;
use crate::bench::disk::DiskFigures;
use crate::bench::hop::HopFigures;
use crate::bench::BenchSummary;
use crate::output::table;

/// Target 6: the leader's anonymous memory during and after targets 3 and 4, MiB.
const MEMORY_TARGET_MIB: f64 = 200.0;
/// Host steal above this share of the machine's CPU time marks a case measured while the
/// host ran other work: its figures are the host's, rerun it.
pub const STEAL_WARN_PCT: f64 = 5.0;

/// The CPU time of a case's produce load (for `consume-follower`: of the fill).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CaseCpu {
    /// CPU seconds of the leader process.
    pub leader_s: Option<f64>,
    /// CPU seconds of each follower process (None: not readable at both ends).
    pub followers_s: Vec<Option<f64>>,
    /// CPU seconds of the suite's own process, which runs the load generator.
    pub load_generator_s: Option<f64>,
    /// How the machine's CPUs were spent meanwhile.
    pub machine: Option<MachineShares>,
}

impl CaseCpu {
    /// Splits `f`, measured for the leader, `followers` followers and then the load generator.
    pub fn from_span(f: CpuFigures, followers: usize) -> Self {
        let s = &f.process_cpu_s;
        let get = |i: usize| s.get(i).copied().flatten();
        Self {
            leader_s: get(0),
            followers_s: (1..=followers).map(get).collect(),
            load_generator_s: get(followers + 1),
            machine: f.machine,
        }
    }

    /// Mean CPU seconds of the followers that could be read.
    fn follower_mean_s(&self) -> Option<f64> {
        let read: Vec<f64> = self.followers_s.iter().flatten().copied().collect();
        (!read.is_empty()).then(|| read.iter().sum::<f64>() / read.len() as f64)
    }
}

/// What one case measured.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// The disk, probed in the cluster directory right before this case's load (this shared
    /// disk's fdatasync swings minute to minute; each case is judged against its own minute).
    pub disk: DiskFigures,
    /// Round trips between two processes, probed right after the disk (`single` only; None
    /// if the probe failed).
    pub hop: Option<HopFigures>,
    /// The produce run (for `consume-follower`: the fill).
    pub produce: BenchSummary,
    /// The pull from a follower (`consume-follower` only).
    pub consume: Option<BenchSummary>,
    /// Highest leader `RssAnon` while the load ran, MiB (memory cases only).
    pub leader_rss_peak_mib: Option<f64>,
    /// Leader `RssAnon` one second after the load, MiB (memory cases only).
    pub leader_rss_after_mib: Option<f64>,
    /// CPU time of the nodes and the load generator during the load, and the machine's split.
    pub cpu: CaseCpu,
    /// Raft entries the leader appended during the load (its last log index after minus
    /// before; None if either status read failed). Every entry costs the same fixed work
    /// (a record, a flush cycle, replication to each follower, an apply on every node), so
    /// messages per entry says how well a case's sends were grouped.
    pub raft_entries: Option<u64>,
}

/// Whether a figure should be above or below its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    /// Rates: the ratio is figure / target.
    Higher,
    /// Latencies and memory: the ratio is target / figure.
    Lower,
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Case name.
    pub case: String,
    /// What the value is.
    pub figure: String,
    /// The figure.
    pub value: f64,
    /// Its unit: `msg/s`, `MB/s` (10^6 bytes), `MiB/s`, `ms`, `MiB`, `/s`, `msg/entry`,
    /// `us/msg`, `%`.
    pub unit: &'static str,
    /// The target, same unit (None: no target, or the case it depends on did not run).
    pub target: Option<f64>,
    /// Where the target comes from.
    pub target_basis: String,
    /// Direction of the target.
    pub better: Better,
    /// >= 1 when the target is met: figure / target for rates, target / figure otherwise.
    pub ratio: Option<f64>,
}

impl Row {
    fn new(case: &str, figure: &str, value: f64, unit: &'static str) -> Self {
        Self {
            case: case.to_string(),
            figure: figure.to_string(),
            value,
            unit,
            target: None,
            target_basis: String::new(),
            better: Better::Higher,
            ratio: None,
        }
    }

    fn target(mut self, better: Better, target: Option<f64>, basis: String) -> Self {
        self.better = better;
        self.target = target;
        self.target_basis = basis;
        self.ratio = target.filter(|t| *t > 0.0).and_then(|t| match better {
            Better::Higher => Some(self.value / t),
            Better::Lower => (self.value > 0.0).then(|| t / self.value),
        });
        self
    }
}

/// The whole result of a suite run.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// CPUs of the machine (`nproc`).
    pub nproc: usize,
    /// Written segments each node's free pool held before it started (`--written-segments`;
    /// 0: fresh nodes).
    pub written_segments: u32,
    /// The peer's figures targets 1 to 3 use.
    pub peer: PeerFigures,
    /// Path of `nats-server` when it is on PATH (the suite does not run it).
    pub nats_server: Option<String>,
    /// The host's TCP congestion control (`net.ipv4.tcp_congestion_control`; None: unreadable).
    /// The nodes' same-host connections use `loopback-congestion-control` (default reno)
    /// instead; the load generator's keep it.
    pub tcp_congestion: Option<String>,
    /// Each case run.
    pub cases: Vec<CaseResult>,
    /// The table.
    pub rows: Vec<Row>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn memory_rows(rows: &mut Vec<Row>, r: &CaseResult) {
    let name = r.case.name();
    let basis = || "issue 14 target 6".to_string();
    for (figure, v) in [
        ("leader RssAnon during", r.leader_rss_peak_mib),
        ("leader RssAnon after", r.leader_rss_after_mib),
    ] {
        if let Some(v) = v {
            let row = Row::new(name, figure, v, "MiB");
            rows.push(row.target(Better::Lower, Some(MEMORY_TARGET_MIB), basis()));
        }
    }
}

/// The machine rows of one case: its disk probe's small-write figures (and the 1 MiB
/// bandwidth where the case's target uses it), so each case's ratios sit next to the disk they
/// are judged by, and the hop probe's round trip where it ran.
fn disk_rows(rows: &mut Vec<Row>, r: &CaseResult) {
    let name = r.case.name();
    let d = &r.disk;
    rows.push(Row::new(
        name,
        "disk 1 KiB write+fdatasync p50",
        ms(d.fdatasync_p50_us),
        "ms",
    ));
    rows.push(Row::new(
        name,
        "disk 1 KiB write+fdatasync p99",
        ms(d.fdatasync_p99_us),
        "ms",
    ));
    // No target: a machine fact, next to the rewrite of the same blocks as its basis (a fresh
    // cluster's appends all go to new blocks; see `bench::disk`).
    let mut first = Row::new(
        name,
        "disk 32 KiB write+fdatasync p50, new blocks",
        ms(d.new_block_sync_p50_us),
        "ms",
    );
    first.target_basis = format!(
        "the same blocks rewritten {:.2} ms",
        ms(d.written_block_sync_p50_us)
    );
    rows.push(first);
    // No target: a machine fact, next to the rewrite of the same pages as its basis (a fill
    // several times slower than the rewrite: the host faulted each new page in, and every
    // node's appends paid that in this case; see `bench::disk`).
    let mut fill = Row::new(
        name,
        "page cache new-page write",
        d.page_cache_fill_mib_per_s,
        "MiB/s",
    );
    fill.target_basis = format!(
        "rewrite of the cached pages {:.0} MiB/s",
        d.page_cache_rewrite_mib_per_s
    );
    rows.push(fill);
    if let Some(h) = &r.hop {
        let mut row = Row::new(
            name,
            "round trip between two processes p50",
            ms(h.round_trip_p50_us),
            "ms",
        );
        if h.cross_cpu {
            row.target_basis = "the two on different CPUs".into();
        }
        rows.push(row);
    }
    if r.case == Case::Batch32 {
        rows.push(Row::new(
            name,
            "disk 1 MiB write+fdatasync",
            d.write_sync_mib_per_s,
            "MiB/s",
        ));
    }
}

/// CPU per message of each process and the machine's idle and steal shares during the load.
fn cpu_rows(rows: &mut Vec<Row>, r: &CaseResult) {
    let name = r.case.name();
    let messages = r.produce.messages;
    if messages > 0 {
        let per_msg = |s: f64| s * 1e6 / messages as f64;
        for (figure, secs) in [
            ("leader CPU per message", r.cpu.leader_s),
            ("follower CPU per message (mean)", r.cpu.follower_mean_s()),
            ("load generator CPU per message", r.cpu.load_generator_s),
        ] {
            if let Some(secs) = secs {
                rows.push(Row::new(name, figure, per_msg(secs), "us/msg"));
            }
        }
    }
    if let Some(m) = &r.cpu.machine {
        rows.push(Row::new(name, "machine CPU idle", m.idle_pct, "%"));
        let mut steal = Row::new(name, "machine CPU stolen by the host", m.steal_pct, "%");
        if m.steal_pct > STEAL_WARN_PCT {
            steal.target_basis = "host busy: this case's figures are depressed, rerun".into();
        }
        rows.push(steal);
    }
}

/// The table's rows: each case run, its disk probe first, then its figures with their targets.
pub fn rows(peer: &PeerFigures, results: &[CaseResult]) -> Vec<Row> {
    let mut rows = Vec::new();
    let four = results.iter().find(|r| r.case == Case::FourBy64);
    let needs_four = |what: &str| match four {
        Some(_) => what.to_string(),
        None => format!("{what} (four-by-64 not run)"),
    };
    for r in results {
        disk_rows(&mut rows, r);
        let p = &r.produce;
        let disk = &r.disk;
        let name = r.case.name();
        let rate = Row::new(name, "produce rate", p.messages_per_s, "msg/s");
        match r.case {
            Case::Single => {
                let basis = format!("NATS R3 {:.0}", peer.single);
                rows.push(rate.target(Better::Higher, Some(peer.single), basis));
                let t = 2.0 * ms(disk.fdatasync_p50_us) + 0.1;
                let row = Row::new(name, "send p50", ms(p.latency.p50_us), "ms");
                let basis = "2 x fdatasync p50 + 0.1 ms".to_string();
                rows.push(row.target(Better::Lower, Some(t), basis));
                // No target: what any broker that fsyncs before its ack spends at least.
                if let Some(h) = &r.hop {
                    let floor = 2.0 * ms(h.round_trip_p50_us) + ms(disk.fdatasync_p50_us);
                    let mut row = Row::new(name, "send floor on this machine", floor, "ms");
                    row.target_basis =
                        "client-leader and leader-follower round trips + fdatasync p50".into();
                    rows.push(row);
                }
            }
            Case::InFlight64 => {
                let basis = format!("1.5 x NATS R3 {:.0}", peer.in_flight_64);
                rows.push(rate.target(Better::Higher, Some(1.5 * peer.in_flight_64), basis));
                rows.push(Row::new(name, "send p99", ms(p.latency.p99_us), "ms"));
            }
            Case::FourBy64 => {
                let basis = format!("2 x NATS R3 {:.0}", peer.four_by_64);
                rows.push(rate.target(Better::Higher, Some(2.0 * peer.four_by_64), basis));
                rows.push(Row::new(name, "send p99", ms(p.latency.p99_us), "ms"));
                memory_rows(&mut rows, r);
            }
            Case::Batch32 => {
                let disk_mb = disk.write_sync_mib_per_s * 1.048_576;
                let row = Row::new(name, "produce bandwidth", p.mb_per_s, "MB/s");
                let basis = "75% of disk write+fdatasync / 3".to_string();
                rows.push(row.target(Better::Higher, Some(0.75 * disk_mb / 3.0), basis));
                rows.push(rate);
                memory_rows(&mut rows, r);
            }
            Case::Async => {
                let t = four.map(|f| 1.3 * f.produce.messages_per_s);
                rows.push(rate.target(Better::Higher, t, needs_four("1.3 x four-by-64 (sync)")));
                let row = Row::new(name, "send p99", ms(p.latency.p99_us), "ms");
                let t = four.map(|f| ms(f.produce.latency.p99_us));
                rows.push(row.target(Better::Lower, t, needs_four("four-by-64 (sync) p99")));
            }
            Case::ConsumeFollower => {
                rows.push(rate);
                if let Some(c) = &r.consume {
                    let row = Row::new(name, "follower pull rate", c.messages_per_s, "msg/s");
                    let t = four.map(|f| 3.0 * f.produce.messages_per_s);
                    rows.push(row.target(Better::Higher, t, needs_four("3 x four-by-64 produce")));
                    rows.push(Row::new(
                        name,
                        "follower pull bandwidth",
                        c.mb_per_s,
                        "MB/s",
                    ));
                }
            }
        }
        cpu_rows(&mut rows, r);
        if let Some(entries) = r.raft_entries.filter(|e| *e > 0) {
            let per_entry = p.messages as f64 / entries as f64;
            rows.push(Row::new(
                name,
                "messages per Raft entry",
                per_entry,
                "msg/entry",
            ));
        }
    }
    rows
}

fn value_text(v: f64, unit: &str) -> String {
    match unit {
        "ms" => format!("{v:.2} {unit}"),
        "MB/s" | "MiB/s" | "MiB" | "msg/entry" | "us/msg" => format!("{v:.1} {unit}"),
        "%" => format!("{v:.1}{unit}"),
        _ => format!("{v:.0} {unit}"),
    }
}

/// The table (one line per row) and footnotes: the machine, the peer figures' source, the
/// errors of any case.
pub fn render(r: &SuiteReport) -> String {
    let lines: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let target = match (row.target, row.better) {
                (Some(t), Better::Higher) => format!(">= {}", value_text(t, row.unit)),
                (Some(t), Better::Lower) => format!("<= {}", value_text(t, row.unit)),
                (None, _) => "-".to_string(),
            };
            let basis = if row.target_basis.is_empty() {
                String::new()
            } else {
                format!(" ({})", row.target_basis)
            };
            vec![
                row.case.clone(),
                row.figure.clone(),
                value_text(row.value, row.unit),
                format!("{target}{basis}"),
                row.ratio.map_or("-".to_string(), |x| format!("{x:.2}x")),
            ]
        })
        .collect();
    let mut out = table(
        &["case", "figure", "value", "target", "ratio (>=1 met)"],
        &lines,
    );
    out.push_str(&format!(
        "\n\n3 nodes on one machine ({} CPUs), 1 KiB bodies, all nodes sync except `async`; {}; \
         each case's disk rows: probed in the cluster directory right before its load; \
         32 KiB write+fdatasync into new blocks above the same blocks rewritten: what every \
         append of a fresh cluster pays and a node appending into recycled segments does not; \
         page cache new-page write far below the rewrite: the VM's host faulted new pages in, \
         a cost every node's appends paid in that case; CPU per message: utime + stime of \
         each process over the load; machine CPU stolen by the host above {STEAL_WARN_PCT}%: \
         the host ran other work, that case measured it.\n\
         NATS figures: {}.\n\
         Host TCP congestion control: {} (the nodes' side of every connection here: their \
         loopback-congestion-control, default reno).",
        r.nproc,
        match r.written_segments {
            0 => "fresh nodes (every append writes its blocks for the first time)".to_string(),
            n => format!(
                "each node started with {n} written segments in its free pool (appends past \
                 its first segment into blocks written before, as past a first retention)"
            ),
        },
        r.peer.source,
        r.tcp_congestion.as_deref().unwrap_or("unknown"),
    ));
    if let Some(path) = &r.nats_server {
        out.push_str(&format!(
            "\nnats-server is at {path}: measure JetStream R3 with it and pass --nats-figures."
        ));
    }
    for c in &r.cases {
        for s in [Some(&c.produce), c.consume.as_ref()].into_iter().flatten() {
            if !s.errors.is_empty() {
                let list: Vec<String> = s.errors.iter().map(|(k, n)| format!("{k}: {n}")).collect();
                out.push_str(&format!(
                    "\nerrors in {} ({}): {}",
                    c.case,
                    s.kind,
                    list.join(", ")
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::Latencies;

    fn summary(messages: u64, secs: u64, p50_us: u64) -> BenchSummary {
        let mut lat = Latencies::new();
        lat.record(Duration::from_micros(p50_us));
        BenchSummary::new(
            "produce",
            messages,
            messages * 1024,
            Duration::from_secs(secs),
            &lat,
        )
    }

    fn result(case: Case, messages: u64, p50_us: u64) -> CaseResult {
        CaseResult {
            case,
            disk: disk(),
            hop: None,
            produce: summary(messages, 1, p50_us),
            consume: None,
            leader_rss_peak_mib: None,
            leader_rss_after_mib: None,
            cpu: CaseCpu::default(),
            raft_entries: None,
        }
    }

    fn disk() -> DiskFigures {
        DiskFigures {
            fdatasync_p50_us: 250,
            fdatasync_p99_us: 900,
            small_syncs_per_s: 3000.0,
            write_sync_mib_per_s: 300.0,
            new_block_sync_p50_us: 200,
            written_block_sync_p50_us: 100,
            page_cache_fill_mib_per_s: 900.0,
            page_cache_rewrite_mib_per_s: 3000.0,
        }
    }

    fn find<'a>(rows: &'a [Row], case: &str, figure: &str) -> &'a Row {
        rows.iter()
            .find(|r| r.case == case && r.figure == figure)
            .unwrap_or_else(|| panic!("no row {case} / {figure} in {rows:?}"))
    }

    #[test]
    fn targets_and_ratios_follow_the_issue() {
        let peer = PeerFigures::issue_reference();
        let mut four = result(Case::FourBy64, 40_000, 5000);
        four.leader_rss_peak_mib = Some(100.0);
        four.leader_rss_after_mib = Some(400.0);
        four.raft_entries = Some(800);
        let mut single = result(Case::Single, 2158, 1200);
        // A status read that failed (None) or a load that appended nothing gives no row.
        single.raft_entries = Some(0);
        let results = vec![single, four, result(Case::Async, 52_000, 10_000)];
        let rows = rows(&peer, &results);
        assert_eq!(
            find(&rows, "single", "disk 1 KiB write+fdatasync p50").value,
            0.25
        );
        let single = find(&rows, "single", "produce rate");
        assert_eq!(single.ratio, Some(1.0));
        // p50 target 2 x 0.25 + 0.1 = 0.6 ms; 1.2 ms is half of it (lower is better).
        let p50 = find(&rows, "single", "send p50");
        assert!((p50.target.unwrap() - 0.6).abs() < 1e-9, "{p50:?}");
        assert!((p50.ratio.unwrap() - 0.5).abs() < 0.01, "{p50:?}");
        let rate = find(&rows, "four-by-64", "produce rate");
        assert_eq!(rate.target, Some(35_200.0));
        let during = find(&rows, "four-by-64", "leader RssAnon during");
        assert_eq!(during.ratio, Some(2.0));
        assert_eq!(
            find(&rows, "four-by-64", "leader RssAnon after").ratio,
            Some(0.5)
        );
        let per_entry = find(&rows, "four-by-64", "messages per Raft entry");
        assert_eq!((per_entry.value, per_entry.target), (50.0, None));
        assert!(!rows
            .iter()
            .any(|r| r.figure == "messages per Raft entry"
                && (r.case == "single" || r.case == "async")));
        let fill = find(&rows, "single", "page cache new-page write");
        assert_eq!((fill.value, fill.target, fill.ratio), (900.0, None, None));
        let first = find(
            &rows,
            "single",
            "disk 32 KiB write+fdatasync p50, new blocks",
        );
        assert_eq!((first.value, first.target, first.ratio), (0.2, None, None));
        assert!(
            first.target_basis.contains("rewritten 0.10 ms"),
            "{}",
            first.target_basis
        );
        let a = find(&rows, "async", "produce rate");
        assert!((a.ratio.unwrap() - 1.0).abs() < 1e-9, "{a:?}");
        let text = render(&SuiteReport {
            nproc: 2,
            written_segments: 0,
            peer,
            nats_server: None,
            tcp_congestion: Some("bbr".into()),
            cases: results,
            rows,
        });
        assert!(text.starts_with("case"), "{text}");
        assert!(
            text.contains(">= 35200 msg/s (2 x NATS R3 17600)"),
            "{text}"
        );
        assert!(text.contains("not measured in this run"), "{text}");
        assert!(text.contains("50.0 msg/entry"), "{text}");
        assert!(text.contains("Host TCP congestion control: bbr"), "{text}");
        assert!(
            text.contains("900.0 MiB/s")
                && text.contains("- (rewrite of the cached pages 3000 MiB/s)"),
            "{text}"
        );
    }

    #[test]
    fn cpu_rows_give_time_per_message_and_flag_a_busy_host() {
        let mut four = result(Case::FourBy64, 40_000, 5000);
        four.cpu = CaseCpu::from_span(
            CpuFigures {
                machine: Some(MachineShares {
                    busy_pct: 70.0,
                    idle_pct: 10.0,
                    iowait_pct: 5.0,
                    interrupts_pct: 5.0,
                    steal_pct: 10.0,
                }),
                // Leader 0.6 s, one follower 0.3 s, the other unreadable, generator 0.2 s.
                process_cpu_s: vec![Some(0.6), Some(0.3), None, Some(0.2)],
            },
            2,
        );
        let mut single = result(Case::Single, 2000, 1000);
        single.cpu.machine = Some(MachineShares {
            steal_pct: 1.0,
            ..four.cpu.machine.unwrap()
        });
        let rows = rows(&PeerFigures::issue_reference(), &[single, four]);
        assert_eq!(
            find(&rows, "four-by-64", "leader CPU per message").value,
            15.0
        );
        assert_eq!(
            find(&rows, "four-by-64", "follower CPU per message (mean)").value,
            7.5
        );
        assert_eq!(
            find(&rows, "four-by-64", "load generator CPU per message").value,
            5.0
        );
        let steal = find(&rows, "four-by-64", "machine CPU stolen by the host");
        assert_eq!((steal.value, steal.target), (10.0, None));
        assert!(steal.target_basis.contains("rerun"), "{steal:?}");
        let calm = find(&rows, "single", "machine CPU stolen by the host");
        assert!(calm.target_basis.is_empty(), "{calm:?}");
        assert!(
            !rows
                .iter()
                .any(|r| r.case == "single" && r.unit == "us/msg"),
            "no process was read for single"
        );
        let report = |written_segments| SuiteReport {
            nproc: 2,
            written_segments,
            peer: PeerFigures::issue_reference(),
            nats_server: None,
            tcp_congestion: None,
            cases: Vec::new(),
            rows: rows.clone(),
        };
        let text = render(&report(0));
        assert!(
            text.contains("15.0 us/msg") && text.contains("10.0%"),
            "{text}"
        );
        assert!(text.contains("; fresh nodes ("), "{text}");
        let text = render(&report(3));
        assert!(
            text.contains("with 3 written segments in its free pool"),
            "{text}"
        );
    }

    #[test]
    fn a_target_on_a_case_not_run_says_so() {
        let mut consume = result(Case::ConsumeFollower, 1000, 100);
        consume.consume = Some(summary(5000, 1, 100));
        let batch = result(Case::Batch32, 100_000, 100);
        let rows = rows(&PeerFigures::issue_reference(), &[batch, consume]);
        let pull = find(&rows, "consume-follower", "follower pull rate");
        assert_eq!(pull.target, None);
        assert!(pull.target_basis.contains("four-by-64 not run"), "{pull:?}");
        // 300 MiB/s = 314.6 MB/s; 75% of a third is 78.6 MB/s; 102.4 MB/s beats it.
        let bw = find(&rows, "batch-32", "produce bandwidth");
        assert!((bw.target.unwrap() - 78.64).abs() < 0.01, "{bw:?}");
        assert!(bw.ratio.unwrap() > 1.0);
    }

    #[test]
    fn each_case_is_judged_against_the_disk_probed_before_it() {
        // The same send p50 against two minutes of the disk: 0.25 ms (target 0.6 ms) before
        // the first single run, 2 ms (target 4.1 ms) before the second.
        let fast = result(Case::Single, 2000, 1200);
        let mut slow = result(Case::Single, 2000, 1200);
        slow.disk.fdatasync_p50_us = 2000;
        slow.disk.write_sync_mib_per_s = 30.0;
        let mut batch = result(Case::Batch32, 100_000, 100);
        batch.disk.write_sync_mib_per_s = 30.0;
        let rows = rows(&PeerFigures::issue_reference(), &[fast, slow, batch]);
        let p50: Vec<&Row> = rows
            .iter()
            .filter(|r| r.case == "single" && r.figure == "send p50")
            .collect();
        assert_eq!(p50.len(), 2, "{rows:?}");
        assert!((p50[0].target.unwrap() - 0.6).abs() < 1e-9, "{:?}", p50[0]);
        assert!((p50[1].target.unwrap() - 4.1).abs() < 1e-9, "{:?}", p50[1]);
        // Each case's own probe sits in the table just before its figures.
        let i = rows.iter().position(|r| std::ptr::eq(r, p50[1])).unwrap();
        let probe = rows[..i]
            .iter()
            .rposition(|r| r.figure == "disk 1 KiB write+fdatasync p50")
            .unwrap();
        assert_eq!(rows[probe].value, 2.0);
        assert!(
            rows[probe..i].iter().all(|r| r.figure != "send p50"),
            "{rows:?}"
        );
        // 30 MiB/s = 31.46 MB/s; 75% of a third: 7.86 MB/s.
        let bw = find(&rows, "batch-32", "produce bandwidth");
        assert!((bw.target.unwrap() - 7.864).abs() < 0.01, "{bw:?}");
        assert_eq!(
            find(&rows, "batch-32", "disk 1 MiB write+fdatasync").value,
            30.0
        );
        assert!(rows.iter().all(|r| r.case != "disk"), "{rows:?}");
    }

    #[test]
    fn the_single_case_shows_its_floor_from_the_hop_probe() {
        let mut single = result(Case::Single, 2000, 600);
        single.hop = Some(HopFigures {
            round_trip_p50_us: 64,
            round_trip_p99_us: 100,
            round_trips: 20_000,
            cross_cpu: true,
        });
        let four = result(Case::FourBy64, 40_000, 5000);
        let rows = rows(&PeerFigures::issue_reference(), &[single, four]);
        let rtt = find(&rows, "single", "round trip between two processes p50");
        assert!((rtt.value - 0.064).abs() < 1e-9, "{rtt:?}");
        assert_eq!(rtt.target, None);
        assert_eq!(rtt.target_basis, "the two on different CPUs");
        // Two round trips and the probe's fdatasync p50 (0.25 ms).
        let floor = find(&rows, "single", "send floor on this machine");
        assert!((floor.value - 0.378).abs() < 1e-9, "{floor:?}");
        assert_eq!(floor.target, None);
        assert!(floor.target_basis.contains("round trips"), "{floor:?}");
        // Only the case that was probed has them.
        assert!(rows
            .iter()
            .all(|r| r.case == "single" || !r.figure.contains("round trip")));
        assert!(rows
            .iter()
            .all(|r| r.case == "single" || !r.figure.contains("floor")));
    }
}
