//! The client's mode, once for every host, as the official SDKs define it:
//! `copilot-cli` (the default: the CLI's own defaults) or `empty` (every
//! optional feature off unless the application turns it on, for servers
//! where the CLI's ambient behaviour is unsafe, such as one CLI serving
//! many users).
//!
//! An empty-mode client that starts its CLI needs a persistence location
//! of its own ([`BASE_DIRECTORY_OPTION`]) and gives the CLI
//! [`EMPTY_MODE_ENV`]; every session names its tools
//! ([`EMPTY_MODE_TOOLS_OPTION`]), takes [`EMPTY_MODE_DEFAULTS`] for the
//! options it leaves unset, has the system prompt's
//! [`EMPTY_MODE_SECTION`] removed ([`empty_mode_system_message`]), and is
//! patched once open ([`write_options_update`], which in any mode also
//! carries the [`OPTIONS_UPDATE`] options the user set).

/// How a client defaults what the application leaves unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientMode {
    /// The CLI's own defaults, as the Copilot CLI runs.
    #[default]
    CopilotCli,
    /// Optional features off; the application opts into what it needs.
    Empty,
}

impl ClientMode {
    /// Every mode, the default first.
    pub const ALL: [ClientMode; 2] = [ClientMode::CopilotCli, ClientMode::Empty];

