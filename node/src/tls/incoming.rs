//! The accept loop of every gRPC listener: limits concurrent connections, runs the TLS
//! handshake (the certificate current at accept), on the peer port checks the client
//! certificate names a member, and only then hands the connection to tonic
//! (`serve_with_incoming_shutdown`). Refusals are logged, rate-limited.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::task::Context;
use std::task::Poll;
use std::time::Duration;
use std::time::Instant;

use futures::Stream;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;
use tonic::transport::server::TcpConnectInfo;

use super::admission::Admit;
use super::congestion::LoopbackCongestion;
use super::reload::TlsState;

/// Longest TLS handshake (plus member check) before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Refusals of one listener are logged at most this often (with the count in between).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// How one listener accepts connections.
pub struct ListenerOpts {
    /// The listener's name in log lines ("client", "rocketmq", "peer").
    pub name: &'static str,
    /// TLS material (None: plaintext).
    pub tls: Option<Arc<TlsState>>,
    /// Set on the peer port: mutual TLS and this member check.
    pub peer: Option<Arc<dyn Admit>>,
    /// Most concurrent connections.
    pub max_connections: usize,
    /// Set on each accepted connection from this host (`loopback-congestion-control`).
    pub congestion: LoopbackCongestion,
}

/// One accepted connection, holding its slot of the connection limit until closed.
pub struct Conn {
    io: ConnIo,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    _slot: OwnedSemaphorePermit,
}

enum ConnIo {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Logs refusals of one listener, at most once per [`REFUSAL_LOG_INTERVAL`].
struct Refusals {
    name: &'static str,
    /// (last logged, refusals since).
    state: Mutex<(Option<Instant>, u64)>,
}

impl Refusals {
    fn refuse(&self, remote: Option<SocketAddr>, reason: &str) {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = s.0.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_INTERVAL);
        if due {
            let suppressed = s.1;
            *s = (Some(Instant::now()), 0);
            drop(s);
            tracing::warn!(listener = self.name, remote = ?remote, suppressed, reason, "connection refused");
        } else {
            s.1 += 1;
        }
    }
}

/// The stream of admitted connections of `listener`; the accept task ends when it is dropped.
pub fn incoming(
    listener: TcpListener,
    opts: ListenerOpts,
) -> impl Stream<Item = Result<Conn, io::Error>> + Send + 'static {
    let (tx, rx) = mpsc::channel::<Conn>(64);
    tokio::spawn(accept_loop(listener, opts, tx));
    futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|c| (Ok(c), rx)) },
    )
}

async fn accept_loop(listener: TcpListener, opts: ListenerOpts, tx: mpsc::Sender<Conn>) {
    let slots = Arc::new(Semaphore::new(opts.max_connections));
    let refusals = Arc::new(Refusals {
        name: opts.name,
        state: Mutex::new((None, 0)),
    });
    let opts = Arc::new(opts);
    loop {
        let (tcp, remote) = tokio::select! {
            _ = tx.closed() => return,
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    refusals.refuse(None, &format!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refusals.refuse(
                Some(remote),
                &format!("max-connections ({}) reached", opts.max_connections),
            );
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        opts.congestion.apply(&tcp);
        let (opts, refusals, tx) = (opts.clone(), refusals.clone(), tx.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, admit(tcp, &opts, slot)).await {
                Ok(Ok(conn)) => {
                    let _ = tx.send(conn).await;
                }
                Ok(Err(reason)) => refusals.refuse(Some(remote), &reason),
                Err(_) => refusals.refuse(Some(remote), "TLS handshake timed out"),
            }
        });
    }
}

/// Handshake and member check of one connection.
async fn admit(
    tcp: TcpStream,
    opts: &ListenerOpts,
    slot: OwnedSemaphorePermit,
) -> Result<Conn, String> {
    let local = tcp.local_addr().ok();
    let remote = tcp.peer_addr().ok();
    let io = match &opts.tls {
        None => ConnIo::Plain(tcp),
        Some(tls) => {
            let m = tls.current();
            let config = if opts.peer.is_some() {
                m.peer_port.clone()
            } else {
                m.client_port.clone()
            };
            let stream = TlsAcceptor::from(config)
                .accept(tcp)
                .await
                .map_err(|e| format!("TLS handshake failed: {e}"))?;
            if let Some(check) = &opts.peer {
                let leaf = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .ok_or("no client certificate")?;
                check.admit(leaf)?;
            }
            ConnIo::Tls(Box::new(stream))
        }
    };
    Ok(Conn {
        io,
        local,
        remote,
        _slot: slot,
    })
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        TcpConnectInfo {
            local_addr: self.local,
            remote_addr: self.remote,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.io {
            ConnIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ConnIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.io {
            ConnIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ConnIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.io {
            ConnIo::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ConnIo::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            ConnIo::Plain(s) => s.is_write_vectored(),
            ConnIo::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            ConnIo::Plain(s) => Pin::new(s).poll_flush(cx),
            ConnIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            ConnIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ConnIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
