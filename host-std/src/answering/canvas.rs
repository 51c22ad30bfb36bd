//! Canvases (experimental): panels a session declares and serves. Each
//! [`Canvas`] is declared on the session's create or resume (its id,
//! names, input schema and actions, without the handlers) and answers the
//! CLI's `canvas.open`, `canvas.close` and `canvas.action.invoke` for its
//! id with its handlers, as the official Node SDK's `createCanvas` does.
//! What goes back is the core's rule (`copilot_core::CANVAS_REQUESTS`): the
//! handler's result, `{}` for an open that gives `null`, `null` for a
//! close; a handler's [`CanvasError`] (or a panic) as a JSON-RPC error with
//! its code; an unknown action or canvas as the official SDKs answer them.

use std::fmt;
use std::sync::Arc;

use copilot_core::{CanvasCall, CANVAS_ACTION_NO_HANDLER, CANVAS_HANDLER_ERROR, CANVAS_UNKNOWN_PREFIX};
use serde_json::{json, Value};

use super::outcome::{json, Outcome};

/// A canvas request of the CLI, as its handler reads it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CanvasContext {
    /// The session asking.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub session_id: String,
    /// The provider's id as the CLI names it (`connection:N`, or the
    /// session's `canvas_provider` / `extension_info` id).
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub extension_id: String,
    /// The canvas (one of the session's).
    pub canvas_id: String,
    /// The panel: the agent's handle for it.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub instance_id: String,
    /// The action asked for (`canvas.action.invoke` only).
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub action_name: Option<String>,
    /// The open's or the action's input, if any.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub input: Option<Value>,
    /// What the host (renderer) can do, as the CLI's schema describes it.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub host: Option<Value>,
    /// The session's context (its working directory), as the CLI's
    /// schema describes it.
    #[serde(default, deserialize_with = "crate::events::lenient")]
    pub session: Option<Value>,
}

/// A canvas handler's failure: a machine-readable `code` and a message,
/// sent as the error's `data` (`{code, message}`) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanvasError {
    /// The machine-readable code.
    pub code: String,
    /// The message.
    pub message: String,
}

impl CanvasError {
    /// An error with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        CanvasError { code: code.into(), message: message.into() }
    }

    /// An error with the core's code for a failed handler
    /// (`canvas_handler_error`).
    pub fn failed(message: impl Into<String>) -> Self {
        CanvasError::new(CANVAS_HANDLER_ERROR, message)
    }

    /// The error of an action without a handler
    /// (`canvas_action_no_handler`).
    pub fn no_handler() -> Self {
        CanvasError::new(CANVAS_ACTION_NO_HANDLER.0, CANVAS_ACTION_NO_HANDLER.1)
    }
}

impl fmt::Display for CanvasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CanvasError {}

/// What an open or an action handler gives: its result (JSON), or its
/// failure.
pub type CanvasResult<T = Value> = Result<T, CanvasError>;

type ValueFn = dyn Fn(&CanvasContext) -> CanvasResult + Send + Sync;
type CloseFn = dyn Fn(&CanvasContext) -> CanvasResult<()> + Send + Sync;

/// An action the agent may invoke on a canvas (`invoke_canvas_action`).
#[derive(Clone)]
pub struct CanvasAction {
    /// Its name, unique within the canvas (not starting with `canvas.`).
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// A JSON schema of its input.
    pub input_schema: Option<Value>,
    handler: Option<Arc<ValueFn>>,
}

impl CanvasAction {
    /// The action `name`, run by `handler` (its result goes to the agent).
    pub fn new(
        name: impl Into<String>,
        handler: impl Fn(&CanvasContext) -> CanvasResult + Send + Sync + 'static,
    ) -> Self {
        CanvasAction { name: name.into(), description: None, input_schema: None, handler: Some(Arc::new(handler)) }
    }

    /// The action `name`, declared without a handler: the agent is told
    /// that it has none ([`CanvasError::no_handler`]), as by the official
    /// SDKs.
    pub fn without_handler(name: impl Into<String>) -> Self {
        CanvasAction { name: name.into(), description: None, input_schema: None, handler: None }
    }

    /// The same action, described for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The same action, with a JSON schema of its input.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }
}

