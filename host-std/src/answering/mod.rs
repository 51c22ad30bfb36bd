//! Answering: what a session (or the client) answers the agent's waits
//! with. The handler types a user sets, and running them on the handler
//! pool; what is sent back is decided by the core from the handler's
//! outcome (`run.rs`). It gets its waits from the driver as
//! [`Job`](crate::driver::Job)s and knows nothing of delivery.

mod canvas;
mod exchange;
mod handlers;
mod hook_call;
mod hooks;
mod inference;
mod kinds;
mod outcome;
mod permission;
mod requests;
mod run;
mod websocket;

pub use canvas::{Canvas, CanvasAction, CanvasContext, CanvasError, CanvasResult};
pub use exchange::{CopilotHeaders, CopilotRequest, CopilotResponse};
pub use handlers::{
    Command, ElicitationHandler, ElicitationResponse, ExitPlanModeHandler, ExitPlanModeRequest, ExitPlanModeResponse,
    McpOAuthHandler, OAuthToken, ProviderTokenHandler, ProviderTokenRequest, SectionTransform, SessionHandlers, Tool,
    ToolInvocation, ToolResult, UserInputHandler, UserInputRequest, UserInputResponse,
};
pub use hooks::{
    AgentStopInput, AgentStopOutput, ErrorOccurredInput, ErrorOccurredOutput, HookInvocation, HookPermissionDecision,
    HookType, PostToolUseFailureInput, PostToolUseFailureOutput, PostToolUseInput, PostToolUseOutput,
    PreMcpToolCallInput, PreMcpToolCallOutput, PreToolUseInput, PreToolUseOutput, SessionEndInput, SessionEndOutput,
    SessionHooks, SessionStartInput, SessionStartOutput, UserPromptSubmittedInput, UserPromptSubmittedOutput,
    UserPromptTransformedInput, UserPromptTransformedOutput,
};
pub use inference::CopilotRequestHandler;
pub(crate) use inference::Inference;
pub use kinds::OFFERED_HANDLER_KINDS;
pub use permission::{
    approve_all, deny_all, PermissionDecision, PermissionDecisionContext, PermissionHandler, PermissionRequest,
};
#[cfg(feature = "rpc-types")]
pub(crate) use requests::typed;
pub use requests::{generic_request_names, IncomingRequest, RequestHandler, RequestHandlers};
pub(crate) use run::{run, run_client_wide};
pub use websocket::{
    CopilotRequestContext, CopilotWebSocketHandler, CopilotWebSocketMessage, CopilotWebSocketResponse,
};
