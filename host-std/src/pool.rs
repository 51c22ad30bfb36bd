//! A bounded set of named threads running queued tasks in order of arrival.
//!
//! The client runs two: one delivers sessions' events (a session is queued
//! at most once at a time, so its events keep their order), one runs the
//! user's handlers. Neither grows with sessions or requests; a task never
//! waits to be queued, so the reader never blocks on a slow consumer.
//!
//! One thread starts with the pool (so a system that cannot start threads
//! fails the client's start, not a later event); the others start only when
//! a task is queued and every started thread is busy, up to the bound. A
//! connection that never runs a handler keeps one handler thread, not the
//! whole bound.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::sync::{thread, Condvar, Mutex, MutexGuard};

type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    tasks: VecDeque<Task>,
    closed: bool,
    /// Threads started (never more than the bound).
    started: usize,
    /// Threads waiting for a task.
    idle: usize,
}

/// A pool of at most `threads` threads. The queue's length is bounded by
/// its callers: a session is queued once at a time, and a handler task
/// exists only for an open obligation (a slot of the engine's table).
pub(crate) struct Pool {
    state: Mutex<State>,
    ready: Condvar,
    name: String,
    max: usize,
}

impl Pool {
    /// A pool of at most `threads` threads named `name`, one started now.
    pub(crate) fn start(name: &str, threads: usize) -> std::io::Result<Arc<Pool>> {
        let pool = Arc::new(Pool {
            state: Mutex::default(),
            ready: Condvar::new(),
            name: name.to_owned(),
            max: threads.max(1),
        });
        let mut state = pool.lock();
        Pool::spawn(&pool, &mut state)?;
        drop(state);
        Ok(pool)
    }

    /// Queues `task`; never waits. Starts a thread when every started one
    /// is busy and the bound allows.
    pub(crate) fn submit(self: &Arc<Self>, task: impl FnOnce() + Send + 'static) {
        let mut state = self.lock();
        state.tasks.push_back(Box::new(task));
        if state.tasks.len() > state.idle && state.started < self.max {
            // A thread that cannot start leaves the task to a started one.
            if let Err(e) = Pool::spawn(self, &mut state) {
                log::warn!("{}: no thread started for a queued task ({e}); it waits for a busy one", self.name);
            }
        }
        drop(state);
        self.ready.notify_one();
    }

    /// The threads end once the tasks queued are done.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Threads started so far.
    #[cfg(test)]
    fn started(&self) -> usize {
        self.lock().started
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(pool: &Arc<Pool>, state: &mut State) -> std::io::Result<()> {
        let me = Arc::clone(pool);
        thread::Builder::new().name(pool.name.clone()).spawn(move || me.run())?;
        state.started += 1;
        Ok(())
    }

    fn run(&self) {
        loop {
            let task = {
                let mut state = self.lock();
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

/// The message of a caught panic, for a log or an error.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_pool_that_ran_nothing_holds_one_thread() {
        let pool = Pool::start("pool-test", 16).unwrap();
        assert_eq!(pool.started(), 1);
        pool.close();
    }

    #[test]
    fn a_busy_thread_gets_company_up_to_the_bound_and_no_further() {
        let pool = Pool::start("pool-test", 2).unwrap();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (started_tx, started_rx) = mpsc::channel();
        // Two tasks that hold their threads until released: both run at
        // once, so the second got a thread of its own.
        for i in 0..2 {
            let (started, release) = (started_tx.clone(), Arc::clone(&release_rx));
            pool.submit(move || {
                started.send(i).unwrap();
                release.lock().unwrap().recv().unwrap();
            });
        }
        // (A safety net turns a hang into a failure; the claim is the order.)
        let next = || started_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("both tasks run at once");
        let mut running = [next(), next()];
        running.sort_unstable();
        assert_eq!(running, [0, 1]);
        // A third waits for one of them: the bound holds.
        let (done, third) = mpsc::channel();
        pool.submit(move || done.send(()).unwrap());
        assert_eq!(pool.started(), 2);
        release_tx.send(()).unwrap();
        third.recv().unwrap();
        release_tx.send(()).unwrap();
        assert_eq!(pool.started(), 2);
        pool.close();
    }
}

/// The pool's real code over the interleavings loom finds (run with
/// `RUSTFLAGS="--cfg loom"`, see `crate::sync`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::Pool;
    use loom::sync::{Arc, Condvar, Mutex};

    /// Tasks submitted while the pool's threads start, take tasks and go
    /// to wait each run exactly once: no submit is lost between a thread's
    /// last look at the queue and its wait (which loom would report as a
    /// deadlock of the submitter), and a second thread starts only while
    /// the first is busy. Two preemptions per run bound the search.
    #[test]
    fn loom_every_task_submitted_runs_once() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.check(|| {
            let pool = Pool::start("loom-pool", 2).unwrap();
            let ran = Arc::new((Mutex::new(0), Condvar::new()));
            for _ in 0..2 {
                let ran = Arc::clone(&ran);
                pool.submit(move || {
                    *ran.0.lock().unwrap() += 1;
                    ran.1.notify_all();
                });
            }
            let mut count = ran.0.lock().unwrap();
            while *count < 2 {
                count = ran.1.wait(count).unwrap();
            }
            assert_eq!(*count, 2, "each task once");
            drop(count);
            assert!(pool.lock().started <= 2);
            pool.close();
        });
    }
}
