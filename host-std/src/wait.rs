//! How the blocking API waits: it runs the async API's future on the
//! calling thread, parking the thread until a waker (the reader, the
//! writer, the timer or the end of the connection) unparks it. So the
//! blocking and async APIs are one request path, one open sequence and one
//! turn rule; only the way of waiting differs.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use crate::sync::thread::{self, Thread};

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(Unpark(thread::current())))
}

#[cfg(not(loom))]
thread_local! {
    /// This thread's waker, made once: a wait that finds its answer ready
    /// costs no allocation.
    static THREAD_WAKER: Waker = thread_waker();
}

/// Polls `future` to its end on this thread, parked between polls. A wake
/// that comes before the park leaves the thread's token set, so the park
/// returns at once and no wake is lost; a spurious return only polls again.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    match block_on_until(future, None) {
        Some(out) => out,
        None => unreachable!("a wait without a deadline ends only with its future"),
    }
}

/// [`block_on`] until `deadline` at most (`None`: no deadline): `None` when
/// the deadline passed first. The future is polled once more after the
/// deadline, so what came just before it is not lost.
pub(crate) fn block_on_until<F: Future>(future: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut future = pin!(future);
    // A wait while the thread's locals are being destroyed makes its own
    // (as does every wait of the loom model, whose threads are its own).
    #[cfg(not(loom))]
    let waker = THREAD_WAKER.try_with(Waker::clone).unwrap_or_else(|_| thread_waker());
    #[cfg(loom)]
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        match deadline {
            None => thread::park(),
            Some(at) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => park_timeout(left),
                _ => return None,
            },
        }
    }
}

/// Parks the thread for `left` at most (loom has no timed park: its model
/// waits only without a deadline).
#[cfg(not(loom))]
fn park_timeout(left: std::time::Duration) {
    thread::park_timeout(left);
}

#[cfg(loom)]
fn park_timeout(_: std::time::Duration) {
    unreachable!("the loom model waits without a deadline")
}

#[cfg(test)]
mod tests {
    use super::block_on;
    use std::future::poll_fn;
    use std::sync::mpsc;
    use std::task::Poll;

    #[test]
    fn a_future_woken_from_another_thread_completes() {
        // The future is pending until another thread has its waker and
        // wakes it; order, not time, decides.
        let (tx, rx) = mpsc::channel();
        let helper = std::thread::spawn(move || {
            let waker: std::task::Waker = rx.recv().expect("a waker");
            waker.wake();
        });
        let mut sent = false;
        let out = block_on(poll_fn(|cx| {
            if sent {
                return Poll::Ready(7);
            }
            sent = true;
            tx.send(cx.waker().clone()).expect("the helper waits");
            Poll::Pending
        }));
        assert_eq!(out, 7);
        helper.join().expect("the helper ends");
    }

    #[test]
    fn a_wait_past_its_deadline_ends_without_a_value() {
        // A deadline already passed: the future is polled once, then given up.
        let mut polls = 0;
        let past = std::time::Instant::now();
        let out = super::block_on_until(
            poll_fn(|_| {
                polls += 1;
                Poll::<()>::Pending
            }),
            Some(past),
        );
        assert_eq!((out, polls), (None, 1));
    }
}
