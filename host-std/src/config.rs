//! The options of `session.create` and `session.resume`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::handlers::{
    Command, ElicitationHandler, ExitPlanModeHandler, McpOAuthHandler, PermissionHandler, SessionHandlers, Tool,
    UserInputHandler,
};

/// Options of `session.create` and `session.resume`.
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    /// The session id to use. `None`: a fresh UUID v4 chosen by the client,
    /// so that the session is known before the CLI answers.
    pub session_id: Option<String>,
    /// Send no id and let the CLI name the session. Frames for unknown
    /// sessions are then held until the answer names it.
    pub server_assigned_id: bool,
    /// The model, such as `claude-sonnet-4.5`. Pass it: without it the CLI
    /// picks its own default.
    pub model: Option<String>,
    /// The directory tools run in.
    pub working_directory: Option<PathBuf>,
    /// Deliver `assistant.message_delta` events as the reply streams.
    pub streaming: bool,
    /// A name shown by `session.list`.
    pub client_name: Option<String>,
    /// Any other `session.create` parameter, passed through as is.
    pub extra: Map<String, Value>,
    /// What the session answers the agent's requests with.
    pub handlers: SessionHandlers,
}

impl SessionConfig {
    /// A config for `model`.
    pub fn with_model(model: impl Into<String>) -> Self {
        SessionConfig { model: Some(model.into()), ..Self::default() }
    }

    /// Answers permission prompts with `handler` (and asks the CLI for
    /// prompts: without a handler it denies every tool that needs one).
    pub fn on_permission(mut self, handler: impl PermissionHandler + 'static) -> Self {
        self.handlers.permission = Some(Arc::new(handler));
        self
    }

    /// Answers permission prompts with a shared handler such as
    /// [`approve_all`](crate::approve_all).
    pub fn on_permission_shared(mut self, handler: Arc<dyn PermissionHandler>) -> Self {
        self.handlers.permission = Some(handler);
        self
    }

    /// Offers `tool` to the model; this client runs it.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.handlers.tools.push(tool);
        self
    }

    /// Answers the agent's questions to the user (adds the `ask_user` tool).
    pub fn on_user_input(mut self, handler: impl UserInputHandler + 'static) -> Self {
        self.handlers.user_input = Some(Arc::new(handler));
        self
    }

    /// Answers elicitations (forms and URLs MCP servers ask for).
    pub fn on_elicitation(mut self, handler: impl ElicitationHandler + 'static) -> Self {
        self.handlers.elicitation = Some(Arc::new(handler));
        self
    }

    /// Provides OAuth tokens to MCP servers that need them.
    pub fn on_mcp_oauth(mut self, handler: impl McpOAuthHandler + 'static) -> Self {
        self.handlers.mcp_oauth = Some(Arc::new(handler));
        self
    }

    /// Answers requests to leave plan mode.
    pub fn on_exit_plan_mode(mut self, handler: impl ExitPlanModeHandler + 'static) -> Self {
        self.handlers.exit_plan_mode = Some(Arc::new(handler));
        self
    }

    /// Declares a slash command this client runs.
    pub fn command(mut self, command: Command) -> Self {
        self.handlers.commands.push(command);
        self
    }

    /// Refuses configurations that would hang: prompts asked for with nobody
    /// to answer them.
    pub(crate) fn check(&self) -> Result<()> {
        if self.extra.get("requestPermission") == Some(&Value::Bool(true)) && self.handlers.permission.is_none() {
            return Err(Error::Config(
                "requestPermission is set but no permission handler is: the first tool call would wait forever; \
                 add one with SessionConfig::on_permission"
                    .into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn to_params(&self, id: Option<&str>) -> Value {
        let mut p = self.extra.clone();
        let h = &self.handlers;
        if h.permission.is_some() {
            p.insert("requestPermission".into(), true.into());
        }
        if !h.tools.is_empty() {
            p.insert("tools".into(), h.tools.iter().map(Tool::definition).collect::<Vec<_>>().into());
        }
        if h.user_input.is_some() {
            p.insert("requestUserInput".into(), true.into());
        }
        if h.elicitation.is_some() {
            p.insert("requestElicitation".into(), true.into());
        }
        if h.exit_plan_mode.is_some() {
            p.insert("requestExitPlanMode".into(), true.into());
        }
        if !h.commands.is_empty() {
            let commands: Vec<Value> =
                h.commands.iter().map(|c| json!({ "name": c.name, "description": c.description })).collect();
            p.insert("commands".into(), commands.into());
        }
        if let Some(id) = id {
            p.insert("sessionId".into(), id.into());
        }
        if let Some(m) = &self.model {
            p.insert("model".into(), m.clone().into());
        }
        if let Some(d) = &self.working_directory {
            p.insert("workingDirectory".into(), d.to_string_lossy().into_owned().into());
        }
        p.insert("streaming".into(), self.streaming.into());
        if let Some(n) = &self.client_name {
            p.insert("clientName".into(), n.clone().into());
        }
        Value::Object(p)
    }
}
