//! Session hooks: callbacks the agent runs at points of its loop (before and
//! after a tool, when a prompt is submitted, when the session starts and
//! ends, ...), each able to change what happens next.
//!
//! The CLI calls `hooks.invoke {sessionId, hookType, input}` and waits for
//! `{output?}`. It only does so for sessions created or resumed with
//! `hooks: true`, which [`SessionConfig::hooks`](crate::SessionConfig::hooks)
//! sends when at least one hook is set. Hooks run on the handler pool under
//! the handler deadline like every other handler; a hook that returns
//! `None` gives no output, and one that panics, or whose input does not fit
//! its types, gets the engine's refusal (also no output: the agent goes on
//! as if no hook were set).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every hook type of the CLI's schema (`HookType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HookType {
    /// Before a tool runs; may allow, deny or change its arguments.
    PreToolUse,
    /// Before an MCP tool is called; may change the request's `_meta`.
    PreMcpToolCall,
    /// After a tool succeeded; may change its result.
    PostToolUse,
    /// After a tool failed.
    PostToolUseFailure,
    /// A prompt was submitted; may change it.
    UserPromptSubmitted,
    /// The prompt was transformed for the model; may change the result.
    UserPromptTransformed,
    /// The session started.
    SessionStart,
    /// The session ended.
    SessionEnd,
    /// An agent result was produced.
    PostResult,
    /// Before a pull request description is generated.
    PrePrDescription,
    /// The agent met an error.
    ErrorOccurred,
    /// The main agent stopped; may keep it running.
    AgentStop,
    /// A sub-agent started.
    SubagentStart,
    /// A sub-agent stopped.
    SubagentStop,
    /// Before the context is compacted.
    PreCompact,
    /// A permission is requested.
    PermissionRequest,
    /// A notification.
    Notification,
}

impl HookType {
    /// Every hook type.
    pub const ALL: [HookType; 17] = [
        HookType::PreToolUse,
        HookType::PreMcpToolCall,
        HookType::PostToolUse,
        HookType::PostToolUseFailure,
        HookType::UserPromptSubmitted,
        HookType::UserPromptTransformed,
        HookType::SessionStart,
        HookType::SessionEnd,
        HookType::PostResult,
        HookType::PrePrDescription,
        HookType::ErrorOccurred,
        HookType::AgentStop,
        HookType::SubagentStart,
        HookType::SubagentStop,
        HookType::PreCompact,
        HookType::PermissionRequest,
        HookType::Notification,
    ];

    /// Its name on the wire (`hookType`), such as `preToolUse`.
    pub const fn name(self) -> &'static str {
        match self {
            HookType::PreToolUse => "preToolUse",
            HookType::PreMcpToolCall => "preMcpToolCall",
            HookType::PostToolUse => "postToolUse",
            HookType::PostToolUseFailure => "postToolUseFailure",
            HookType::UserPromptSubmitted => "userPromptSubmitted",
            HookType::UserPromptTransformed => "userPromptTransformed",
            HookType::SessionStart => "sessionStart",
            HookType::SessionEnd => "sessionEnd",
            HookType::PostResult => "postResult",
            HookType::PrePrDescription => "prePRDescription",
            HookType::ErrorOccurred => "errorOccurred",
            HookType::AgentStop => "agentStop",
            HookType::SubagentStart => "subagentStart",
            HookType::SubagentStop => "subagentStop",
            HookType::PreCompact => "preCompact",
            HookType::PermissionRequest => "permissionRequest",
            HookType::Notification => "notification",
        }
    }

    /// The hook type named `name` on the wire.
    pub fn from_name(name: &str) -> Option<HookType> {
        HookType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for HookType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which session a hook runs for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HookInvocation {
    /// The session the hook was set on (the `sessionId` of `hooks.invoke`).
    pub session_id: String,
    /// The hook type.
    pub hook_type: HookType,
}

// ---------------------------------------------------------------------------
// Inputs. Every input has the fields every hook gets (`sessionId`, `cwd` as
// `working_directory`, `timestamp` as a `SystemTime`: the official SDKs'
// names, `copilot_core::HOOK_INPUT_RENAMES`) and keeps what it does not name
// in `extra`, so a newer CLI's fields are still there to read. A field
// missing or of another kind is its empty value (`None`, `""`, `null`).

macro_rules! hook_input {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Deserialize)]
        #[serde(rename_all = "camelCase")]
        #[non_exhaustive]
        pub struct $name {
            /// The session that raised the hook (for a sub-agent's hook, not
            /// the one it was set on).
            #[serde(default, deserialize_with = "crate::events::lenient")]
            pub session_id: Option<String>,
            /// The working directory of the agent (the CLI's `cwd`).
            #[serde(rename = "cwd", default, deserialize_with = "crate::events::lenient")]
            pub working_directory: Option<String>,
            /// When the hook was raised (Unix time in ms on the wire).
            #[serde(default, deserialize_with = "crate::events::time_from_ms")]
            pub timestamp: Option<SystemTime>,
            $($(#[$fdoc])* #[serde(default, deserialize_with = "crate::events::lenient")] pub $field: $ty,)*
            /// Every other field of the input.
            #[serde(flatten)]
            pub extra: Map<String, Value>,
        }
    };
}

