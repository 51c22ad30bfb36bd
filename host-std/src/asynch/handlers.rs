//! Async handlers: a handler whose answer is a future, driven on the
//! handler pool thread that runs it.

use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::answering::{
    Canvas, CanvasAction, CanvasContext, CanvasError, CanvasResult, Command, ElicitationHandler, ElicitationResponse,
    ExitPlanModeHandler, ExitPlanModeRequest, ExitPlanModeResponse, McpOAuthHandler, OAuthToken, PermissionDecision,
    PermissionHandler, PermissionRequest, Tool, ToolInvocation, ToolResult, UserInputHandler, UserInputRequest,
    UserInputResponse,
};
use crate::driver::Answering;
use crate::events::{CommandExecuteData, ElicitationRequestedData, McpOauthRequiredData};

/// How often a handler future past the handler deadline looks whether the
/// engine has refused its wait yet (the timer thread does it at the
/// deadline; this only covers the moment between).
const REFUSAL_CHECK: Duration = Duration::from_millis(10);

/// Drives `future` on this thread (a handler pool thread), parking it
/// between wakes. Once the handler deadline has passed and the engine has
/// refused the wait, the future is dropped (whatever it holds is released
/// and the pool thread is free again) and `abandoned` makes the answer,
/// which is stale and so never sent.
fn drive<F: Future>(future: F, abandoned: impl FnOnce() -> F::Output) -> F::Output {
    let waker = crate::wait::thread_waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    // The engine's deadline for the wait is at most the handler timeout
    // from now (the wait was opened before this handler started).
    let wait = Answering::current();
    let give_up_at = wait.as_ref().and_then(Answering::timeout).map(|t| Instant::now() + t);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        match (&wait, give_up_at) {
            (Some(wait), Some(at)) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => std::thread::park_timeout(left),
                _ if !wait.is_open() => {
                    log::debug!("an async handler ran past its deadline; the engine refused its wait, it is dropped");
                    return abandoned();
                }
                _ => std::thread::park_timeout(REFUSAL_CHECK),
            },
            _ => std::thread::park(),
        }
    }
}

/// A handler whose answer is a future, for any handler kind: the blocking
/// handler traits are implemented for it, so the `SessionConfig` methods
/// take it as they take a blocking handler. The handler pool thread that
/// runs it drives the future (see the [module docs](crate::asynch)), under the
/// engine's handler deadline, past which the future is dropped; a handler
/// that panics gets the kind's refusal, as a blocking one does. Made by
/// [`permission_handler`],
/// [`user_input_handler`], [`elicitation_handler`], [`mcp_oauth_handler`]
/// and [`exit_plan_mode_handler`]; [`tool`] and [`command`] use it too.
pub struct AsyncHandler<F> {
    handler: F,
}

impl<F> std::fmt::Debug for AsyncHandler<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncHandler").finish_non_exhaustive()
    }
}

impl<F> AsyncHandler<F> {
    /// Calls the handler with its own copy of `request` and drives the
    /// future to its answer on this (handler pool) thread; `abandoned` is
    /// the (never sent) answer of a future dropped past the deadline.
    fn run<R: Clone, Fut: Future>(&self, request: &R, abandoned: impl FnOnce() -> Fut::Output) -> Fut::Output
    where
        F: Fn(R) -> Fut,
    {
        drive((self.handler)(request.clone()), abandoned)
    }
}

