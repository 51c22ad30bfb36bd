//! The writing side: one thread per connection writes queued frames, so no
//! caller ever blocks in a write to a CLI that stopped reading; callers wait
//! for their answers, with deadlines, instead.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::thread;

use crate::error::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes waiting for the writer thread, at most: a call beyond it waits
/// (until its deadline) for a CLI that stopped reading to catch up.
const MAX_OUTBOX_BYTES: usize = 16 << 20;

pub(super) enum PushError {
    Closed(String),
}

#[derive(Default)]
struct OutboxState {
    frames: VecDeque<Vec<u8>>,
    bytes: usize,
    /// No more frames: write what is queued, then drop the writer.
    closing: bool,
    /// Why frames are refused (a write failed, or the connection ended).
    failed: Option<String>,
    /// Callers waiting for room, woken when a frame is taken.
    room_wakers: Vec<Waker>,
}

impl OutboxState {
    /// The callers to wake: room was made, or the outbox ended.
    fn take_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.room_wakers)
    }
}

pub(super) struct Outbox {
    state: Mutex<OutboxState>,
    /// Signalled when a frame is queued, or on close.
    queued: Condvar,
}

impl Outbox {
    pub(super) fn start(label: &str, mut writer: Box<dyn Write + Send>) -> Result<Arc<Outbox>> {
        let outbox = Arc::new(Outbox { state: Mutex::default(), queued: Condvar::new() });
        let me = Arc::clone(&outbox);
        let label = label.to_owned();
        thread::Builder::new()
            .name(format!("copilot-writer ({label})"))
            .spawn(move || {
                while let Some(frame) = me.pop() {
                    if let Err(e) = writer.write_all(&frame).and_then(|()| writer.flush()) {
                        log::debug!("{label}: write failed: {e}");
                        me.fail(&format!("writing to the CLI failed: {e}"));
                    }
                }
                // Dropping the writer closes stdin or the socket's write half.
            })
            .map_err(Error::Io)?;
        Ok(outbox)
    }

    /// Queues a frame whatever is queued already (the engine's answers).
    pub(super) fn push_always(&self, frame: Vec<u8>) -> Result<(), PushError> {
        let mut state = lock(&self.state);
        if let Some(why) = &state.failed {
            return Err(PushError::Closed(why.clone()));
        }
        state.bytes += frame.len();
        state.frames.push_back(frame);
        drop(state);
        self.queued.notify_one();
        Ok(())
    }

    /// Queues `frame` (taken from the option) if there is room; else leaves
    /// it in place and wakes the caller's waker when room is made.
    pub(super) fn poll_push(
        &self,
        frame: &mut Option<Vec<u8>>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), PushError>> {
        let mut state = lock(&self.state);
        if let Some(why) = &state.failed {
            return std::task::Poll::Ready(Err(PushError::Closed(why.clone())));
        }
        if state.closing {
            return std::task::Poll::Ready(Err(PushError::Closed("the connection is being closed".into())));
        }
        let Some(len) = frame.as_ref().map(Vec::len) else { return std::task::Poll::Ready(Ok(())) };
        // One frame always fits, however large.
        if state.bytes != 0 && state.bytes + len > MAX_OUTBOX_BYTES {
            if !state.room_wakers.iter().any(|w| w.will_wake(cx.waker())) {
                state.room_wakers.push(cx.waker().clone());
            }
            return std::task::Poll::Pending;
        }
        state.bytes += len;
        state.frames.extend(frame.take());
        drop(state);
        self.queued.notify_one();
        std::task::Poll::Ready(Ok(()))
    }

    /// The next frame to write; `None` when closing and drained, or failed.
    pub(super) fn pop(&self) -> Option<Vec<u8>> {
        let mut state = lock(&self.state);
        loop {
            if state.failed.is_some() {
                return None;
            }
            if let Some(frame) = state.frames.pop_front() {
                state.bytes -= frame.len();
                let wakers = state.take_wakers();
                drop(state);
                wakers.into_iter().for_each(Waker::wake);
                return Some(frame);
            }
            if state.closing {
                return None;
            }
            state = self.queued.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub(super) fn close(&self) {
        let mut state = lock(&self.state);
        state.closing = true;
        let wakers = state.take_wakers();
        drop(state);
        self.queued.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Refuses every frame from now on and drops what waits.
    pub(super) fn fail(&self, why: &str) {
        let mut state = lock(&self.state);
        state.failed.get_or_insert_with(|| why.to_owned());
        state.frames.clear();
        state.bytes = 0;
        let wakers = state.take_wakers();
        drop(state);
        self.queued.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}