hook_input!(
    /// The input of [`HookType::PreToolUse`].
    PreToolUseInput {
        /// The tool about to run.
        tool_name: String,
        /// Its arguments.
        tool_args: Value,
    }
);

hook_input!(
    /// The input of [`HookType::PreMcpToolCall`].
    PreMcpToolCallInput {
        /// The tool call's id.
        tool_call_id: Option<String>,
        /// The MCP server called.
        server_name: String,
        /// The MCP tool called.
        tool_name: String,
        /// Its arguments.
        arguments: Value,
    }
);

hook_input!(
    /// The input of [`HookType::PostToolUse`].
    PostToolUseInput {
        /// The tool that ran.
        tool_name: String,
        /// Its arguments.
        tool_args: Value,
        /// Its result (`{textResultForLlm, resultType, ...}`).
        tool_result: Value,
    }
);

hook_input!(
    /// The input of [`HookType::PostToolUseFailure`].
    PostToolUseFailureInput {
        /// The tool that failed.
        tool_name: String,
        /// Its arguments.
        tool_args: Value,
        /// The failure's message.
        error: String,
    }
);

hook_input!(
    /// The input of [`HookType::UserPromptSubmitted`].
    UserPromptSubmittedInput {
        /// The prompt as submitted.
        prompt: String,
    }
);

hook_input!(
    /// The input of [`HookType::UserPromptTransformed`].
    UserPromptTransformedInput {
        /// The prompt as submitted.
        prompt: String,
        /// The prompt with the context the agent added.
        transformed_prompt: String,
    }
);

hook_input!(
    /// The input of [`HookType::SessionStart`].
    SessionStartInput {
        /// `startup`, `resume` or `new`.
        source: String,
        /// The first prompt, if known.
        initial_prompt: Option<String>,
    }
);

hook_input!(
    /// The input of [`HookType::SessionEnd`].
    SessionEndInput {
        /// `complete`, `error`, `abort`, `timeout` or `user_exit`.
        reason: String,
        /// The last message, if any.
        final_message: Option<String>,
        /// The error that ended it, if any.
        error: Option<String>,
    }
);

hook_input!(
    /// The input of [`HookType::ErrorOccurred`].
    ErrorOccurredInput {
        /// The error's message.
        error: String,
        /// `model_call`, `tool_execution`, `system` or `user_input`.
        error_context: String,
        /// Whether the agent can go on.
        recoverable: bool,
    }
);

hook_input!(
    /// The input of [`HookType::AgentStop`].
    AgentStopInput {
        /// Why the agent stopped (such as `end_turn`).
        stop_reason: Option<String>,
        /// The session transcript's path, if any.
        transcript_path: Option<String>,
        /// Whether this stop follows an earlier `block` (the CLI sends it
        /// as `stop_hook_active`).
        #[serde(alias = "stop_hook_active")]
        stop_hook_active: Option<bool>,
    }
);

// ---------------------------------------------------------------------------
// Outputs. `None` fields are left out; an empty output changes nothing.

/// What a pre-tool-use hook decides about the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HookPermissionDecision {
    /// Run it without a permission prompt.
    Allow,
    /// Do not run it; the model is told why.
    Deny,
    /// Ask as usual.
    Ask,
}

