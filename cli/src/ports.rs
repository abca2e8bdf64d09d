//! Picking free TCP ports on 127.0.0.1 for local clusters and tests.
//!
//! Asking the OS for port 0 and releasing the listener is racy in two ways: the kernel may hand
//! the same port out again at the next `bind(0)`, and every outgoing connection takes its local
//! port from the same ephemeral range, so a port released now can be the source port of some
//! peer connection by the time the node binds it (or rebinds it after a restart). Ports are
//! therefore picked *below* the kernel's ephemeral range (`ip_local_port_range`), never twice
//! in one process, and probed by binding before they are handed out.

use std::net::Ipv4Addr;
use std::net::SocketAddr;
use std::net::TcpListener;
use std::sync::Mutex;
use std::time::SystemTime;

/// Lowest port ever picked (below it live well-known and registered services).
const FLOOR: u16 = 10_000;
/// Used when the ephemeral range cannot be read (Linux's default start).
const DEFAULT_EPHEMERAL_LOW: u16 = 32_768;

/// Ports handed out by this process, and the next candidate.
struct Picker {
    next: u16,
    low: u16,
    high: u16,
    given: std::collections::HashSet<u16>,
}

static PICKER: Mutex<Option<Picker>> = Mutex::new(None);

/// The first port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_LOW)
}

/// The range ports are picked from: `[FLOOR, ephemeral low)`, or above the ephemeral range
/// when a system has moved it down to the floor.
fn pick_range() -> (u16, u16) {
    let low = ephemeral_low();
    if low > FLOOR + 1_000 {
        (FLOOR, low - 1)
    } else {
        let high = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u16>().ok())
            .unwrap_or(60_999);
        (high.saturating_add(1).min(64_000), 65_000)
    }
}

/// `n` distinct ports on 127.0.0.1 that were free when probed, outside the ephemeral range and
/// never returned before by this process.
pub fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let mut guard = PICKER.lock().unwrap_or_else(|e| e.into_inner());
    let picker = guard.get_or_insert_with(|| {
        let (low, high) = pick_range();
        // Start each process somewhere else, so parallel test processes rarely probe the
        // same ports.
        let seed = u64::from(std::process::id()).wrapping_mul(7_919)
            ^ SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| u64::from(d.subsec_nanos()))
                .unwrap_or(0);
        let span = u64::from(high - low) + 1;
        Picker {
            next: low + (seed % span) as u16,
            low,
            high,
            given: Default::default(),
        }
    });
    let span = usize::from(picker.high - picker.low) + 1;
    let mut out = Vec::with_capacity(n);
    let mut tried = 0;
    while out.len() < n {
        anyhow::ensure!(
            tried < span,
            "no free TCP port left on 127.0.0.1 between {} and {}",
            picker.low,
            picker.high
        );
        tried += 1;
        let port = picker.next;
        picker.next = if port >= picker.high {
            picker.low
        } else {
            port + 1
        };
        if picker.given.contains(&port) {
            continue;
        }
        if TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_ok() {
            picker.given.insert(port);
            out.push(port);
        }
    }
    Ok(out)
}

/// One free address on 127.0.0.1 (see [`free_ports`]).
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let port = free_ports(1)?[0];
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_free_and_below_the_ephemeral_range() {
        let (low, high) = pick_range();
        let a = free_ports(20).unwrap();
        let b = free_ports(20).unwrap();
        let mut all: Vec<u16> = a.iter().chain(&b).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 40, "a port was handed out twice");
        for p in all {
            assert!((low..=high).contains(&p), "{p} outside {low}..={high}");
            TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, p))).unwrap();
        }
    }

    #[test]
    fn a_taken_port_is_skipped() {
        let held = TcpListener::bind(free_addr().unwrap()).unwrap();
        let taken = held.local_addr().unwrap().port();
        // Point the picker at the held port: it must skip it.
        {
            let mut g = PICKER.lock().unwrap();
            let p = g.as_mut().unwrap();
            p.given.remove(&taken);
            p.next = taken;
        }
        let got = free_ports(1).unwrap()[0];
        assert_ne!(got, taken);
    }
}
