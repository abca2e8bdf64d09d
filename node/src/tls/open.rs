//! The connections a node has accepted and not yet closed, so that stopping the node ends them.
//!
//! tonic's graceful shutdown sends GOAWAY and then waits for each client to close its
//! connection; a producer with a stream open keeps it. The connection tasks tonic spawned
//! outlive an aborted server and hold the node's services, and through them its store: an
//! in-process restart then found the node's meta db still locked. [`OpenConns::close_all`]
//! shuts every accepted socket down, through a duplicate of its descriptor, which ends its
//! connection task at its next read (EOF) or write (`EPIPE`), as a process exit would.

use std::collections::HashMap;
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::Instant;

use socket2::SockRef;
use socket2::Socket;
use tokio::net::TcpStream;

/// The open connections of all listeners of one node.
#[derive(Clone, Default)]
pub struct OpenConns(Arc<Mutex<Inner>>);

#[derive(Default)]
struct Inner {
    next: u64,
    /// A duplicate descriptor of each open connection's socket, by registration id.
    socks: HashMap<u64, Socket>,
    /// Set by `close_all`: a connection registered afterwards is shut down at once.
    closed: bool,
}

/// One connection's entry; dropping it (with the connection) removes the entry.
pub struct Registration {
    id: u64,
    open: OpenConns,
}

impl OpenConns {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `tcp`. Refused (and the socket shut down) once [`close_all`](Self::close_all)
    /// ran, or when its descriptor cannot be duplicated (`EMFILE`): a connection this node
    /// could not end is not accepted.
    pub fn register(&self, tcp: &TcpStream) -> Result<Registration, String> {
        let sock = SockRef::from(tcp);
        let mut inner = self.lock();
        let refused = match sock.try_clone() {
            Ok(dup) if !inner.closed => {
                inner.next += 1;
                let id = inner.next;
                inner.socks.insert(id, dup);
                return Ok(Registration {
                    id,
                    open: self.clone(),
                });
            }
            Ok(_) => "the node is stopping".to_string(),
            Err(e) => format!("cannot duplicate the socket: {e}"),
        };
        let _ = sock.shutdown(Shutdown::Both);
        Err(refused)
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.lock().socks.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shuts every open connection down (and every one registered later), then waits up to
    /// `wait` for their tasks to drop them; returns how many were still open then.
    pub async fn close_all(&self, wait: Duration) -> usize {
        {
            let mut inner = self.lock();
            inner.closed = true;
            for s in inner.socks.values() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let until = Instant::now() + wait;
        while !self.is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.len()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.open.lock().socks.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn close_all_ends_a_pending_read_and_tells_the_peer() {
        let open = OpenConns::default();
        let (mut client, mut server) = pair().await;
        let reg = open.register(&server).expect("registered");
        assert_eq!(open.len(), 1);
        // The serving side waits in a read, as an idle connection task does.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            let n = server.read(&mut buf).await;
            drop(reg);
            n
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(open.close_all(Duration::from_secs(5)).await, 0);
        assert_eq!(
            reader.await.unwrap().unwrap(),
            0,
            "EOF for the server's read"
        );
        let mut buf = [0u8; 16];
        assert_eq!(
            client.read(&mut buf).await.unwrap(),
            0,
            "EOF for the client"
        );
    }

    #[tokio::test]
    async fn a_connection_registered_after_close_all_is_shut_down() {
        let open = OpenConns::default();
        assert_eq!(open.close_all(Duration::ZERO).await, 0);
        let (mut client, server) = pair().await;
        assert!(open.register(&server).is_err());
        assert!(open.is_empty());
        let mut buf = [0u8; 16];
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
        drop(server);
    }

    #[tokio::test]
    async fn a_dropped_registration_leaves_the_socket_alone() {
        let open = OpenConns::default();
        let (mut client, mut server) = pair().await;
        drop(open.register(&server).expect("registered"));
        assert!(open.is_empty());
        open.close_all(Duration::ZERO).await;
        // The connection itself is untouched: only registered sockets are shut down.
        server.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    }
}
