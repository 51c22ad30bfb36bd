//! A session's capabilities ([`SessionCapabilities`]) and its UI calls
//! ([`SessionUi`]: confirm, select, input, elicitation), written once as
//! futures on [`SessionOps`] (the async [`SessionUi`](crate::asynch::SessionUi)
//! awaits them, this one waits on them). What a call needs, its form and
//! how its answer is read are the core's ([`copilot_core::UI_CALLS`]); the
//! capabilities are kept by the reader, in frame order
//! ([`copilot_core::Capabilities`]).

use copilot_core::{Capability, UiCall};
use serde::Serialize;
use serde_json::{json, Value};

use super::session::{Session, SessionCalls, SessionOps};
use crate::answering::ElicitationResponse;
use crate::error::{Error, Result};
use crate::wait::block_on;

impl Session {
    /// What the CLI says this session can do, as it last said: set by the
    /// open's answer, kept current by `capabilities.changed` (read before
    /// the event is delivered to any handler or stream).
    pub fn capabilities(&self) -> SessionCapabilities {
        self.inner.capabilities().into()
    }

    /// The canvas instances open in this session (experimental), as the
    /// CLI last said, oldest first: each as the CLI describes it
    /// (`instanceId`, `extensionId`, `canvasId`, `title`, `url`, `input`,
    /// ...). Set by a resume's answer, kept current by
    /// `session.canvas.opened` and `session.canvas.closed` (read before the
    /// event is delivered), as the official SDKs keep them.
    pub fn open_canvases(&self) -> Vec<Value> {
        self.inner.open_canvases()
    }

    /// The session's UI calls (confirm, select, input, elicitation), which
    /// need [`capabilities`](Self::capabilities)`().ui.elicitation`.
    pub fn ui(&self) -> SessionUi<'_> {
        SessionUi { session: self, timeout: None }
    }
}

impl<'a> SessionCalls<'a> {
    /// See [`Session::ui`]; each call waits at most this timeout.
    pub fn ui(&self) -> SessionUi<'a> {
        SessionUi { session: self.session, timeout: self.timeout }
    }
}

/// What the CLI says a session can do, as it last said: set by the open's
/// answer and kept current by `capabilities.changed` (a client joining
/// the session with an elicitation handler, the last such client leaving).
/// A capability the CLI has not reported is `false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SessionCapabilities {
    /// The session's UI capabilities.
    pub ui: UiCapabilities,
    /// Extensions are enabled for the session.
    pub extensions: bool,
}

/// A session's UI capabilities ([`SessionCapabilities::ui`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct UiCapabilities {
    /// A client of the session answers elicitations: the session's UI
    /// calls ([`SessionUi`]) are answered.
    pub elicitation: bool,
    /// MCP Apps (SEP-1865) UI passthrough.
    pub mcp_apps: bool,
    /// Canvas rendering.
    pub canvases: bool,
}

impl From<copilot_core::Capabilities> for SessionCapabilities {
    fn from(c: copilot_core::Capabilities) -> Self {
        SessionCapabilities {
            ui: UiCapabilities {
                elicitation: c.has(Capability::Elicitation),
                mcp_apps: c.has(Capability::McpApps),
                canvases: c.has(Capability::Canvases),
            },
            extensions: c.has(Capability::Extensions),
        }
    }
}

/// The field of [`SessionUi::input`]: each one set goes as the form
/// field's member of its camel-case name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UiInputOptions {
    /// The field's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Text shown with the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fewest characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// The most characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// A format hint: `email`, `uri`, `date` or `date-time`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The value the field starts with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The UI calls of a session ([`Session::ui`]): forms
/// that a client of the session with an elicitation handler answers. Each
/// fails with [`Error::MissingCapability`] before anything is sent when
/// the session lacks the elicitation capability (no such client: a
/// headless CLI would wait forever). They wait for the user as long as
/// the session's calls may take (a minute unless
/// [`Session::with_timeout`](crate::Session::with_timeout) says).
#[derive(Clone, Copy)]
pub struct SessionUi<'a> {
    pub(crate) session: &'a Session,
    pub(crate) timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for SessionUi<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionUi").field("session", &self.session.id()).finish_non_exhaustive()
    }
}