    /// The mode's name, as the official SDKs' JavaScript option spells it.
    pub const fn name(self) -> &'static str {
        match self {
            ClientMode::CopilotCli => "copilot-cli",
            ClientMode::Empty => "empty",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<ClientMode> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The client option that gives a started CLI its state folder (the
/// variable [`BASE_DIRECTORY_ENV`]); an empty-mode client that starts its
/// CLI refuses to start without it ([`EMPTY_MODE_NEEDS_BASE_DIRECTORY`]), as
/// the CLI would otherwise share the user's `~/.copilot`. A client that
/// connects to a CLI it did not start leaves that to the CLI's owner.
pub const BASE_DIRECTORY_OPTION: &str = "baseDirectory";

/// The started CLI's variable for [`BASE_DIRECTORY_OPTION`], set after the
/// user's environment.
pub const BASE_DIRECTORY_ENV: &str = "COPILOT_HOME";

/// Variables an empty-mode client's started CLI gets, after
/// [`BASE_DIRECTORY_ENV`]: no system keychain (shared by every session of
/// the process); credentials stay in files under the state folder.
pub static EMPTY_MODE_ENV: &[(&str, &str)] = &[("COPILOT_DISABLE_KEYTAR", "1")];

/// Why an empty-mode client that would start its CLI refuses to.
pub const EMPTY_MODE_NEEDS_BASE_DIRECTORY: &str =
    "mode \"empty\" needs a persistence location of the application's own: set baseDirectory (the started CLI's COPILOT_HOME)";

/// The session option every session of an empty-mode client must set.
pub const EMPTY_MODE_TOOLS_OPTION: &str = "availableTools";

/// Why an empty-mode client refuses to open a session, before anything is
/// sent.
pub const EMPTY_MODE_NEEDS_AVAILABLE_TOOLS: &str = "mode \"empty\" needs every session to name its tools: set availableTools (such as [\"custom:*\"] for the session's own tools, or [] for none)";

/// The session options an empty-mode session takes when the user leaves
/// them unset (option name, its value's JSON); the user's values win.
pub static EMPTY_MODE_DEFAULTS: &[(&str, &str)] = &[
    ("enableSessionTelemetry", "false"),
    ("mcpOAuthTokenStorage", r#""in-memory""#),
    ("skipEmbeddingRetrieval", "true"),
    ("embeddingCacheStorage", r#""in-memory""#),
    ("enableOnDemandInstructionDiscovery", "false"),
    ("enableFileHooks", "false"),
    ("enableHostGitOperations", "false"),
    ("enableSessionStore", "false"),
    ("enableSkills", "false"),
    ("memory", r#"{"enabled":false}"#),
    ("customAgentsLocalOnly", "true"),
    ("enableExperimentalMode", "false"),
];

/// The default of option `name` in `mode` (its JSON), if it has one.
pub fn mode_default(mode: ClientMode, name: &str) -> Option<&'static str> {
    match mode {
        ClientMode::CopilotCli => None,
        ClientMode::Empty => EMPTY_MODE_DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
    }
}

/// The section of the system prompt an empty-mode session leaves out (it
/// describes the host: working folder, OS, tools installed), and the
/// section action that does it.
pub const EMPTY_MODE_SECTION: (&str, &str) = ("environment_context", "remove");

/// The system message mode that takes sections.
pub const SYSTEM_MESSAGE_CUSTOMIZE: &str = "customize";

/// The system message modes an empty-mode session sends as given: the
/// application wrote the whole prompt.
pub static SYSTEM_MESSAGE_KEPT_MODES: &[&str] = &["replace"];

/// What an empty-mode session does to the system message it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemMessageStep {
    /// Sent as given: a mode of [`SYSTEM_MESSAGE_KEPT_MODES`], or a
    /// customized one that already says what happens to the section.
    AsGiven,
    /// A customized one: [`EMPTY_MODE_SECTION`] added to its sections.
    AddSection,
    /// Sent as [`SYSTEM_MESSAGE_CUSTOMIZE`] with the given content (if any)
    /// and [`EMPTY_MODE_SECTION`] as its only section: none given, or an
    /// appended one (the CLI appends a customized one's content alike).
    Customize,
}

/// What an empty-mode session does to a system message whose wire `mode`
/// is `mode` (`None`: no system message) and whose sections name
/// [`EMPTY_MODE_SECTION`] or not (`has_section`). In the default mode the
/// system message is sent as given.
pub fn empty_mode_system_message(mode: Option<&str>, has_section: bool) -> SystemMessageStep {
    match mode {
        Some(m) if SYSTEM_MESSAGE_KEPT_MODES.contains(&m) => SystemMessageStep::AsGiven,
        Some(SYSTEM_MESSAGE_CUSTOMIZE) if has_section => SystemMessageStep::AsGiven,
        Some(SYSTEM_MESSAGE_CUSTOMIZE) => SystemMessageStep::AddSection,
        _ => SystemMessageStep::Customize,
    }
}

/// The request that patches a session's options once it is open (its
/// create or resume answered, after the [follow-ups](crate::OPEN_FOLLOW_UPS)),
/// answered before the session is handed over. When it fails, the client
/// closes the session (`session.destroy`) and the open fails with its
/// error: an empty-mode session must not run with the CLI's defaults.
pub const OPTIONS_UPDATE_METHOD: &str = "session.options.update";

/// The session options that go in [`OPTIONS_UPDATE_METHOD`] and not in the
/// open request (the CLI takes them only there), each with its empty-mode
/// default; in the default mode each goes only when the user set it.
/// `customAgentsLocalOnly` goes in the open request too.
pub static OPTIONS_UPDATE: &[(&str, bool)] = &[
    ("skipCustomInstructions", true),
    ("customAgentsLocalOnly", true),
    ("coauthorEnabled", false),
    ("manageScheduleEnabled", false),
];

/// Members an empty-mode patch always carries (name, JSON): no installed
/// plugins.
pub static EMPTY_MODE_UPDATE_FIXED: &[(&str, &str)] = &[("installedPlugins", "[]")];

/// Writes the params of [`OPTIONS_UPDATE_METHOD`] for session `session_id`
/// to `out`, `{"sessionId":..,<member>:..}`, and returns `true`; writes
/// nothing and returns `false` when there is nothing to patch (the default
/// mode and none of [`OPTIONS_UPDATE`] set). `given(name)` is the user's
/// value of each option of [`OPTIONS_UPDATE`].
pub fn write_options_update(
    session_id: &str,
    mode: ClientMode,
    given: impl Fn(&str) -> Option<bool>,
    out: &mut impl FnMut(&[u8]),
) -> bool {
    let empty = mode == ClientMode::Empty;
    let value = |(name, default): &(&str, bool)| given(name).or(empty.then_some(*default));
    if !empty && OPTIONS_UPDATE.iter().all(|o| value(o).is_none()) {
        return false;
    }
    out(br#"{"sessionId":"#);
    crate::json::emit_escaped(session_id, out);
    let fixed = EMPTY_MODE_UPDATE_FIXED.iter().filter(|_| empty).map(|(n, v)| (*n, v.as_bytes()));
    let options =
        OPTIONS_UPDATE.iter().filter_map(|o| value(o).map(|v| (o.0, if v { &b"true"[..] } else { b"false" })));
    for (name, v) in options.chain(fixed) {
        out(b",\"");
        out(name.as_bytes());
        out(b"\":");
        out(v);
    }
    out(b"}");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(mode: ClientMode, given: &[(&str, bool)]) -> Option<heapless::String<512>> {
        let mut s = heapless::String::new();
        let wrote = write_options_update("s\"1", mode, |n| given.iter().find(|g| g.0 == n).map(|g| g.1), &mut |b| {
            s.push_str(core::str::from_utf8(b).unwrap()).unwrap()
        });
        wrote.then_some(s)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_patch_has_the_empty_defaults_under_the_users_values() {
        assert_eq!(update(ClientMode::CopilotCli, &[]), None, "nothing to patch");
        assert_eq!(
            update(ClientMode::CopilotCli, &[("coauthorEnabled", true)]).as_deref(),
            Some(r#"{"sessionId":"s\"1","coauthorEnabled":true}"#)
        );
        assert_eq!(
            update(ClientMode::Empty, &[("coauthorEnabled", true)]).as_deref(),
            Some(
                r#"{"sessionId":"s\"1","skipCustomInstructions":true,"customAgentsLocalOnly":true,"coauthorEnabled":true,"manageScheduleEnabled":false,"installedPlugins":[]}"#
            )
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_defaults_are_options_and_the_system_message_rule_holds() {
        for (name, _) in EMPTY_MODE_DEFAULTS {
            assert!(crate::open_option(name).is_some_and(|o| o.wire.is_some()), "{name} is sent on open");
            assert!(mode_default(ClientMode::CopilotCli, name).is_none());
        }
        for (name, _) in OPTIONS_UPDATE {
            assert!(crate::open_option(name).is_some(), "{name} is a session option");
        }
        assert_eq!(mode_default(ClientMode::Empty, "memory"), Some(r#"{"enabled":false}"#));
        assert_eq!(ClientMode::from_name("empty"), Some(ClientMode::Empty));
        assert_eq!(ClientMode::default().name(), "copilot-cli");
        use SystemMessageStep::*;
        assert_eq!(empty_mode_system_message(Some("replace"), false), AsGiven);
        assert_eq!(empty_mode_system_message(Some("customize"), true), AsGiven);
        assert_eq!(empty_mode_system_message(Some("customize"), false), AddSection);
        assert_eq!(empty_mode_system_message(Some("append"), false), Customize);
        assert_eq!(empty_mode_system_message(None, false), Customize);
    }
}