/// The output of [`HookType::PreToolUse`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreToolUseOutput {
    /// Allow, deny or ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<HookPermissionDecision>,
    /// Why (a denial's reason reaches the model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_decision_reason: Option<String>,
    /// Arguments to run the tool with instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_args: Option<Value>,
    /// Context added for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Hide the hook's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
}

impl PreToolUseOutput {
    /// Deny the call; the model reads `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        PreToolUseOutput {
            permission_decision: Some(HookPermissionDecision::Deny),
            permission_decision_reason: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Allow the call without a permission prompt.
    pub fn allow() -> Self {
        PreToolUseOutput { permission_decision: Some(HookPermissionDecision::Allow), ..Self::default() }
    }
}

/// The output of [`HookType::PreMcpToolCall`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreMcpToolCallOutput {
    /// The request's `_meta`: `None` keeps it, `Some(Value::Null)` drops
    /// it, an object replaces it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_to_use: Option<Value>,
}

/// The output of [`HookType::PostToolUse`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostToolUseOutput {
    /// A result for the model instead (`{textResultForLlm, resultType, ...}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_result: Option<Value>,
    /// Context added for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Hide the hook's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
}

/// The output of [`HookType::PostToolUseFailure`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostToolUseFailureOutput {
    /// Context added for the model beside the failed result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
}

/// The output of [`HookType::UserPromptSubmitted`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserPromptSubmittedOutput {
    /// The prompt to use instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_prompt: Option<String>,
    /// Context added for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Hide the hook's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
}

/// The output of [`HookType::UserPromptTransformed`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserPromptTransformedOutput {
    /// The transformed prompt to use instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_transformed_prompt: Option<String>,
}

/// The output of [`HookType::SessionStart`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStartOutput {
    /// Context added for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Configuration changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_config: Option<Value>,
}

/// The output of [`HookType::SessionEnd`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEndOutput {
    /// Hide the hook's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
    /// Clean-up actions to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_actions: Option<Vec<String>>,
    /// A summary of the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_summary: Option<String>,
}

/// The output of [`HookType::ErrorOccurred`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorOccurredOutput {
    /// Hide the hook's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
    /// `retry`, `skip` or `abort`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_handling: Option<String>,
    /// How many retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    /// A message for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_notification: Option<String>,
}

/// The output of [`HookType::AgentStop`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStopOutput {
    /// `block` keeps the agent running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// With `block`: the follow-up message the agent gets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl AgentStopOutput {
    /// Keep the agent running with `reason` as its next message.
    pub fn block(reason: impl Into<String>) -> Self {
        AgentStopOutput { decision: Some("block".into()), reason: Some(reason.into()) }
    }
}

// ---------------------------------------------------------------------------
// Registration.

/// Why a hook gave no answer.
pub(crate) enum HookFailure {
    /// The input does not fit the hook's types.
    Unreadable,
    /// The output could not be written as JSON.
    Unwritable,
}

type HookFn = dyn Fn(&Value, &HookInvocation) -> Result<Option<Value>, HookFailure> + Send + Sync;

/// The hooks of a session, by type. Build with the `on_*` methods and set
/// with [`SessionConfig::hooks`](crate::SessionConfig::hooks).
///
/// ```
/// use copilot_host::{PreToolUseOutput, SessionConfig, SessionHooks};
///
/// let hooks = SessionHooks::new().on_pre_tool_use(|input, _| {
///     (input.tool_name == "bash").then(|| PreToolUseOutput::deny("no shell here"))
/// });
/// let config = SessionConfig::with_model("claude-sonnet-4.5").hooks(hooks);
/// # let _ = config;
/// ```
#[derive(Clone, Default)]
pub struct SessionHooks {
    by_type: HashMap<HookType, Arc<HookFn>>,
}

impl SessionHooks {
    /// Runs the hook of `hook_type`; `None` if none is set.
    pub(crate) fn call(
        &self,
        hook_type: HookType,
        input: &Value,
        invocation: &HookInvocation,
    ) -> Option<Result<Option<Value>, HookFailure>> {
        self.by_type.get(&hook_type).map(|hook| hook(input, invocation))
    }
}

