//! The machine's cost of one hop between two processes: one-byte round trips over loopback
//! TCP between this process and a child of its own (`raftmq bench echo`, a hidden command),
//! each side waiting in `read` for the other, as a send's way from the client to the leader
//! and from the leader to a follower does.
//!
//! A single send crosses two such round trips (client and leader, leader and follower) and
//! one follower's fdatasync before its ack, whatever the broker does in between: that sum is
//! the floor of target 1's latency on the machine the suite runs on. On the dev VM (two
//! vCPUs) a round trip took 64 us at p50 between processes on different vCPUs and 6.5 us
//! with both pinned to one: most of it is the sleeping vCPU's wake-up, not the network stack.
//! Left to the scheduler, the two processes sometimes shared one vCPU for a whole probe
//! (10 us), which a cluster's busy processes do not; so on a machine of two or more CPUs
//! the probe pins the two ends to two different CPUs, as a send's hops between the client,
//! the leader and a follower (or between machines) mostly are.

use std::io::ErrorKind;
use std::io::Read;
use std::io::Write;
use std::net::TcpListener;
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::Latencies;

/// The probe stops after this many round trips even with time left.
pub const MAX_ROUND_TRIPS: u64 = 20_000;
/// Round trips before the measured ones (the connection's and the scheduler's first steps).
const WARM_UP: u64 = 100;
/// How long the child may take to start and connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one read or write may wait before the probe gives up.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Round trips between two processes, measured by [`measure`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HopFigures {
    /// Median one-byte round trip, microseconds.
    pub round_trip_p50_us: u64,
    /// 99th percentile of the same, microseconds.
    pub round_trip_p99_us: u64,
    /// Round trips measured.
    pub round_trips: u64,
    /// The two ends ran pinned to two different CPUs (false: one CPU, or pinning failed).
    pub cross_cpu: bool,
}

/// Measures round trips to a child running `program bench echo` for at most `budget` (and
/// [`MAX_ROUND_TRIPS`]). `program` is the `raftmq` binary (this process's own executable).
pub fn measure(program: &Path, budget: Duration) -> anyhow::Result<HopFigures> {
    let listener =
        TcpListener::bind(("127.0.0.1", 0)).context("hop probe: bind a loopback port")?;
    let addr = listener.local_addr().context("hop probe: the bound port")?;
    let cpus = allowed_cpus();
    let mut cmd = Command::new(program);
    cmd.args(["bench", "echo", "--connect", &addr.to_string()]);
    let apart = match cpus.as_slice() {
        [mine, theirs, ..] => {
            cmd.args(["--cpu", &theirs.to_string()]);
            Some(*mine)
        }
        _ => None,
    };
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("hop probe: cannot start {} bench echo", program.display()))?;
    let _child = Reaped(child);
    let stream = accept_within(&listener, CONNECT_TIMEOUT)?;
    // This thread (a blocking-pool thread) gets its CPUs back afterwards.
    let pinned = apart.and_then(pin_current_thread);
    // Closing the stream (on return) ends the child's loop; `Reaped` then waits for it.
    let measured = ping(stream, budget, MAX_ROUND_TRIPS);
    if let Some(old) = &pinned {
        set_current_thread_cpus(old);
    }
    Ok(HopFigures {
        cross_cpu: pinned.is_some(),
        ..measured?
    })
}

/// The calling thread's CPU set (None: the kernel did not say).
fn current_thread_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its
    // size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// The CPUs this thread may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    let Some(set) = current_thread_cpus() else {
        return Vec::new();
    };
    // SAFETY: CPU_ISSET reads within the set for c < CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`; returns the set it had (None: pinning failed).
pub(crate) fn pin_current_thread(cpu: usize) -> Option<libc::cpu_set_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return None;
    }
    let old = current_thread_cpus()?;
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it for
    // cpu < CPU_SETSIZE.
    let one = unsafe {
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        one
    };
    set_current_thread_cpus(&one).then_some(old)
}

/// Lets the calling thread run on `set`; false if the kernel refused.
fn set_current_thread_cpus(set: &libc::cpu_set_t) -> bool {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) == 0 }
}

