//! `loopback-congestion-control`: the TCP congestion control of a node's gRPC connections whose
//! two ends are on this host (a local cluster's peers, a client or consumer on the broker's host).
//!
//! Such a connection runs over the loopback device, which has no link to share and no queue
//! to keep short, so pacing its sends gains nothing. With the host's BBR and no `fq` queueing
//! discipline on `lo` (the usual case) the kernel paces each socket itself, a timer per burst:
//! a leader sending AppendEntries of about 120 KB (batches of 32) used 10-17% more CPU per
//! message than with `reno`, the default here, which does not pace. `reno` is built into every
//! Linux kernel and allowed to unprivileged processes unless the host's
//! `net.ipv4.tcp_allowed_congestion_control` leaves it out. Connections to other hosts keep
//! the host's choice; `system` leaves every connection alone.
//!
//! Set on the node's own sockets only: accepted connections ([`super::incoming`]) and the
//! node's outgoing ones ([`super::connect_lazy`]: peers, the leader when forwarding).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpStream;

/// Default of `loopback-congestion-control`.
pub const DEFAULT_LOOPBACK_CONGESTION_CONTROL: &str = "reno";
/// The value that leaves every connection with the host's congestion control.
pub const SYSTEM: &str = "system";
/// Longest algorithm name Linux takes (`TCP_CA_NAME_MAX` less its terminating zero).
const MAX_NAME: usize = 15;

/// Why `name` cannot be `loopback-congestion-control`'s value (a congestion control's name,
/// or [`SYSTEM`]), if so.
pub fn name_error(name: &str) -> Option<String> {
    let ok = name == SYSTEM
        || !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (!ok).then(|| {
        format!(
            "{name:?} is not a congestion control name (1 to {MAX_NAME} letters, digits, '_' or \
             '-', as in net.ipv4.tcp_available_congestion_control), nor {SYSTEM:?}"
        )
    })
}

/// The setting as the node applies it: the algorithm for same-host connections, or none.
#[derive(Clone, Debug)]
pub struct LoopbackCongestion {
    algorithm: Option<Arc<str>>,
    /// Set once a `setsockopt` failed and was logged, so that one warning says it.
    warned: Arc<AtomicBool>,
}

impl LoopbackCongestion {
    /// From the setting's (validated) value.
    pub fn new(value: &str) -> Self {
        Self {
            algorithm: (value != SYSTEM).then(|| Arc::from(value)),
            warned: Arc::default(),
        }
    }

    /// The algorithm set on same-host connections (None: the host's choice everywhere).
    pub fn algorithm(&self) -> Option<&str> {
        self.algorithm.as_deref()
    }

    /// Tries the algorithm on a fresh socket, so that a name this host lacks or does not
    /// allow is reported when the node starts rather than on its first connection.
    pub fn probe(&self) -> Result<(), String> {
        let Some(name) = self.algorithm() else {
            return Ok(());
        };
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .map_err(|e| format!("a TCP socket to try it on: {e}"))?;
        set(&socket2::SockRef::from(&socket), name).map_err(|e| format!("TCP_CONGESTION: {e}"))
    }

    /// Sets the algorithm on `tcp` if both its ends are on this host. A failure is logged
    /// (once per setting) and leaves the connection with the host's congestion control.
    pub fn apply(&self, tcp: &TcpStream) {
        let Some(name) = self.algorithm() else {
            return;
        };
        let (Ok(local), Ok(remote)) = (tcp.local_addr(), tcp.peer_addr()) else {
            return;
        };
        if !same_host(local, remote) {
            return;
        }
        if let Err(e) = set(&socket2::SockRef::from(tcp), name) {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(algorithm = name, error = %e,
                    "loopback-congestion-control: TCP_CONGESTION failed; connections on this \
                     host keep the host's congestion control");
            }
        }
    }
}

/// Whether a connection between `local` and `remote` stays on this host: a loopback peer, or
/// one of this host's own addresses (which Linux routes over the loopback device too).
pub fn same_host(local: SocketAddr, remote: SocketAddr) -> bool {
    let remote = remote.ip().to_canonical();
    remote.is_loopback() || remote == local.ip().to_canonical()
}

#[cfg(any(target_os = "linux", target_os = "freebsd"))]
fn set(socket: &socket2::SockRef<'_>, name: &str) -> std::io::Result<()> {
    socket.set_tcp_congestion(name.as_bytes())
}

#[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
fn set(_: &socket2::SockRef<'_>, _: &str) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "TCP_CONGESTION exists on Linux and FreeBSD only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_error("reno").is_none());
        assert!(name_error("cubic").is_none());
        assert!(name_error(SYSTEM).is_none());
        assert!(name_error("")
            .unwrap()
            .contains("not a congestion control name"));
        assert!(name_error("a-very-long-algorithm").is_some());
        assert!(name_error("re no").is_some());
        assert!(name_error("reno\0").is_some());
    }

    #[test]
    fn same_host_addresses() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(same_host(a("127.0.0.1:1"), a("127.0.0.1:2")));
        assert!(same_host(a("10.0.0.5:1"), a("127.0.0.2:2")));
        assert!(same_host(a("10.0.0.5:1"), a("10.0.0.5:2")));
        assert!(same_host(a("[::1]:1"), a("[::1]:2")));
        assert!(same_host(
            a("[::ffff:10.0.0.5]:1"),
            a("[::ffff:127.0.0.1]:2")
        ));
        assert!(!same_host(a("10.0.0.5:1"), a("10.0.0.6:2")));
        assert!(!same_host(a("[2001:db8::1]:1"), a("[2001:db8::2]:2")));
    }

    fn congestion_of(tcp: &TcpStream) -> String {
        let name = socket2::SockRef::from(tcp).tcp_congestion().unwrap();
        String::from_utf8_lossy(&name)
            .trim_end_matches('\0')
            .to_string()
    }

    /// The real kernel: a loopback connection gets the algorithm on both ends' sockets,
    /// and `system` leaves the host's.
    #[tokio::test]
    async fn loopback_connection_gets_the_algorithm() {
        let reno = LoopbackCongestion::new("reno");
        reno.probe().expect("reno is always built in and allowed");
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        let host = congestion_of(&client);
        LoopbackCongestion::new(SYSTEM).apply(&client);
        assert_eq!(congestion_of(&client), host);
        reno.apply(&client);
        reno.apply(&server);
        assert_eq!(congestion_of(&client), "reno");
        assert_eq!(congestion_of(&server), "reno");
    }

    #[tokio::test]
    async fn unknown_algorithm_is_reported_by_the_probe() {
        let e = LoopbackCongestion::new("nosuchalgo").probe().unwrap_err();
        assert!(e.starts_with("TCP_CONGESTION: "), "{e}");
        // Applying it anyway fails quietly: the connection keeps working.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let before = congestion_of(&client);
        LoopbackCongestion::new("nosuchalgo").apply(&client);
        assert_eq!(congestion_of(&client), before);
    }
}
