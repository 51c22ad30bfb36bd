//! What the client's mode ([`ClientMode`], the core's) does to a session:
//! the sessions an empty-mode client refuses, the empty-mode defaults
//! under the user's options, the system message without the host's
//! environment, and the options patched once the session is open.

use copilot_core::{ClientMode, SystemMessageStep};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::config::SessionConfig;
use super::replies::raw_json;
use crate::error::{Error, Result};

impl SessionConfig {
    /// Refuses, before anything is sent, tool filters that match no tool
    /// (a bare `*`: the core's `BARE_TOOL_WILDCARD`) and a session the mode
    /// cannot open (an empty-mode session must name its tools).
    pub(crate) fn check_tools(&self, mode: ClientMode) -> Result<()> {
        for option in copilot_core::TOOL_FILTER_OPTIONS {
            let filter = match *option {
                "availableTools" => self.available_tools.as_deref().unwrap_or_default(),
                "excludedTools" => &self.excluded_tools,
                other => unreachable!("the core's tool filter {other} has no field here"),
            };
            if filter.iter().any(|t| t == copilot_core::BARE_TOOL_WILDCARD) {
                return Err(Error::Config(format!("{option}{}", copilot_core::BARE_TOOL_WILDCARD_REFUSAL)));
            }
        }
        if mode == ClientMode::Empty && self.available_tools.is_none() {
            return Err(Error::Config(copilot_core::EMPTY_MODE_NEEDS_AVAILABLE_TOOLS.into()));
        }
        Ok(())
    }

    /// The params of `session.options.update` for session `session_id`
    /// once it is open, or `None` when there is nothing to patch (the
    /// core's [`write_options_update`](copilot_core::write_options_update)).
    pub(crate) fn options_update(&self, session_id: &str, mode: ClientMode) -> Result<Option<Box<RawValue>>> {
        let given = |name: &str| match name {
            "skipCustomInstructions" => self.skip_custom_instructions,
            "customAgentsLocalOnly" => self.custom_agents_local_only,
            "coauthorEnabled" => self.coauthor_enabled,
            "manageScheduleEnabled" => self.manage_schedule_enabled,
            other => unreachable!("the core's option {other} to patch has no field here"),
        };
        let mut params = Vec::new();
        let patch = copilot_core::write_options_update(session_id, mode, given, &mut |b| params.extend_from_slice(b));
        patch.then(|| raw_json(params)).transpose()
    }
}

/// The value of option `name` sent on open: the user's, else the mode's
/// default ([`mode_default`](copilot_core::mode_default)).
pub(super) fn with_mode_default(mode: ClientMode, name: &str, value: Option<Value>) -> Option<Value> {
    value.or_else(|| copilot_core::mode_default(mode, name).and_then(|json| serde_json::from_str(json).ok()))
}

/// The system message (its wire JSON) as the mode sends it: in empty mode
/// without the core's [`EMPTY_MODE_SECTION`](copilot_core::EMPTY_MODE_SECTION)
/// unless the application said what happens to it
/// ([`empty_mode_system_message`](copilot_core::empty_mode_system_message)).
pub(super) fn system_message_for_mode(mode: ClientMode, given: Option<Value>) -> Option<Value> {
    if mode != ClientMode::Empty {
        return given;
    }
    let (section, action) = copilot_core::EMPTY_MODE_SECTION;
    let wire_mode = given.as_ref().and_then(|m| m["mode"].as_str());
    let has_section = given.as_ref().is_some_and(|m| m["sections"].get(section).is_some());
    match copilot_core::empty_mode_system_message(wire_mode, has_section) {
        SystemMessageStep::AsGiven => given,
        SystemMessageStep::AddSection => given.map(|mut m| {
            m["sections"][section] = json!({ "action": action });
            m
        }),
        SystemMessageStep::Customize => {
            let mut m = json!({ "mode": copilot_core::SYSTEM_MESSAGE_CUSTOMIZE, "sections": { section: { "action": action } } });
            if let Some(content) = given.and_then(|g| g.get("content").cloned()) {
                m["content"] = content;
            }
            Some(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SectionAction, SystemMessage};

    fn sent(config: &SessionConfig) -> Value {
        config.to_params(Some("s"), false, ClientMode::Empty).expect("params")
    }

    #[test]
    fn empty_mode_fills_in_what_the_user_left_unset() {
        let params = sent(&SessionConfig { available_tools: Some(vec![]), ..SessionConfig::default() });
        for (name, json) in copilot_core::EMPTY_MODE_DEFAULTS {
            let wire = copilot_core::open_option(name).and_then(|o| o.wire).expect("sent on open");
            assert_eq!(params[wire], serde_json::from_str::<Value>(json).unwrap(), "{name}");
        }
        let user = SessionConfig {
            enable_skills: Some(true),
            memory: Some(json!({"enabled": true})),
            ..SessionConfig::default()
        };
        let params = sent(&user);
        assert_eq!(
            (&params["enableSkills"], &params["memory"]),
            (&json!(true), &json!({"enabled": true})),
            "the user's win"
        );
        let default_mode = user.to_params(Some("s"), false, ClientMode::CopilotCli).unwrap();
        assert!(default_mode.get("enableSessionTelemetry").is_none() && default_mode.get("systemMessage").is_none());
    }

    #[test]
    fn empty_mode_removes_the_environment_unless_the_app_controls_it() {
        let message = |m: Option<SystemMessage>| {
            sent(&SessionConfig { system_message: m, ..SessionConfig::default() })["systemMessage"].clone()
        };
        let removed = json!({"environment_context": {"action": "remove"}});
        assert_eq!(message(None), json!({"mode": "customize", "sections": removed}));
        assert_eq!(
            message(Some(SystemMessage::Append("be brief".into()))),
            json!({"mode": "customize", "content": "be brief", "sections": removed})
        );
        assert_eq!(message(Some(SystemMessage::Replace("all".into()))), json!({"mode": "replace", "content": "all"}));
        let tone = SystemMessage::customize().section("tone", SectionAction::Remove, None);
        assert_eq!(
            message(Some(tone)),
            json!({"mode": "customize", "sections": {"tone": {"action": "remove"}, "environment_context": {"action": "remove"}}})
        );
        let kept = SystemMessage::customize().section("environment_context", SectionAction::Append, Some("x".into()));
        assert_eq!(message(Some(kept))["sections"]["environment_context"], json!({"action": "append", "content": "x"}));
    }
}
