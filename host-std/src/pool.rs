//! A fixed set of named threads running queued tasks in order of arrival.
//!
//! The client runs two: one delivers sessions' events (a session is queued
//! at most once at a time, so its events keep their order), one runs the
//! user's handlers. Neither grows with sessions or requests; a task never
//! waits to be queued, so the reader never blocks on a slow consumer.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    tasks: VecDeque<Task>,
    closed: bool,
}

/// A pool of `threads` threads. The queue's length is bounded by its
/// callers: a session is queued once at a time, and a handler task exists
/// only for an open obligation (a slot of the engine's table).
pub(crate) struct Pool {
    state: Mutex<State>,
    ready: Condvar,
}

impl Pool {
    /// Starts the threads, named `name`.
    pub(crate) fn start(name: &str, threads: usize) -> std::io::Result<Arc<Pool>> {
        let pool = Arc::new(Pool { state: Mutex::default(), ready: Condvar::new() });
        for _ in 0..threads {
            let me = Arc::clone(&pool);
            let name = name.to_owned();
            thread::Builder::new().name(name.clone()).spawn(move || me.run(&name))?;
        }
        Ok(pool)
    }

    /// Queues `task`; never waits.
    pub(crate) fn submit(&self, task: impl FnOnce() + Send + 'static) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.tasks.push_back(Box::new(task));
        drop(state);
        self.ready.notify_one();
    }

    /// The threads end once the tasks queued are done.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.ready.notify_all();
    }

    fn run(&self, name: &str) {
        loop {
            let task = {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(t) = state.tasks.pop_front() {
                        break t;
                    }
                    if state.closed {
                        return;
                    }
                    state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            };
            // The tasks catch the user's panics themselves; this is a backstop.
            if catch_unwind(AssertUnwindSafe(task)).is_err() {
                log::error!("{name}: a task panicked");
            }
        }
    }
}

/// The message of a caught panic, for a log or an error.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
