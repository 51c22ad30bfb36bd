//! The session options of `session.create` and `session.resume`, by name,
//! once for every host: the name a user sets (camel case; the Rust host's
//! are the same words in snake case), the member it goes under on the wire
//! where that differs, and which of the two requests takes it. A host
//! writes each option it is given under [`OpenOption::wire`] and hands the
//! object to [`write_open_params`](crate::write_open_params).

/// Which open request takes an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionScope {
    /// `session.create` and `session.resume`.
    Both,
    /// `session.create` only.
    CreateOnly,
    /// `session.resume` only.
    ResumeOnly,
}

/// One session option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOption {
    /// The option's name, as a user sets it (camel case).
    pub name: &'static str,
    /// The member it goes under in the request; `None`: not sent in it (it
    /// changes what the client does, or goes in a later request).
    pub wire: Option<&'static str>,
    /// Which request takes it.
    pub scope: OptionScope,
    /// Sent only when set to `true`, as `true`; left out otherwise.
    pub only_when_true: bool,
}

const fn opt(name: &'static str, wire: Option<&'static str>, scope: OptionScope, only_when_true: bool) -> OpenOption {
    OpenOption { name, wire, scope, only_when_true }
}

use OptionScope as Scope;

/// Every session option, in the order the hosts document them.
pub static OPEN_OPTIONS: &[OpenOption] = &[
    opt("clientName", Some("clientName"), Scope::Both, false),
    opt("model", Some("model"), Scope::Both, false),
    opt("reasoningEffort", Some("reasoningEffort"), Scope::Both, false),
    opt("reasoningSummary", Some("reasoningSummary"), Scope::Both, false),
    opt("contextTier", Some("contextTier"), Scope::Both, false),
    opt("modelCapabilities", Some("modelCapabilities"), Scope::Both, false),
    opt("enableExperimentalMode", Some("isExperimentalMode"), Scope::Both, false),
    opt("workingDirectory", Some("workingDirectory"), Scope::Both, false),
    opt("additionalDirectories", Some("additionalDirectories"), Scope::Both, false),
    opt("configDirectory", Some("configDir"), Scope::Both, false),
    opt("enableConfigDiscovery", Some("enableConfigDiscovery"), Scope::Both, false),
    opt("streaming", Some("streaming"), Scope::Both, false),
    opt("includeSubAgentStreamingEvents", Some("includeSubAgentStreamingEvents"), Scope::Both, false),
    opt("systemMessage", Some("systemMessage"), Scope::Both, false),
    opt("availableTools", Some("availableTools"), Scope::Both, false),
    opt("excludedTools", Some("excludedTools"), Scope::Both, false),
    opt("toolSearch", Some("toolSearch"), Scope::Both, false),
    opt("excludedBuiltinAgents", Some("excludedBuiltinAgents"), Scope::Both, false),
    opt("provider", Some("provider"), Scope::Both, false),
    opt("capi", Some("capi"), Scope::Both, false),
    opt("providers", Some("providers"), Scope::Both, false),
    opt("models", Some("models"), Scope::Both, false),
    opt("mcpServers", Some("mcpServers"), Scope::Both, false),
    opt("mcpOAuthTokenStorage", Some("mcpOAuthTokenStorage"), Scope::Both, false),
    opt("disabledMcpServers", Some("disabledMcpServers"), Scope::Both, false),
    opt("enableMcpApps", Some("requestMcpApps"), Scope::Both, true),
    opt("githubMcpToolConfig", Some("githubMcpToolConfig"), Scope::Both, false),
    opt("customAgents", Some("customAgents"), Scope::Both, false),
    opt("customAgentsLocalOnly", Some("customAgentsLocalOnly"), Scope::Both, false),
    opt("defaultAgent", Some("defaultAgent"), Scope::Both, false),
    opt("agent", Some("agent"), Scope::Both, false),
    opt("skillDirectories", Some("skillDirectories"), Scope::Both, false),
    opt("disabledSkills", Some("disabledSkills"), Scope::Both, false),
    opt("pluginDirectories", Some("pluginDirectories"), Scope::Both, false),
    opt("instructionDirectories", Some("instructionDirectories"), Scope::Both, false),
    opt("infiniteSessions", Some("infiniteSessions"), Scope::Both, false),
    opt("memory", Some("memory"), Scope::Both, false),
    opt("largeOutput", Some("largeOutput"), Scope::Both, false),
    opt("sessionLimits", Some("sessionLimits"), Scope::Both, false),
    opt("enableSessionTelemetry", Some("enableSessionTelemetry"), Scope::Both, false),
    opt("enableCitations", Some("enableCitations"), Scope::Both, false),
    opt("enableFileChangeTracking", Some("enableFileChangeTracking"), Scope::Both, false),
    opt("gitHubToken", Some("gitHubToken"), Scope::Both, false),
    opt("enableManagedSettings", Some("enableManagedSettings"), Scope::Both, false),
    opt("managedSettings", Some("managedSettings"), Scope::Both, false),
    opt("skipEmbeddingRetrieval", Some("skipEmbeddingRetrieval"), Scope::Both, false),
    opt("embeddingCacheStorage", Some("embeddingCacheStorage"), Scope::Both, false),
    opt("organizationCustomInstructions", Some("organizationCustomInstructions"), Scope::Both, false),
    opt("enableOnDemandInstructionDiscovery", Some("enableOnDemandInstructionDiscovery"), Scope::Both, false),
    opt("enableFileHooks", Some("enableFileHooks"), Scope::Both, false),
    opt("enableHostGitOperations", Some("enableHostGitOperations"), Scope::Both, false),
    opt("enableSessionStore", Some("enableSessionStore"), Scope::Both, false),
    opt("enableSkills", Some("enableSkills"), Scope::Both, false),
    opt("remoteSession", Some("remoteSession"), Scope::Both, false),
    opt("expAssignments", Some("expAssignments"), Scope::Both, false),
    // Sent once the session is open, in `session.options.update` (the
    // core's `OPTIONS_UPDATE`), not in the open request.
    opt("skipCustomInstructions", None, Scope::Both, false),
    opt("coauthorEnabled", None, Scope::Both, false),
    opt("manageScheduleEnabled", None, Scope::Both, false),
    // Canvases and extensions (experimental). `canvases` are the
    // declarations (the handlers stay with the client).
    opt("canvases", Some("canvases"), Scope::Both, false),
    opt("requestCanvasRenderer", Some("requestCanvasRenderer"), Scope::Both, false),
    opt("requestExtensions", Some("requestExtensions"), Scope::Both, false),
    opt("extensionSdkPath", Some("extensionSdkPath"), Scope::Both, false),
    opt("extensionInfo", Some("extensionInfo"), Scope::Both, false),
    opt("canvasProvider", Some("canvasProvider"), Scope::Both, false),
    opt("sessionId", Some("sessionId"), Scope::CreateOnly, false),
    opt("serverAssignedId", None, Scope::CreateOnly, false),
    opt("cloud", Some("cloud"), Scope::CreateOnly, false),
    opt("suppressResumeEvent", Some("disableResume"), Scope::ResumeOnly, true),
    opt("continuePendingWork", Some("continuePendingWork"), Scope::ResumeOnly, true),
    // The canvases open in the client, handed back on resume (the CLI
    // 1.0.102's schema does not name it; the official SDKs send it).
    opt("openCanvases", Some("openCanvases"), Scope::ResumeOnly, false),
];

