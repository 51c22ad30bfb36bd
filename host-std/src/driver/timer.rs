//! The timer: one thread per connection sleeps until the state's next
//! deadline (the engine's, or an async wait's own), then hands the state
//! the time and acts on what it decided.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::WakerSlot;
use super::connection::{lock, Connection};
use crate::error::Error;

/// How often an idle timer looks whether its connection is gone.
const IDLE_TIMER: Duration = Duration::from_secs(1);

impl Connection {
    /// Starts the timer thread, which holds the connection weakly: it ends
    /// when the connection ends or is dropped.
    pub(super) fn start_timer(self: &Arc<Self>) -> crate::error::Result<()> {
        let timer = Arc::downgrade(self);
        std::thread::Builder::new()
            .name(format!("copilot-timer ({})", self.label))
            .spawn(move || timer_loop(&timer))
            .map_err(Error::Io)?;
        Ok(())
    }

    /// Wakes the waker in `slot` once `at` has passed (the timer thread
    /// does it); the async waits with a deadline of their own use it.
    pub(crate) fn wake_at(&self, at: Instant, slot: WakerSlot) {
        let at = self.at(at);
        self.with_state(|s, _| s.wake_at(at, slot));
    }

    /// Acts on the deadlines due: the engine refuses expired waits of the
    /// agent, the callers of expired requests get `Timeout`, and the async
    /// waits due are woken. When the state has work next.
    pub(super) fn on_timer(&self) -> Option<u64> {
        let expired = self.with_state(|s, now| s.handle_timeout(now));
        for w in expired.failed {
            w.fail(Error::Timeout { what: String::new(), after: Duration::ZERO });
        }
        for slot in expired.woken {
            let waker = lock(&slot).take();
            if let Some(w) = waker {
                w.wake();
            }
        }
        self.read_state(|s| s.poll_timeout())
    }
}

/// The timer thread: sleeps until the state's next deadline.
fn timer_loop(conn: &std::sync::Weak<Connection>) {
    loop {
        let Some(c) = conn.upgrade() else { return };
        let _ = c.on_timer();
        let mut locked = lock(&c.locked);
        if locked.state.is_closed() || Arc::strong_count(&c) == 1 {
            return;
        }
        // Read under the lock the wait starts under: a deadline added
        // from now on sees when the timer wakes, and wakes it sooner.
        let now = c.now();
        let wait = match locked.state.poll_timeout() {
            Some(n) if n <= now => continue,
            // Nothing due: wake now and then to notice a connection dropped by all.
            Some(n) => Duration::from_millis(n - now).min(IDLE_TIMER),
            None => IDLE_TIMER,
        };
        locked.timer_sleeps_until = Some(now + u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        let (mut locked, _) = c.timer_wake.wait_timeout(locked, wait).unwrap_or_else(|p| p.into_inner());
        locked.timer_sleeps_until = None;
    }
}
