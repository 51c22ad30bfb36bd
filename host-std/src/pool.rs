//! A bounded set of named threads running queued tasks in order of arrival.
//!
//! The client runs two: one delivers sessions' events (a session is queued
//! at most once at a time, so its events keep their order), one runs the
//! user's handlers. Neither grows past its bound with sessions or
//! requests; a task never waits to be queued, so the reader never blocks
//! on a slow consumer. Threads start as tasks need them (one at first), so
//! a client with one busy session runs a few threads, not the bound.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    tasks: VecDeque<Task>,
    closed: bool,
    /// Threads started.
    threads: usize,
    /// Threads waiting for a task.
    idle: usize,
}

/// A pool of at most `max` threads. The queue's length is bounded by its
/// callers: a session is queued once at a time, and a handler task exists
/// only for an open obligation (a slot of the engine's table).
pub(crate) struct Pool {
    state: Mutex<State>,
    ready: Condvar,
    name: String,
    max: usize,
}

impl Pool {
    /// Starts the first thread, named `name`; up to `threads` as needed.
    pub(crate) fn start(name: &str, threads: usize) -> std::io::Result<Arc<Pool>> {
        let pool = Arc::new(Pool {
            state: Mutex::default(),
            ready: Condvar::new(),
            name: name.to_owned(),
            max: threads.max(1),
        });
        lock(&pool.state).threads = 1;
        pool.spawn()?;
        Ok(pool)
    }

    fn spawn(self: &Arc<Self>) -> std::io::Result<()> {
        let me = Arc::clone(self);
        thread::Builder::new().name(self.name.clone()).spawn(move || me.run()).map(drop)
    }

    /// Queues `task`; never waits. Starts a thread if every one is busy and
    /// the bound allows.
    pub(crate) fn submit(self: &Arc<Self>, task: impl FnOnce() + Send + 'static) {
        let mut state = lock(&self.state);
        state.tasks.push_back(Box::new(task));
        let grow = state.tasks.len() > state.idle && state.threads < self.max;
        if grow {
            state.threads += 1;
        }
        drop(state);
        if !grow {
            self.ready.notify_one();
        } else if let Err(e) = self.spawn() {
            // The threads already started run the task.
            log::warn!("{}: cannot start another thread: {e}", self.name);
            lock(&self.state).threads -= 1;
            self.ready.notify_one();
        }
    }

    /// The threads end once the tasks queued are done.
    pub(crate) fn close(&self) {
        lock(&self.state).closed = true;
        self.ready.notify_all();
    }

    fn run(&self) {
        loop {
            let task = {
                let mut state = lock(&self.state);
                loop {
                    if let Some(t) = state.tasks.pop_front() {
                        break t;
                    }
                    if state.closed {
                        return;
                    }
                    state.idle += 1;
                    state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.idle -= 1;
                }
            };
            // The tasks catch the user's panics themselves; this is a backstop.
            if catch_unwind(AssertUnwindSafe(task)).is_err() {
                log::error!("{}: a task panicked", self.name);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
