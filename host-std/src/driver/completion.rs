//! A value set once by one thread and awaited by a future.

use crate::sync::{Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A value set once by one thread and awaited by a future: the waker the
/// future last left is woken (outside the lock) when the value arrives.
pub struct Completion<T> {
    state: Mutex<(Option<T>, Option<std::task::Waker>, bool)>,
}

impl<T> Default for Completion<T> {
    fn default() -> Self {
        Completion { state: Mutex::new((None, None, false)) }
    }
}

impl<T> Completion<T> {
    /// Sets the value (the first time only) and wakes the future.
    pub fn complete(&self, value: T) {
        let mut s = lock(&self.state);
        if s.2 {
            return;
        }
        s.0 = Some(value);
        s.2 = true;
        let waker = s.1.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The value, once set; else leaves `cx`'s waker to be woken.
    pub fn poll_take(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
        let mut s = lock(&self.state);
        if let Some(v) = s.0.take() {
            return std::task::Poll::Ready(Some(v));
        }
        if s.2 {
            // Taken already by an earlier poll.
            return std::task::Poll::Ready(None);
        }
        match &mut s.1 {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        std::task::Poll::Pending
    }

    /// Whether the value was set.
    pub fn is_done(&self) -> bool {
        lock(&self.state).2
    }
}

/// A call's completion and the blocking wait on it, their real code over
/// every interleaving loom finds (run with `RUSTFLAGS="--cfg loom"`, see
/// `crate::sync`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::Completion;
    use std::future::poll_fn;
    use std::sync::Arc;

    /// The value set by another thread (the reader, the timer) reaches a
    /// caller parked in `block_on`, whichever comes first: the set, the
    /// caller's first poll or its park. A lost wake-up would leave the
    /// caller parked, which loom reports as a deadlock.
    #[test]
    fn loom_a_value_set_by_another_thread_wakes_the_blocked_caller() {
        loom::model(|| {
            let slot: Arc<Completion<u32>> = Arc::new(Completion::default());
            let setter = {
                let slot = Arc::clone(&slot);
                loom::thread::spawn(move || slot.complete(7))
            };
            let got = crate::wait::block_on(poll_fn(|cx| slot.poll_take(cx)));
            assert_eq!(got, Some(7));
            assert!(slot.is_done());
            setter.join().unwrap();
        });
    }

    /// A second value is not taken: the first set wins, once.
    #[test]
    fn loom_the_first_value_set_is_the_one_taken() {
        loom::model(|| {
            let slot: Arc<Completion<u32>> = Arc::new(Completion::default());
            let a = {
                let slot = Arc::clone(&slot);
                loom::thread::spawn(move || slot.complete(1))
            };
            slot.complete(2);
            a.join().unwrap();
            let got = crate::wait::block_on(poll_fn(|cx| slot.poll_take(cx)));
            assert!(matches!(got, Some(1 | 2)));
            let again = crate::wait::block_on(poll_fn(|cx| slot.poll_take(cx)));
            assert_eq!(again, None, "taken once");
        });
    }
}
