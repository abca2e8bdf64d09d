//! CPU time during a load: how the machine's CPUs were spent (`/proc/stat`: busy, idle,
//! iowait, softirq, and **steal**, the time the hypervisor ran something else while a vCPU
//! wanted to run) and each process's own CPU time (`/proc/<pid>/stat`: utime + stime).
//!
//! On a shared VM the host's other load shows up as steal: in one sitting, runs of the same
//! build at 19–25% steal reached 11–13k msg/s and runs at 0–4% steal 17–22k. A figure measured
//! with the CPUs stolen is the host's, not raftmq's, so the suite prints the steal next to
//! each case. Linux only; elsewhere every figure is `None`.

use serde::Serialize;

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineTicks {
    /// user + nice.
    pub user: u64,
    /// system.
    pub system: u64,
    /// idle.
    pub idle: u64,
    /// iowait (idle with I/O outstanding).
    pub iowait: u64,
    /// irq + softirq.
    pub interrupts: u64,
    /// steal: runnable but the hypervisor ran something else.
    pub steal: u64,
}

impl MachineTicks {
    fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.iowait + self.interrupts + self.steal
    }
}

/// Parses the first (`cpu `) line of a `/proc/stat` text; None if it is missing or malformed.
/// Kernels before 2.6.11 have no steal column; it reads as 0 then.
pub fn parse_proc_stat(text: &str) -> Option<MachineTicks> {
    let line = text.lines().next()?;
    let mut words = line.split_whitespace();
    if words.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = words.map(str::parse).collect::<Result<_, _>>().ok()?;
    if v.len() < 7 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(MachineTicks {
        user: at(0) + at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        interrupts: at(5) + at(6),
        steal: at(7),
    })
}

/// Parses utime + stime (clock ticks) out of a `/proc/<pid>/stat` text. The command name
/// (field 2) is in parentheses and may hold spaces and parentheses itself, so the fields are
/// counted from the last `)`.
pub fn parse_pid_stat(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: state (3), ppid (4), ... utime (14), stime (15): indexes 11 and 12.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn machine_ticks() -> Option<MachineTicks> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn process_ticks(pid: u32) -> Option<u64> {
    parse_pid_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Clock ticks per second of `/proc`'s counters.
fn ticks_per_s() -> Option<f64> {
    // SAFETY: sysconf(3) takes a constant and touches no memory of ours.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (t > 0).then_some(t as f64)
}

/// How the machine's CPUs were spent over a span, percent of all CPU time (the shares add up
/// to 100).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MachineShares {
    /// user + nice + system.
    pub busy_pct: f64,
    /// idle (iowait not included).
    pub idle_pct: f64,
    /// iowait.
    pub iowait_pct: f64,
    /// irq + softirq (on loopback, much of the network stack).
    pub interrupts_pct: f64,
    /// steal: taken by the host.
    pub steal_pct: f64,
}

/// The shares between two readings; None if no time passed or the counters went back.
pub fn shares(before: MachineTicks, after: MachineTicks) -> Option<MachineShares> {
    let total = after.total().checked_sub(before.total())?;
    if total == 0 {
        return None;
    }
    let pct = |a: u64, b: u64| a.checked_sub(b).map(|d| 100.0 * d as f64 / total as f64);
    Some(MachineShares {
        busy_pct: pct(after.user + after.system, before.user + before.system)?,
        idle_pct: pct(after.idle, before.idle)?,
        iowait_pct: pct(after.iowait, before.iowait)?,
        interrupts_pct: pct(after.interrupts, before.interrupts)?,
        steal_pct: pct(after.steal, before.steal)?,
    })
}

/// Readings taken at the start of a span: the machine and some processes.
pub struct CpuSpan {
    machine: Option<MachineTicks>,
    processes: Vec<(u32, Option<u64>)>,
}

/// What a [`CpuSpan`] measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuFigures {
    /// The machine's split; None where `/proc/stat` is unreadable.
    pub machine: Option<MachineShares>,
    /// CPU seconds of each process given to [`CpuSpan::start`], in that order; None for one
    /// that could not be read at both ends (gone, or no `/proc`).
    pub process_cpu_s: Vec<Option<f64>>,
}

impl CpuSpan {
    /// Takes the first readings of the machine and of `pids`.
    pub fn start(pids: &[u32]) -> Self {
        Self {
            machine: machine_ticks(),
            processes: pids.iter().map(|&p| (p, process_ticks(p))).collect(),
        }
    }

    /// Takes the second readings.
    pub fn finish(self) -> CpuFigures {
        let hz = ticks_per_s();
        let process_cpu_s = self
            .processes
            .iter()
            .map(|&(pid, before)| {
                let d = process_ticks(pid)?.checked_sub(before?)?;
                Some(d as f64 / hz?)
            })
            .collect();
        CpuFigures {
            machine: self
                .machine
                .zip(machine_ticks())
                .and_then(|(a, b)| shares(a, b)),
            process_cpu_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_computes_shares() {
        let a =
            parse_proc_stat("cpu  100 10 50 800 20 0 5 15 0 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!(
            a,
            MachineTicks {
                user: 110,
                system: 50,
                idle: 800,
                iowait: 20,
                interrupts: 5,
                steal: 15
            }
        );
        let b = parse_proc_stat("cpu  130 10 100 880 30 0 15 35 0 0\n").unwrap();
        // 200 ticks passed: busy 80, idle 80, iowait 10, interrupts 10, steal 20.
        let s = shares(a, b).unwrap();
        assert_eq!(
            (
                s.busy_pct,
                s.idle_pct,
                s.iowait_pct,
                s.interrupts_pct,
                s.steal_pct
            ),
            (40.0, 40.0, 5.0, 5.0, 10.0)
        );
        assert_eq!(shares(b, a), None, "counters that went back");
        assert_eq!(shares(a, a), None, "no time passed");
        // An old kernel without the steal column.
        assert_eq!(
            parse_proc_stat("cpu 1 2 3 4 5 6 7\n").map(|t| t.steal),
            Some(0)
        );
        for bad in [
            "",
            "cpu0 1 2 3 4 5 6 7 8",
            "cpu 1 2 3",
            "cpu 1 2 x 4 5 6 7 8",
        ] {
            assert_eq!(parse_proc_stat(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parses_pid_stat_with_an_awkward_name() {
        let fields = "S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 1";
        assert_eq!(
            parse_pid_stat(&format!("42 (raftmq-node) {fields}")),
            Some(281)
        );
        assert_eq!(parse_pid_stat(&format!("42 (a (b) c) {fields}")), Some(281));
        assert_eq!(parse_pid_stat("42 (x) S 1 2"), None);
        assert_eq!(parse_pid_stat("no parenthesis"), None);
    }

    #[test]
    fn measures_this_process() {
        let me = std::process::id();
        let span = CpuSpan::start(&[me, u32::MAX]);
        let mut x = 0u64;
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        while std::time::Instant::now() < until {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let f = span.finish();
        assert!(x > 0);
        assert_eq!(f.process_cpu_s.len(), 2);
        assert!(f.process_cpu_s[0].is_some_and(|s| s > 0.0), "{f:?}");
        assert_eq!(f.process_cpu_s[1], None, "no such process");
        let m = f.machine.expect("/proc/stat on Linux");
        let sum = m.busy_pct + m.idle_pct + m.iowait_pct + m.interrupts_pct + m.steal_pct;
        assert!((sum - 100.0).abs() < 1e-6, "{m:?}");
    }
}
