//! How a client stops, once for every host: the steps in order, each with
//! when it applies and what it sends. The whole stop shares one grace
//! period ([`DEFAULT_SHUTDOWN_GRACE_MS`](crate::limits::DEFAULT_SHUTDOWN_GRACE_MS)
//! unless the user says otherwise): every step waits at most for what is
//! left of it, so a CLI that does not answer delays a stop by the grace,
//! not by the grace per session.

/// One step of a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopStep {
    /// Each session still open is marked closing and sent
    /// `session.destroy {sessionId}`, all at once; the answers are awaited
    /// together. Every session is released whatever the answer; the first
    /// failure is the stop's error.
    DestroySessions,
    /// A CLI this client started (stdio or TCP) is sent `runtime.shutdown`
    /// with params `{}` while the connection is open: a TCP server does not
    /// end when its socket closes. An error answer or a closed connection
    /// is not a failure (the CLI may not know the method, or end first).
    ShutdownRuntime,
    /// The client's end of the connection is closed (stdin's EOF ends a
    /// stdio CLI).
    CloseWriter,
    /// A CLI this client started is awaited for what is left of the grace;
    /// past it, its process group is killed.
    AwaitExitOrKill,
    /// The connection is released: reading stops and every request still in
    /// flight fails as disconnected.
    Release,
}

/// Every step of a stop, in order.
pub static STOP_STEPS: &[StopStep] = &[
    StopStep::DestroySessions,
    StopStep::ShutdownRuntime,
    StopStep::CloseWriter,
    StopStep::AwaitExitOrKill,
    StopStep::Release,
];

impl StopStep {
    /// A stable camel-case name, as the JavaScript binding reports it.
    pub const fn name(self) -> &'static str {
        match self {
            StopStep::DestroySessions => "destroySessions",
            StopStep::ShutdownRuntime => "shutdownRuntime",
            StopStep::CloseWriter => "closeWriter",
            StopStep::AwaitExitOrKill => "awaitExitOrKill",
            StopStep::Release => "release",
        }
    }

    /// The method the step sends, if it sends one.
    pub const fn method(self) -> Option<&'static str> {
        match self {
            StopStep::DestroySessions => Some("session.destroy"),
            StopStep::ShutdownRuntime => Some("runtime.shutdown"),
            _ => None,
        }
    }

    /// Whether the step applies to a client that started its CLI
    /// (`spawned`) or not, with its connection still open (`connected`).
    pub const fn applies(self, spawned: bool, connected: bool) -> bool {
        match self {
            StopStep::DestroySessions => connected,
            StopStep::ShutdownRuntime => spawned && connected,
            StopStep::AwaitExitOrKill => spawned,
            StopStep::CloseWriter | StopStep::Release => true,
        }
    }

    /// Whether an error answer (or a closed connection) to the step's
    /// request fails the stop.
    pub const fn error_fails_stop(self) -> bool {
        matches!(self, StopStep::DestroySessions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_started_cli_is_shut_down_then_awaited_and_a_connected_one_only_closed() {
        let steps = |spawned, connected| {
            let mut v = heapless::Vec::<&str, 8>::new();
            for s in STOP_STEPS.iter().filter(|s| s.applies(spawned, connected)) {
                v.push(s.name()).unwrap();
            }
            v
        };
        assert_eq!(
            steps(true, true),
            ["destroySessions", "shutdownRuntime", "closeWriter", "awaitExitOrKill", "release"]
        );
        assert_eq!(steps(false, true), ["destroySessions", "closeWriter", "release"]);
        assert_eq!(steps(true, false), ["closeWriter", "awaitExitOrKill", "release"]);
        assert_eq!(StopStep::ShutdownRuntime.method(), Some("runtime.shutdown"));
        assert!(StopStep::DestroySessions.error_fails_stop() && !StopStep::ShutdownRuntime.error_fails_stop());
    }
}