/// Each line: the async form of one handler kind, named after its trait
/// (`name: Trait::method(Request) -> Answer, else Abandoned`; `Abandoned`
/// stands for the answer of a future dropped past the deadline, which is
/// never sent as the engine has refused the wait). A new kind is one more
/// line.
macro_rules! async_handlers {
    ($($(#[$doc:meta])* $name:ident: $kind:ident::$method:ident($request:ty) -> $answer:ty, else $abandoned:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name<F, Fut>(handler: F) -> AsyncHandler<F>
        where
            F: Fn($request) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = $answer>,
        {
            AsyncHandler { handler }
        }

        impl<F, Fut> $kind for AsyncHandler<F>
        where
            F: Fn($request) -> Fut + Send + Sync,
            Fut: Future<Output = $answer>,
        {
            fn $method(&self, request: &$request) -> $answer {
                self.run(request, || $abandoned)
            }
        }
    )*};
}

async_handlers! {
    /// A permission handler whose decision is a future (a web request, a
    /// person asked over a socket): pass it to
    /// [`SessionConfig::on_permission`](crate::SessionConfig::on_permission).
    permission_handler: PermissionHandler::decide(PermissionRequest) -> PermissionDecision,
        else PermissionDecision::UserNotAvailable;
    /// A user input handler (`ask_user`) whose answer is a future: pass it
    /// to [`SessionConfig::on_user_input`](crate::SessionConfig::on_user_input). `None` refuses.
    user_input_handler: UserInputHandler::answer(UserInputRequest) -> Option<UserInputResponse>, else None;
    /// An elicitation handler whose answer is a future: pass it to
    /// [`SessionConfig::on_elicitation`](crate::SessionConfig::on_elicitation).
    elicitation_handler: ElicitationHandler::answer(ElicitationRequestedData) -> ElicitationResponse,
        else ElicitationResponse::Cancel;
    /// An MCP OAuth handler whose token is a future (a browser flow): pass
    /// it to [`SessionConfig::on_mcp_oauth`](crate::SessionConfig::on_mcp_oauth). `None` cancels.
    mcp_oauth_handler: McpOAuthHandler::token(McpOauthRequiredData) -> Option<OAuthToken>, else None;
    /// An exit-plan-mode handler whose answer is a future: pass it to
    /// [`SessionConfig::on_exit_plan_mode`](crate::SessionConfig::on_exit_plan_mode).
    exit_plan_mode_handler: ExitPlanModeHandler::answer(ExitPlanModeRequest) -> ExitPlanModeResponse,
        else ExitPlanModeResponse { approved: false, selected_action: None, feedback: None };
}

/// A tool whose calls an async `handler` answers (as [`Tool::new`]); the
/// future runs on the handler pool under the engine's handler deadline.
pub fn tool<F, Fut, R>(name: impl Into<String>, description: impl Into<String>, parameters: Value, handler: F) -> Tool
where
    F: Fn(ToolInvocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R>,
    R: Into<ToolResult>,
{
    Tool::new(name, description, parameters, move |call: &ToolInvocation| {
        let result = handler(call.clone());
        drive(async move { result.await.into() }, || {
            ToolResult::Failure("the tool ran past the handler deadline".into())
        })
    })
}

/// A slash command an async `handler` runs (as [`Command::new`]); an `Err`
/// is reported to the caller. The future runs on the handler pool under
/// the engine's handler deadline.
pub fn command<F, Fut>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Command
where
    F: Fn(CommandExecuteData) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), String>>,
{
    let handler = AsyncHandler { handler };
    Command::new(name, description, move |data: &CommandExecuteData| {
        handler.run(data, || Err("the command ran past the handler deadline".into()))
    })
}

/// A canvas whose instances an async `open` opens (as [`Canvas::new`]);
/// add actions made by [`canvas_action`], and an `on_close` (a blocking
/// closure: it is told, its answer is `null`). The future runs on the
/// handler pool under the engine's handler deadline.
pub fn canvas<F, Fut>(
    id: impl Into<String>,
    display_name: impl Into<String>,
    description: impl Into<String>,
    open: F,
) -> Canvas
where
    F: Fn(CanvasContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CanvasResult>,
{
    Canvas::new(id, display_name, description, move |ctx: &CanvasContext| drive_canvas(open(ctx.clone())))
}

/// A canvas action an async `handler` runs (as [`CanvasAction::new`]); the
/// future runs on the handler pool under the engine's handler deadline.
pub fn canvas_action<F, Fut>(name: impl Into<String>, handler: F) -> CanvasAction
where
    F: Fn(CanvasContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CanvasResult>,
{
    CanvasAction::new(name, move |ctx: &CanvasContext| drive_canvas(handler(ctx.clone())))
}

fn drive_canvas(future: impl Future<Output = CanvasResult>) -> CanvasResult {
    drive(future, || Err(CanvasError::failed("the canvas handler ran past the handler deadline")))
}