impl fmt::Debug for CanvasAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CanvasAction").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A canvas the session declares and serves (experimental).
#[derive(Clone)]
pub struct Canvas {
    /// Its id, unique within the session's canvases.
    pub id: String,
    /// Its name in host UI.
    pub display_name: String,
    /// One sentence for the agent's catalog of canvases.
    pub description: String,
    /// A JSON schema of the open's input.
    pub input_schema: Option<Value>,
    /// The actions the agent may invoke.
    pub actions: Vec<CanvasAction>,
    open: Arc<ValueFn>,
    on_close: Option<Arc<CloseFn>>,
}

impl Canvas {
    /// The canvas `id`, opened by `open`: its result (`{url?, title?,
    /// status?}`, as the CLI's schema describes it; `null` for `{}`) goes
    /// to the agent.
    pub fn new(
        id: impl Into<String>,
        display_name: impl Into<String>,
        description: impl Into<String>,
        open: impl Fn(&CanvasContext) -> CanvasResult + Send + Sync + 'static,
    ) -> Self {
        Canvas {
            id: id.into(),
            display_name: display_name.into(),
            description: description.into(),
            input_schema: None,
            actions: Vec::new(),
            open: Arc::new(open),
            on_close: None,
        }
    }

    /// The same canvas, with a JSON schema of the open's input.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The same canvas, with `action`.
    pub fn action(mut self, action: CanvasAction) -> Self {
        self.actions.push(action);
        self
    }

    /// The same canvas, told by `handler` when an instance closes.
    pub fn on_close(mut self, handler: impl Fn(&CanvasContext) -> CanvasResult<()> + Send + Sync + 'static) -> Self {
        self.on_close = Some(Arc::new(handler));
        self
    }

    /// The declaration sent on the open: the canvas without its handlers.
    pub(crate) fn declaration(&self) -> Value {
        let mut d = json!({ "id": self.id, "displayName": self.display_name, "description": self.description });
        if let Some(schema) = &self.input_schema {
            d["inputSchema"] = schema.clone();
        }
        if !self.actions.is_empty() {
            let actions: Vec<Value> = self
                .actions
                .iter()
                .map(|a| {
                    let mut w = json!({ "name": a.name });
                    if let Some(text) = &a.description {
                        w["description"] = text.clone().into();
                    }
                    if let Some(schema) = &a.input_schema {
                        w["inputSchema"] = schema.clone();
                    }
                    w
                })
                .collect();
            d["actions"] = actions.into();
        }
        d
    }
}

impl fmt::Debug for Canvas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Canvas")
            .field("id", &self.id)
            .field("actions", &self.actions)
            .field("on_close", &self.on_close.is_some())
            .finish_non_exhaustive()
    }
}

/// The outcome of the canvas request `method` (params `data`) for a session
/// with `canvases` (at least one: without, there is no handler). A panic of
/// a handler is caught around the whole decision and fails it with the
/// core's code.
pub(super) fn answer(canvases: &[Canvas], method: &str, data: &[u8]) -> Outcome {
    let Some(request) = copilot_core::canvas_request(method) else {
        return Outcome::Refuse(copilot_core::Cause::NoHandler);
    };
    let Ok(ctx) = serde_json::from_slice::<CanvasContext>(data) else {
        return Outcome::Refuse(copilot_core::Cause::Unreadable);
    };
    let Some(canvas) = canvases.iter().find(|c| c.id == ctx.canvas_id) else {
        return failed(CanvasError::failed(format!("{CANVAS_UNKNOWN_PREFIX}\"{}\"", ctx.canvas_id)));
    };
    let given = match request.call {
        CanvasCall::Open => (canvas.open)(&ctx),
        CanvasCall::Close => match &canvas.on_close {
            Some(h) => h(&ctx).map(|()| Value::Null),
            None => Ok(Value::Null),
        },
        CanvasCall::Action => {
            let name = ctx.action_name.as_deref().unwrap_or_default();
            match canvas.actions.iter().find(|a| a.name == name).and_then(|a| a.handler.as_ref()) {
                Some(handler) => handler(&ctx),
                None => Err(CanvasError::no_handler()),
            }
        }
    };
    match given {
        // A close answers `null` whatever its handler did; nothing else
        // goes for a handler that gives nothing.
        Ok(Value::Null) => Outcome::Answer(request.nothing.as_bytes().to_vec()),
        Ok(_) if request.call == CanvasCall::Close => Outcome::Answer(request.nothing.as_bytes().to_vec()),
        Ok(v) => Outcome::Answer(json(&v)),
        Err(e) => failed(e),
    }
}

fn failed(e: CanvasError) -> Outcome {
    Outcome::FailCoded(e.code, e.message)
}
