//! Permission prompts: the decision a handler gives, and the ready-made
//! handlers.

use std::sync::Arc;

use serde_json::{json, Value};

use copilot_core::HandlerKind;

use super::outcome::{answer, shaped, Outcome};
use crate::events::PermissionRequestedData;

/// The answer to a permission prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionDecision {
    /// Allow this once.
    ApproveOnce,
    /// Allow for the rest of the session. `approval` narrows what is
    /// approved (for example `{"kind":"custom-tool","toolName":"x"}`); the
    /// CLI treats it as once without one.
    ApproveForSession {
        /// What to approve, as the CLI's schema describes it.
        approval: Option<Value>,
    },
    /// Refuse. The model reads the feedback and carries on; without
    /// feedback the CLI ends the turn.
    Reject {
        /// Why, for the model.
        feedback: Option<String>,
    },
    /// Nobody can answer: the CLI denies and tells the model so.
    UserNotAvailable,
    /// Any other decision object the CLI accepts, sent as is.
    Custom(Value),
    /// A decision with context on how and where it was made (sent as the
    /// answer's `decisionContext`; telemetry, it changes nothing).
    WithContext {
        /// The decision.
        decision: Box<PermissionDecision>,
        /// How it was made.
        context: PermissionDecisionContext,
    },
    /// No decision from this client: the prompt is left to another client
    /// connected to the same session. Nothing is sent, ever; if no other
    /// client answers, the turn waits (until it is aborted), as without a
    /// permission handler (see [`copilot_core::Unhandled`]).
    NoResult,
}

/// How and where a permission decision was made (the CLI's
/// `PermissionDecisionContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionDecisionContext {
    /// `auto_approved`, `autopilot_denied` or `prompted_user`.
    pub outcome: String,
    /// `assisted_approval`, `human_response`, `host_policy`,
    /// `unattended_fallback` or `authorization_carry_forward`.
    pub source: String,
    /// The client's surface; `sdk` for this one.
    pub surface: String,
    /// `interactive`, `headless` or `none`, when known.
    pub response_capability: Option<String>,
    /// The user's own words on the decision.
    pub user_feedback: Option<String>,
}

impl PermissionDecisionContext {
    /// A context with `outcome` and `source`, from the `sdk` surface.
    pub fn new(outcome: impl Into<String>, source: impl Into<String>) -> Self {
        PermissionDecisionContext {
            outcome: outcome.into(),
            source: source.into(),
            surface: "sdk".into(),
            response_capability: None,
            user_feedback: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({ "outcome": self.outcome, "source": self.source, "surface": self.surface });
        if let Some(c) = &self.response_capability {
            v["responseCapability"] = c.clone().into();
        }
        if let Some(f) = &self.user_feedback {
            v["userFeedback"] = f.clone().into();
        }
        v
    }
}

impl PermissionDecision {
    /// A rejection with feedback for the model.
    pub fn reject(feedback: impl Into<String>) -> Self {
        PermissionDecision::Reject { feedback: Some(feedback.into()) }
    }

    /// The same decision, with `context` on how it was made.
    pub fn with_context(self, context: PermissionDecisionContext) -> Self {
        match self {
            PermissionDecision::NoResult => PermissionDecision::NoResult,
            PermissionDecision::WithContext { decision, .. } => PermissionDecision::WithContext { decision, context },
            decision => PermissionDecision::WithContext { decision: Box::new(decision), context },
        }
    }

    /// What goes to the CLI: the decision and the context beside it, or
    /// nothing (declined), each shaped by the core.
    pub(super) fn outcome(&self) -> Outcome {
        match self {
            PermissionDecision::NoResult => Outcome::Decline,
            PermissionDecision::WithContext { decision, context } => match decision.outcome() {
                Outcome::Shaped(v, _) => match shaped("permissionDecisionContext", Some(&context.to_json())) {
                    Ok(context) => Outcome::Shaped(v, Some(context.beside("decisionContext"))),
                    Err(failed) => failed,
                },
                other => other,
            },
            other => answer(HandlerKind::Permission.name(), Some(&other.to_json())),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            PermissionDecision::ApproveOnce => json!({ "kind": "approve-once" }),
            PermissionDecision::ApproveForSession { approval: Some(a) } => {
                json!({ "kind": "approve-for-session", "approval": a })
            }
            PermissionDecision::ApproveForSession { approval: None } => json!({ "kind": "approve-for-session" }),
            PermissionDecision::Reject { feedback: Some(f) } => json!({ "kind": "reject", "feedback": f }),
            PermissionDecision::Reject { feedback: None } => json!({ "kind": "reject" }),
            PermissionDecision::UserNotAvailable => json!({ "kind": "user-not-available" }),
            PermissionDecision::Custom(v) => v.clone(),
            PermissionDecision::WithContext { decision, .. } => decision.to_json(),
            PermissionDecision::NoResult => Value::Null,
        }
    }
}

/// A permission prompt.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PermissionRequest {
    /// The session asking.
    pub session_id: String,
    /// What is asked: `shell`, `write`, `read`, `mcp`, `url`, `custom-tool`, ...
    pub kind: String,
    /// The tool call it is for, if any.
    pub tool_call_id: Option<String>,
    /// The event's data, with every detail (`permissionRequest` holds the
    /// command text, paths, tool name and arguments).
    pub data: PermissionRequestedData,
}

/// Decides permission prompts. Closures `Fn(&PermissionRequest) -> PermissionDecision` are handlers.
pub trait PermissionHandler: Send + Sync {
    /// The decision; may block (a person may be asked).
    fn decide(&self, request: &PermissionRequest) -> PermissionDecision;
}

impl<F: Fn(&PermissionRequest) -> PermissionDecision + Send + Sync> PermissionHandler for F {
    fn decide(&self, request: &PermissionRequest) -> PermissionDecision {
        self(request)
    }
}

/// A handler that approves every prompt once.
pub fn approve_all() -> Arc<dyn PermissionHandler> {
    Arc::new(|_: &PermissionRequest| PermissionDecision::ApproveOnce)
}

/// A handler that rejects every prompt with `feedback` (so the model
/// carries on instead of the turn ending).
pub fn deny_all(feedback: impl Into<String>) -> Arc<dyn PermissionHandler> {
    let feedback = feedback.into();
    Arc::new(move |_: &PermissionRequest| PermissionDecision::reject(feedback.clone()))
}
