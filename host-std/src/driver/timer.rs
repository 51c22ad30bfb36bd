//! The timer: one thread per connection sleeps until the engine's next
//! deadline (or an async wait's own), then the engine acts on what is due.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::WakerSlot;
use super::connection::{drain_parked_with, lock, Connection, Target, Waiter};
use crate::error::Error;
use copilot_core::Output;

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
        lock(&self.wake_at).push((at, slot));
        self.kick_timer(Some(self.at(at)));
    }

    /// Wakes the async waits whose deadline has passed; the earliest left.
    fn wake_due(&self) -> Option<u64> {
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut list = lock(&self.wake_at);
            list.retain(|(at, slot)| {
                let keep = *at > now;
                if !keep {
                    due.push(Arc::clone(slot));
                }
                keep
            });
            list.iter().map(|(at, _)| *at).min()
        };
        for slot in due {
            if let Some(w) = lock(&slot).take() {
                w.wake();
            }
        }
        next.map(|at| self.at(at))
    }

    pub(super) fn kick_timer(&self, next: Option<u64>) {
        let Some(next) = next else { return };
        let mut t = lock(&self.timer);
        if t.next.is_none_or(|n| next < n) {
            t.next = Some(next);
            drop(t);
            self.timer_wake.notify_one();
        }
    }

    /// Acts on the deadlines due: the engine refuses expired waits of the
    /// agent, and the callers of expired requests get `Timeout`.
    pub(super) fn on_timer(&self) -> Option<u64> {
        let mut expired = Vec::new();
        let next = {
            let mut engine = lock(&self.engine);
            let now = self.now();
            engine.handle_timeout(now, |_, w| expired.push(w));
            for w in &expired {
                if let Waiter::Open { handle, .. } = w {
                    engine.release(*handle);
                }
            }
            if expired.iter().any(|w| matches!(w, Waiter::Open { .. })) {
                drain_parked_with(&mut engine, now, |o| log_parked(&self.label, &o));
            }
            self.send_engine_frames(&mut engine);
            engine.poll_timeout()
        };
        for w in expired {
            w.fail(Error::Timeout { what: String::new(), after: Duration::ZERO });
        }
        match (next, self.wake_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

fn log_parked(label: &str, out: &Output<'_, Target, Waiter>) {
    log::debug!("{label}: a parked frame after a failed open: {:?}", out.refused);
}

/// The timer thread: sleeps until the engine's next deadline.
fn timer_loop(conn: &std::sync::Weak<Connection>) {
    loop {
        let Some(c) = conn.upgrade() else { return };
        // Deadlines added while the engine is asked are kicked in meanwhile.
        lock(&c.timer).next = None;
        let next = c.on_timer();
        let mut t = lock(&c.timer);
        t.next = match (t.next, next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if t.stop || Arc::strong_count(&c) == 1 {
            return;
        }
        let now = c.now();
        let wait = match t.next {
            Some(n) if n <= now => continue,
            // Nothing due: wake now and then to notice a connection dropped by all.
            Some(n) => Duration::from_millis(n - now).min(IDLE_TIMER),
            None => IDLE_TIMER,
        };
        drop(c.timer_wake.wait_timeout(t, wait).unwrap_or_else(|p| p.into_inner()));
    }
}
