//! A node's Prometheus `/metrics`, read over plain HTTP (the test config turns the listener
//! on with `metrics_addr`).

use std::io::Read;
use std::io::Write;
use std::time::Duration;

use raftmq_node::NodeHandle;

/// The body (with the response head) of `GET path` at `addr`.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect metrics");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// The value of metric `name` in `/metrics` of `n` (panics if it has none).
pub fn metric(n: &NodeHandle, name: &str) -> f64 {
    let text = http_get(n.addrs().metrics.expect("metrics on"), "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in {text}"))
}
