//! A value set once by one thread and awaited by a future.

use std::sync::Mutex;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A value set once by one thread and awaited by a future: the waker the
/// future last left is woken (outside the lock) when the value arrives.
pub(crate) struct Completion<T> {
    state: Mutex<(Option<T>, Option<std::task::Waker>, bool)>,
}

impl<T> Default for Completion<T> {
    fn default() -> Self {
        Completion { state: Mutex::new((None, None, false)) }
    }
}

impl<T> Completion<T> {
    /// Sets the value (the first time only) and wakes the future.
    pub(crate) fn complete(&self, value: T) {
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
    pub(crate) fn poll_take(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
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
    pub(crate) fn is_done(&self) -> bool {
        lock(&self.state).2
    }
}
