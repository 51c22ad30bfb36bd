//! Handlers for the agent's other waits: requests and awaited events that
//! have no typed handler here (the session filesystem, sampling, auto mode
//! switches, session limits, queued commands, MCP header refreshes,
//! canvases, workflows, tasks, skill providers, GitHub tokens, ...), each
//! answered by a function from its data to its answer, by name.
//!
//! The name is the server request's method (`sessionFs.readFile`) or the
//! awaited event's type (`sampling.requested`), as the engine's answer
//! table ([`copilot_core::ANSWERS`]) lists them. The handler gets the
//! request's params or the event's `data`, and returns the JSON that goes
//! back: the response's `result`, or what goes under the answering RPC's
//! key (for `sampling.requested`, the `response` of
//! `session.ui.handlePendingSampling`). An `Err` is logged and the engine's
//! refusal for that kind goes, as it does without a handler.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use copilot_core::{Trigger, ANSWERS};

#[cfg(feature = "rpc-types")]
use serde::Deserialize as _;
use serde_json::Value;

/// The names a generic handler can be set for: the method or event type of
/// every row of the answer table whose kind has no typed handler (the
/// core's [`generic_request_names`](copilot_core::generic_request_names)).
pub fn generic_request_names() -> impl Iterator<Item = &'static str> {
    copilot_core::generic_request_names()
}

/// One wait a generic handler answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IncomingRequest {
    /// The server request's method or the awaited event's type.
    pub name: &'static str,
    /// The session it came for (`None` for a client-wide request).
    pub session_id: Option<String>,
    /// The request's params, or the event's `data`.
    pub params: Value,
}

/// Answers one kind of request; closures
/// `Fn(&IncomingRequest) -> Result<Value, String>` are handlers. An `Err`
/// says why there is no answer (logged; the engine's refusal goes).
pub trait RequestHandler: Send + Sync {
    /// The answer; may block.
    fn handle(&self, request: &IncomingRequest) -> Result<Value, String>;
}

impl<F: Fn(&IncomingRequest) -> Result<Value, String> + Send + Sync> RequestHandler for F {
    fn handle(&self, request: &IncomingRequest) -> Result<Value, String> {
        self(request)
    }
}

/// Generic handlers by name. Set them with `SessionConfig::on_request`
/// (requests and events of a session) or `ClientOptions::on_request`
/// (client-wide requests, which carry no session id).
#[derive(Clone, Default)]
pub struct RequestHandlers {
    by_name: HashMap<String, Arc<dyn RequestHandler>>,
}

impl fmt::Debug for RequestHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("RequestHandlers").field("names", &names).finish()
    }
}

impl RequestHandlers {
    /// Sets the handler of `name` (replacing one set before).
    pub fn insert(&mut self, name: impl Into<String>, handler: Arc<dyn RequestHandler>) {
        self.by_name.insert(name.into(), handler);
    }

    /// Whether no handler is set.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Refuses names no generic handler can answer: a handler set for one
    /// would never run.
    pub(crate) fn check(&self) -> crate::Result<()> {
        let bad = self.unknown_names();
        if bad.is_empty() {
            return Ok(());
        }
        Err(crate::Error::Config(format!(
            "no request handler can be set for {}: not a request or awaited event without a typed handler \
             (see copilot_host::generic_request_names)",
            bad.join(", ")
        )))
    }

    /// The names that no generic handler can answer, if any: unknown to the
    /// answer table, or answered by a typed handler or an option.
    pub(crate) fn unknown_names(&self) -> Vec<&str> {
        let mut bad: Vec<&str> =
            self.by_name.keys().map(String::as_str).filter(|n| !generic_request_names().any(|g| g == *n)).collect();
        bad.sort_unstable();
        bad
    }

    /// The handler's answer to the wait `name`, or `None` without one.
    pub(crate) fn handle(&self, request: &IncomingRequest) -> Option<Result<Value, String>> {
        self.by_name.get(request.name).map(|h| h.handle(request))
    }
}

/// A generic handler over the typed params and result of the server request
/// `M` (feature `rpc-types`): params that do not fit `M::Params` fail the
/// handler (the engine's refusal goes).
#[cfg(feature = "rpc-types")]
pub(crate) fn typed<M: crate::rpc::RpcMethod + 'static>(
    handler: impl Fn(M::Params) -> Result<M::Result, String> + Send + Sync + 'static,
) -> impl RequestHandler
where
    M::Params: serde::de::DeserializeOwned,
    M::Result: serde::Serialize,
{
    move |request: &IncomingRequest| {
        let params = M::Params::deserialize(&request.params)
            .map_err(|e| format!("the params of {} do not fit its types: {e}", M::NAME))?;
        let result = handler(params)?;
        serde_json::to_value(result).map_err(|e| format!("the result of {} cannot be written: {e}", M::NAME))
    }
}

/// Whether `name` is an awaited event's type (else a request's method).
pub(crate) fn is_event(name: &str) -> bool {
    ANSWERS.iter().any(|r| matches!(r.trigger, Trigger::Event(t) if t == name))
}

/// The `data` of an awaited event (its JSON object), `null` if it has none.
pub(crate) fn event_data(event: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Event {
        #[serde(default)]
        data: Value,
    }
    serde_json::from_slice::<Event>(event).ok().map(|e| e.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "rpc-types")]
    #[test]
    fn a_typed_handler_reads_params_and_writes_its_result() {
        use crate::rpc::{methods::SessionFsReadFile, SessionFsReadFileResult};
        let h = typed::<SessionFsReadFile>(|p| {
            Ok(SessionFsReadFileResult { content: format!("contents of {}", p.path), error: None })
        });
        let call = |params: Value| h.handle(&IncomingRequest { name: "sessionFs.readFile", session_id: None, params });
        assert_eq!(
            call(serde_json::json!({"sessionId": "s", "path": "/a"})),
            Ok(serde_json::json!({"content": "contents of /a"}))
        );
        assert!(call(serde_json::json!({"sessionId": "s"})).is_err(), "no path: the handler fails");
    }

    #[test]
    fn every_kind_without_a_typed_handler_has_its_names_and_no_other_does() {
        let names: Vec<&str> = generic_request_names().collect();
        for n in ["sessionFs.readFile", "sampling.requested", "command.queued", "gitHubToken.getToken", "host.shutdown"]
        {
            assert!(names.contains(&n), "{n}");
        }
        for n in ["hooks.invoke", "permission.requested", "systemMessage.transform", "providerToken.getToken"] {
            assert!(!names.contains(&n), "{n}");
        }
    }

    #[test]
    fn a_name_no_generic_handler_can_answer_is_reported() {
        let mut h = RequestHandlers::default();
        let f: Arc<dyn RequestHandler> = Arc::new(|_: &IncomingRequest| Ok(Value::Null));
        h.insert("sessionFs.stat", Arc::clone(&f));
        assert!(h.unknown_names().is_empty());
        h.insert("permission.requested", Arc::clone(&f));
        h.insert("sessionFs.nope", f);
        assert_eq!(h.unknown_names(), ["permission.requested", "sessionFs.nope"]);
    }
}