impl SessionUi<'_> {
    fn ops(&self) -> SessionOps<'_> {
        self.session.ops(self.timeout)
    }

    /// Asks for a form of the caller's (`requested_schema`: a JSON schema
    /// object of the form's fields); the answer as the user gave it.
    pub fn elicitation(&self, message: &str, requested_schema: Value) -> Result<ElicitationResponse> {
        block_on(self.ops().ui_elicitation(message, requested_schema))
    }

    /// Asks yes or no: `true` only when the user accepted and said yes.
    pub fn confirm(&self, message: &str) -> Result<bool> {
        block_on(self.ops().ui_confirm(message))
    }

    /// Asks to pick one of `options`; `None` when the user declined or
    /// cancelled.
    pub fn select<S: AsRef<str>>(&self, message: &str, options: &[S]) -> Result<Option<String>> {
        block_on(self.ops().ui_select(message, options))
    }

    /// Asks for a line of text (`options`: the field's title, bounds, ...);
    /// `None` when the user declined or cancelled.
    pub fn input(&self, message: &str, options: Option<&UiInputOptions>) -> Result<Option<String>> {
        block_on(self.ops().ui_input(message, options))
    }
}

fn call(name: &str) -> &'static UiCall {
    copilot_core::ui_call(name).expect("the core has every UI call of this API")
}

impl SessionOps<'_> {
    /// Fails the call before anything is sent when the session lacks what
    /// it needs (the core decides).
    fn check(&self, call: &'static UiCall) -> Result<()> {
        copilot_core::check_ui_call(&self.session.inner.capabilities(), call).map_err(Error::MissingCapability)
    }

    async fn ui_request(&self, message: &str, form: Value) -> Result<Value> {
        let params = json!({ "sessionId": self.session.id(), "message": message, "requestedSchema": form });
        self.call(copilot_core::UI_ELICITATION_METHOD, &params).await
    }

    pub(crate) async fn ui_elicitation(&self, message: &str, requested_schema: Value) -> Result<ElicitationResponse> {
        self.check(call("elicitation"))?;
        let result = self.ui_request(message, requested_schema).await?;
        Ok(match result.get("action").and_then(Value::as_str) {
            Some("accept") => ElicitationResponse::Accept(result.get("content").cloned().unwrap_or_else(|| json!({}))),
            Some("decline") => ElicitationResponse::Decline,
            _ => ElicitationResponse::Cancel,
        })
    }

    /// A call of one field: checked, its form written and its answer read
    /// by the core.
    async fn ui_field(&self, name: &str, message: &str, extra: Option<Value>) -> Result<Option<Value>> {
        let call = call(name);
        self.check(call)?;
        let extra = extra.map(|e| e.to_string());
        let mut form = Vec::new();
        copilot_core::write_ui_form(call, extra.as_deref().map(str::as_bytes), &mut |b| form.extend_from_slice(b))
            .map_err(|e| Error::Config(e.to_string()))?;
        let form: Value = serde_json::from_slice(&form).map_err(|e| Error::Protocol(e.to_string()))?;
        let result = serde_json::to_vec(&self.ui_request(message, form).await?).unwrap_or_default();
        Ok(copilot_core::read_ui_answer(call, &result).and_then(|v| serde_json::from_slice(v.as_bytes()).ok()))
    }

    pub(crate) async fn ui_confirm(&self, message: &str) -> Result<bool> {
        Ok(self.ui_field("confirm", message, None).await?.is_some())
    }

    pub(crate) async fn ui_select<S: AsRef<str>>(&self, message: &str, options: &[S]) -> Result<Option<String>> {
        let options: Vec<&str> = options.iter().map(AsRef::as_ref).collect();
        let answer = self.ui_field("select", message, Some(json!({ "enum": options }))).await?;
        Ok(answer.and_then(|v| v.as_str().map(str::to_owned)))
    }

    pub(crate) async fn ui_input(&self, message: &str, options: Option<&UiInputOptions>) -> Result<Option<String>> {
        let extra =
            serde_json::to_value(options.cloned().unwrap_or_default()).map_err(|e| Error::Config(e.to_string()))?;
        let answer = self.ui_field("input", message, Some(extra)).await?;
        Ok(answer.and_then(|v| v.as_str().map(str::to_owned)))
    }
}