impl fmt::Debug for SessionHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut set: Vec<&str> = self.by_type.keys().map(|t| t.name()).collect();
        set.sort_unstable();
        f.debug_struct("SessionHooks").field("set", &set).finish()
    }
}

/// A typed hook as the erased one the table keeps.
fn typed<I, O>(hook: impl Fn(&I, &HookInvocation) -> Option<O> + Send + Sync + 'static) -> Arc<HookFn>
where
    I: DeserializeOwned,
    O: Serialize,
{
    Arc::new(move |input: &Value, invocation: &HookInvocation| {
        // Every field is read leniently; an input that is not an object
        // has no field to read.
        let input = I::deserialize(input)
            .or_else(|_| I::deserialize(&Value::Object(Map::new())))
            .map_err(|_| HookFailure::Unreadable)?;
        match hook(&input, invocation) {
            Some(output) => serde_json::to_value(output).map(Some).map_err(|_| HookFailure::Unwritable),
            None => Ok(None),
        }
    })
}

macro_rules! typed_hooks {
    ($($(#[$doc:meta])* $method:ident: $ty:ident, $input:ty => $output:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $method(
                self,
                hook: impl Fn(&$input, &HookInvocation) -> Option<$output> + Send + Sync + 'static,
            ) -> Self {
                self.with(HookType::$ty, typed(hook))
            }
        )*
    };
}

impl SessionHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no hook is set (then the CLI is not asked to call any).
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// Whether a hook of `hook_type` is set.
    pub fn has(&self, hook_type: HookType) -> bool {
        self.by_type.contains_key(&hook_type)
    }

    fn with(mut self, hook_type: HookType, hook: Arc<HookFn>) -> Self {
        self.by_type.insert(hook_type, hook);
        self
    }

    typed_hooks! {
        /// Runs before a tool; deny it, allow it without a prompt, or
        /// change its arguments.
        on_pre_tool_use: PreToolUse, PreToolUseInput => PreToolUseOutput;
        /// Runs before an MCP tool call.
        on_pre_mcp_tool_call: PreMcpToolCall, PreMcpToolCallInput => PreMcpToolCallOutput;
        /// Runs after a tool succeeded; sees and may replace its result.
        on_post_tool_use: PostToolUse, PostToolUseInput => PostToolUseOutput;
        /// Runs after a tool failed.
        on_post_tool_use_failure: PostToolUseFailure, PostToolUseFailureInput => PostToolUseFailureOutput;
        /// Runs when a prompt is submitted; may change it.
        on_user_prompt_submitted: UserPromptSubmitted, UserPromptSubmittedInput => UserPromptSubmittedOutput;
        /// Runs once the prompt is transformed for the model.
        on_user_prompt_transformed: UserPromptTransformed, UserPromptTransformedInput => UserPromptTransformedOutput;
        /// Runs when the session starts.
        on_session_start: SessionStart, SessionStartInput => SessionStartOutput;
        /// Runs when the session ends.
        on_session_end: SessionEnd, SessionEndInput => SessionEndOutput;
        /// Runs when the agent meets an error.
        on_error_occurred: ErrorOccurred, ErrorOccurredInput => ErrorOccurredOutput;
        /// Runs when the main agent stops; may keep it running.
        on_agent_stop: AgentStop, AgentStopInput => AgentStopOutput;
    }

    /// Runs `hook` for `hook_type` with the input and output as JSON: for
    /// the types without typed methods (`postResult`, `subagentStart`,
    /// `preCompact`, ...), or to read fields the types lack. Replaces a
    /// typed hook of the same type.
    pub fn on_hook(
        self,
        hook_type: HookType,
        hook: impl Fn(&Value, &HookInvocation) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        self.with(hook_type, Arc::new(move |input: &Value, inv: &HookInvocation| Ok(hook(input, inv))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_type_of_the_schema_has_a_name_that_round_trips() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../core/schemas/1.0.102/api.schema.json")).expect("schema");
        let names: Vec<&str> = schema["definitions"]["HookType"]["enum"]
            .as_array()
            .expect("HookType is an enum")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ours: Vec<&str> = HookType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(ours, names);
        for t in HookType::ALL {
            assert_eq!(HookType::from_name(t.name()), Some(t));
        }
    }
}