/// The session options that filter the tools offered: lists of tool names
/// and source-qualified patterns (`builtin:*`, `mcp:<name>`, `custom:*`).
pub static TOOL_FILTER_OPTIONS: &[&str] = &["availableTools", "excludedTools"];

/// An entry of a [tool filter](TOOL_FILTER_OPTIONS) a client refuses: the
/// CLI 1.0.102 reads a bare `*` as a tool's name, so it matches no tool
/// (`availableTools: ["*"]` leaves a session no tool at all).
pub const BARE_TOOL_WILDCARD: &str = "*";

/// Why a filter with [`BARE_TOOL_WILDCARD`] is refused, after the option's
/// name.
pub const BARE_TOOL_WILDCARD_REFUSAL: &str =
    " has a bare \"*\", which matches no tool: use \"builtin:*\", \"mcp:*\" or \"custom:*\"";

/// The sources a [tool filter](TOOL_FILTER_OPTIONS) entry names, as
/// `<source>:<name>` (the official SDKs' `ToolSet` builder: built-in tools,
/// MCP servers' tools, the client's own tools). The CLI classifies each
/// tool by where it was registered, not by its name.
pub static TOOL_SOURCES: &[&str] = &["builtin", "mcp", "custom"];

/// The name that matches every tool of a [source](TOOL_SOURCES).
pub const TOOL_SOURCE_WILDCARD: &str = "*";

