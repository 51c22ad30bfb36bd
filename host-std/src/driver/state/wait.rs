//! Waits of the agent as the state hands them to handlers, and the lane
//! of those that must run one at a time in the order the CLI sent them.

use std::collections::VecDeque;

use copilot_core::{HandlerKind, ObligationId};

/// One wait of the agent to hand to a handler: the engine's obligation,
/// and the data the handler reads.
#[derive(Debug)]
pub struct Wait {
    /// Give it back to settle it (`DriverState::settle`).
    pub id: ObligationId,
    /// Which handler answers.
    pub kind: HandlerKind,
    /// The awaited event's type or the server request's method, as the
    /// answer table names it.
    pub name: &'static str,
    /// For an event, its JSON object; for a server request, its params.
    pub data: Vec<u8>,
}

/// Client-wide waits that run one at a time in the order the CLI sent them
/// (an inference request's chunks are its body, or its WebSocket's
/// messages: a pool runs its tasks side by side, which would let a later
/// chunk overtake an earlier one), and whether a task takes them.
#[derive(Default)]
pub(super) struct InOrder {
    queue: VecDeque<Wait>,
    running: bool,
}

impl InOrder {
    /// Queues `wait`: whether a task must be started to take the lane's
    /// waits (none is taking them).
    pub(super) fn push(&mut self, wait: Wait) -> bool {
        self.queue.push_back(wait);
        !std::mem::replace(&mut self.running, true)
    }

    /// The next wait for the task; `None` ends the task (the next wait
    /// pushed starts another).
    pub(super) fn next(&mut self) -> Option<Wait> {
        let next = self.queue.pop_front();
        self.running = next.is_some();
        next
    }
}
