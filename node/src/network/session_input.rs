//! Tying openraft's request stream of one replication session to the life of its reply side.
//!
//! openraft's request streams of all sessions to one follower draw from one shared state (the
//! next entries to send). hyper keeps polling a request body after the caller dropped the
//! response of a streaming call, so without this a timed-out session's request stream would go
//! on taking entries meant for the next session and send them on a stream nobody reads: the
//! new session then believes them sent, waits for new log entries, and the follower's matched
//! index stays behind on an idle cluster (issue 13). [`SessionInput`] hands the request stream
//! to tonic; its [`InputGuard`], kept by the reply side, drops the request stream at once when
//! the session ends (releasing openraft's lock on the shared state) and ends the body.
//!
//! Invariant: once the guard is dropped, the wrapped stream is dropped and is never polled
//! again; the body yields `None` from then on.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::task::Context;
use std::task::Poll;

use futures::task::AtomicWaker;
use futures::Stream;

use super::lock;

/// The request stream as tonic polls it (see the module docs).
pub(super) struct SessionInput<S> {
    shared: Arc<Shared<S>>,
}

/// Ends the [`SessionInput`] it was made with when dropped.
pub(super) struct InputGuard {
    cancel: Option<Box<dyn FnOnce() + Send>>,
}

struct Shared<S> {
    /// `None` once the session ended.
    inner: Mutex<Option<S>>,
    /// The task polling the body, woken to see the end.
    waker: AtomicWaker,
}

/// Wraps `inner`; dropping the returned guard ends the stream.
pub(super) fn session_input<S>(inner: S) -> (SessionInput<S>, InputGuard)
where
    S: Stream + Send + Unpin + 'static,
{
    let shared = Arc::new(Shared {
        inner: Mutex::new(Some(inner)),
        waker: AtomicWaker::new(),
    });
    let cancel_shared = shared.clone();
    let cancel = Box::new(move || {
        let taken = lock(&cancel_shared.inner).take();
        // Dropped outside the lock: dropping openraft's stream runs its destructors.
        drop(taken);
        cancel_shared.waker.wake();
    });
    (
        SessionInput { shared },
        InputGuard {
            cancel: Some(cancel),
        },
    )
}

impl Drop for InputGuard {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel();
        }
    }
}

impl<S: Stream + Unpin> Stream for SessionInput<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.shared.waker.register(cx.waker());
        let mut inner = lock(&self.shared.inner);
        match inner.as_mut() {
            None => Poll::Ready(None),
            Some(s) => Pin::new(s).poll_next(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering;

    use futures::StreamExt;

    use super::*;

    /// A stream that never ends and records being dropped.
    struct Endless {
        dropped: Arc<AtomicBool>,
    }

    impl Stream for Endless {
        type Item = u32;
        fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<u32>> {
            Poll::Ready(Some(7))
        }
    }

    impl Drop for Endless {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn dropping_the_guard_drops_the_inner_stream_and_ends_the_body() {
        let dropped = Arc::new(AtomicBool::new(false));
        let (mut input, guard) = session_input(Endless {
            dropped: dropped.clone(),
        });
        assert_eq!(input.next().await, Some(7));
        assert!(!dropped.load(Ordering::SeqCst));
        drop(guard);
        assert!(
            dropped.load(Ordering::SeqCst),
            "inner stream dropped with the guard, not when the body is next polled"
        );
        assert_eq!(input.next().await, None);
        assert_eq!(input.next().await, None);
    }

    #[tokio::test]
    async fn a_body_waiting_for_the_next_request_is_woken_by_the_end() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        let (mut input, guard) = session_input(rx);
        let waiter = tokio::spawn(async move { input.next().await });
        tokio::task::yield_now().await;
        drop(guard);
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .expect("joined");
        assert_eq!(got, None);
        assert!(tx.is_closed(), "receiver dropped with the guard");
    }
}