/// `raftmq bench echo`: connects to `addr` (on CPU `cpu` alone, if given) and sends back
/// every byte until the other end closes the connection.
pub fn echo(addr: &str, cpu: Option<usize>) -> anyhow::Result<()> {
    if let Some(cpu) = cpu {
        anyhow::ensure!(
            pin_current_thread(cpu).is_some(),
            "bench echo: cannot run on CPU {cpu}"
        );
    }
    let mut s = TcpStream::connect(addr).with_context(|| format!("bench echo: connect {addr}"))?;
    s.set_nodelay(true).context("bench echo: TCP_NODELAY")?;
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => s.write_all(&b).context("bench echo: write")?,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("bench echo: read"),
        }
    }
}

/// Round trips of one byte on `s` (the other end echoes it) for at most `budget` and `max`
/// measured ones, after [`WARM_UP`] unmeasured ones.
pub(crate) fn ping(mut s: TcpStream, budget: Duration, max: u64) -> anyhow::Result<HopFigures> {
    s.set_nodelay(true).context("hop probe: TCP_NODELAY")?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .context("hop probe: read timeout")?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .context("hop probe: write timeout")?;
    let one = |s: &mut TcpStream| -> anyhow::Result<Duration> {
        let t = Instant::now();
        s.write_all(b"x").context("hop probe: write")?;
        let mut b = [0u8; 1];
        s.read_exact(&mut b)
            .context("hop probe: no echo (the echo process stopped or stalled)")?;
        Ok(t.elapsed())
    };
    let start = Instant::now();
    for _ in 0..WARM_UP {
        one(&mut s)?;
    }
    let mut lat = Latencies::new();
    let mut n = 0;
    while n < max && (n == 0 || start.elapsed() < budget) {
        lat.record(one(&mut s)?);
        n += 1;
    }
    let sm = lat.summary();
    Ok(HopFigures {
        round_trip_p50_us: sm.p50_us,
        round_trip_p99_us: sm.p99_us,
        round_trips: n,
        cross_cpu: false,
    })
}

/// Waits at most `timeout` for one connection on `l`.
fn accept_within(l: &TcpListener, timeout: Duration) -> anyhow::Result<TcpStream> {
    l.set_nonblocking(true)
        .context("hop probe: non-blocking listener")?;
    let start = Instant::now();
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .context("hop probe: blocking stream")?;
                return Ok(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                anyhow::ensure!(
                    start.elapsed() < timeout,
                    "hop probe: the echo process did not connect within {timeout:?}"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e).context("hop probe: accept"),
        }
    }
}

/// The echo child, killed (if still running) and waited for when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // It ends by itself once the probe's stream closes; a stuck one is killed.
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe against an echo thread: every round trip answered, counted, and timed.
    #[test]
    fn pings_an_echo_peer() {
        let l = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let peer = std::thread::spawn(move || echo(&addr, None));
        let s = accept_within(&l, CONNECT_TIMEOUT).expect("the echo thread connects");
        let f = ping(s, Duration::from_secs(5), 500).expect("round trips");
        assert_eq!(f.round_trips, 500);
        assert!(f.round_trip_p50_us >= 1 && f.round_trip_p50_us <= f.round_trip_p99_us);
        peer.join()
            .expect("echo thread")
            .expect("echo ends cleanly when the probe closes");
    }

    /// A peer that never answers fails the probe with a clear error instead of hanging.
    #[test]
    fn a_silent_peer_is_an_error() {
        let l = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let addr = l.local_addr().expect("addr");
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let silent = std::thread::spawn(move || {
            let s = TcpStream::connect(addr).expect("connect");
            let _ = wait.recv();
            drop(s);
        });
        let s = accept_within(&l, CONNECT_TIMEOUT).expect("accept");
        let err = ping(s, Duration::from_secs(5), 10).expect_err("no echo");
        assert!(format!("{err:#}").contains("no echo"), "{err:#}");
        drop(done);
        silent.join().expect("silent thread");
    }

    /// Pinning a thread and giving its CPUs back.
    #[test]
    fn pins_and_restores_the_thread() {
        let before = allowed_cpus();
        let first = *before.first().expect("this thread may run somewhere");
        let old = pin_current_thread(first).expect("pinning to an allowed CPU works");
        assert_eq!(allowed_cpus(), vec![first]);
        assert!(set_current_thread_cpus(&old));
        assert_eq!(allowed_cpus(), before);
        assert!(pin_current_thread(libc::CPU_SETSIZE as usize).is_none());
    }

    /// Nobody connecting is an error after the timeout, not a hang.
    #[test]
    fn nobody_connecting_times_out() {
        let l = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let err = accept_within(&l, Duration::from_millis(50)).expect_err("no connection");
        assert!(format!("{err:#}").contains("did not connect"), "{err:#}");
    }
}