/// The characters of a tool's name (a regular expression's character
/// class): what the CLI accepts when a tool is registered.
pub const TOOL_NAME_CHARS: &str = "a-zA-Z0-9_-";

/// Why a name is refused in a [source](TOOL_SOURCES)'s entry, after
/// `invalid <source> tool name "<name>"`.
pub const TOOL_NAME_REFUSAL: &str = ": a tool name is ASCII letters, digits, '_' and '-' (or the wildcard '*')";

/// Whether `name` may follow a [source](TOOL_SOURCES) in a filter entry:
/// the [wildcard](TOOL_SOURCE_WILDCARD) or a name of [`TOOL_NAME_CHARS`].
pub fn tool_filter_name_ok(name: &str) -> bool {
    name == TOOL_SOURCE_WILDCARD
        || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
}

/// The built-in tools that act only within their session: no files of the
/// host outside it, no other session's state, no host environment, no
/// network. The official SDKs offer them to an empty-mode session (a
/// server shared by many users) as `BUILTIN_TOOLS_ISOLATED`.
pub static BUILTIN_TOOLS_ISOLATED: &[&str] = &[
    "ask_user",
    "task_complete",
    "exit_plan_mode",
    "task",
    "read_agent",
    "write_agent",
    "list_agents",
    "send_inbox",
    "context_board",
    "skill",
];

/// The option named `name`, if there is one.
pub fn open_option(name: &str) -> Option<&'static OpenOption> {
    OPEN_OPTIONS.iter().find(|o| o.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_options_whose_wire_name_differs_are_these() {
        let renamed: heapless::Vec<(&str, &str), 8> =
            OPEN_OPTIONS.iter().filter_map(|o| o.wire.filter(|w| *w != o.name).map(|w| (o.name, w))).collect();
        assert_eq!(
            renamed,
            [
                ("enableExperimentalMode", "isExperimentalMode"),
                ("configDirectory", "configDir"),
                ("enableMcpApps", "requestMcpApps"),
                ("suppressResumeEvent", "disableResume"),
            ]
        );
        assert_eq!(open_option("serverAssignedId").map(|o| (o.wire, o.scope)), Some((None, Scope::CreateOnly)));
        let later: heapless::Vec<&str, 8> =
            OPEN_OPTIONS.iter().filter(|o| o.wire.is_none() && o.scope == Scope::Both).map(|o| o.name).collect();
        assert_eq!(later, ["skipCustomInstructions", "coauthorEnabled", "manageScheduleEnabled"]);
        let flags: heapless::Vec<&str, 4> = OPEN_OPTIONS.iter().filter(|o| o.only_when_true).map(|o| o.name).collect();
        assert_eq!(flags, ["enableMcpApps", "suppressResumeEvent", "continuePendingWork"]);
        for (i, o) in OPEN_OPTIONS.iter().enumerate() {
            let twice = |p: &OpenOption| p.name == o.name || (o.wire.is_some() && p.wire == o.wire);
            assert!(!OPEN_OPTIONS[..i].iter().any(twice), "{} twice", o.name);
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_tool_name_is_the_characters_of_its_class_or_the_wildcard() {
        // TOOL_NAME_CHARS read as a character class, against the check.
        let class = TOOL_NAME_CHARS.as_bytes();
        let mut in_class = [false; 128];
        let mut i = 0;
        while i < class.len() {
            if i + 2 < class.len() && class[i + 1] == b'-' {
                (class[i]..=class[i + 2]).for_each(|b| in_class[b as usize] = true);
                i += 3;
            } else {
                in_class[class[i] as usize] = true;
                i += 1;
            }
        }
        for b in 0u8..128 {
            let one = [b];
            let name = core::str::from_utf8(&one).unwrap();
            assert_eq!(tool_filter_name_ok(name), in_class[b as usize] || name == "*", "{b}");
        }
        assert!(tool_filter_name_ok("github-list_issues"));
        for bad in ["", "a b", "a:b", "**", "é"] {
            assert!(!tool_filter_name_ok(bad), "{bad:?}");
        }
        assert!(BUILTIN_TOOLS_ISOLATED.iter().all(|t| tool_filter_name_ok(t) && *t != "*"));
    }
}
