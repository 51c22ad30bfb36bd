//! The handler kinds this client offers.

use copilot_core::HandlerKind;

/// The kinds of wait this client has handlers for: every kind of the core's
/// answer table. The first [`TYPED_KINDS`] have typed handlers or options
/// of their own; the rest are answered by generic handlers, by name
/// ([`SessionConfig::on_request`](crate::SessionConfig::on_request)). The
/// JavaScript package offers the same.
pub const OFFERED_HANDLER_KINDS: &[HandlerKind] = &[
    HandlerKind::Permission,
    HandlerKind::Tool,
    HandlerKind::UserInput,
    HandlerKind::Elicitation,
    HandlerKind::McpOAuth,
    HandlerKind::ExitPlanMode,
    HandlerKind::Command,
    HandlerKind::SystemMessageTransform,
    HandlerKind::ProviderToken,
    HandlerKind::Hooks,
    // Generic from here on.
    HandlerKind::McpHeadersRefresh,
    HandlerKind::AutoModeSwitch,
    HandlerKind::Sampling,
    HandlerKind::SessionLimits,
    HandlerKind::QueuedCommand,
    HandlerKind::GitHubToken,
    HandlerKind::SessionFs,
    HandlerKind::SkillProvider,
    HandlerKind::Workflow,
    HandlerKind::Tasks,
    HandlerKind::Canvas,
    HandlerKind::Host,
    HandlerKind::ExtensionLaunch,
    HandlerKind::LlmInference,
    HandlerKind::UiThread,
    HandlerKind::Installations,
];

/// How many of [`OFFERED_HANDLER_KINDS`] come first with typed handlers.
pub(crate) const TYPED_KINDS: usize = 10;
