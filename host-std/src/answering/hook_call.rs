//! A `hooks.invoke`: the session's hook of the type it names is called
//! with its input.

use serde_json::Value;

use super::hooks::{HookFailure, HookInvocation, HookType, SessionHooks};

/// What the hooks make of a `hooks.invoke`: the hook's output (the engine
/// answers `{output}`), or why the engine's refusal goes.
pub(crate) enum HookAnswer {
    /// This output goes (`null`: none, the engine answers `{}`).
    Answer(Value),
    /// No hook of this type is set.
    NoHook,
    /// The call or the hook failed.
    Failed(HookFailure),
}

/// Runs the hook `params` names, as the core reads the call
/// ([`read_hook_call`](copilot_core::read_hook_call): a missing or null
/// input is `{}`). Unknown hook types and unset hooks have no hook; the
/// engine answers them.
pub(crate) fn invoke(hooks: &SessionHooks, params: &[u8], session_id: &str) -> HookAnswer {
    let Ok(call) = copilot_core::read_hook_call(params) else {
        return HookAnswer::Failed(HookFailure::Unreadable);
    };
    let Ok(input) = serde_json::from_slice::<Value>(call.input.as_bytes()) else {
        return HookAnswer::Failed(HookFailure::Unreadable);
    };
    let Some(hook_type) = HookType::from_name(&call.hook_type.to_string()) else { return HookAnswer::NoHook };
    let session_id = call.session_id.map_or_else(|| session_id.to_owned(), |s| s.to_string());
    let invocation = HookInvocation { session_id, hook_type };
    let Some(outcome) = hooks.call(hook_type, &input, &invocation) else { return HookAnswer::NoHook };
    match outcome {
        // The engine puts it under `output` (`{}` for none).
        Ok(output) => HookAnswer::Answer(output.unwrap_or(Value::Null)),
        Err(e) => HookAnswer::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answering::hooks::{PreToolUseOutput, SessionEndOutput};
    use serde_json::json;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_typed_hook_reads_its_input_and_writes_its_output() {
        let hooks = SessionHooks::new().on_pre_tool_use(|input, inv| {
            assert_eq!(inv.session_id, "s-1");
            assert_eq!(inv.hook_type, HookType::PreToolUse);
            (input.tool_name == "bash").then(|| PreToolUseOutput::deny(format!("no {}", input.tool_args["command"])))
        });
        let call = |tool: &str| {
            let params = json!({"sessionId": "s-1", "hookType": "preToolUse",
                "input": {"cwd": "/w", "timestamp": 1.0e12, "toolName": tool, "toolArgs": {"command": "ls"}, "new": 1}});
            invoke(&hooks, params.to_string().as_bytes(), "s-0")
        };
        match call("bash") {
            HookAnswer::Answer(v) => {
                assert_eq!(v, json!({"permissionDecision": "deny", "permissionDecisionReason": "no \"ls\""}))
            }
            _ => panic!("answered"),
        }
        assert!(matches!(call("view"), HookAnswer::Answer(Value::Null)));
    }

    #[test]
    fn a_missing_or_null_input_reaches_the_hook_as_an_empty_object() {
        let hooks = SessionHooks::new().on_hook(HookType::SessionStart, |input, _| Some(input.clone()));
        for params in [json!({"hookType": "sessionStart"}), json!({"hookType": "sessionStart", "input": null})] {
            match invoke(&hooks, params.to_string().as_bytes(), "s") {
                HookAnswer::Answer(v) => assert_eq!(v, json!({}), "{params}"),
                _ => panic!("answered: {params}"),
            }
        }
    }

    #[test]
    fn inputs_are_named_as_the_official_sdks_name_them() {
        use crate::answering::hooks::{AgentStopInput, SessionStartInput};
        // The renames this test covers are the core's.
        assert_eq!(
            copilot_core::HOOK_INPUT_RENAMES,
            [("cwd", "workingDirectory"), ("stop_hook_active", "stopHookActive")]
        );
        assert_eq!(copilot_core::HOOK_INPUT_TIME, "timestamp");
        let start: SessionStartInput =
            serde_json::from_value(json!({"cwd": "/w", "timestamp": 1_764_000_000_123_u64, "source": "new"})).unwrap();
        assert_eq!(start.working_directory.as_deref(), Some("/w"));
        assert_eq!(start.timestamp, Some(UNIX_EPOCH + Duration::from_millis(1_764_000_000_123)));
        let stop: AgentStopInput =
            serde_json::from_value(json!({"stop_hook_active": true, "timestamp": "soon"})).unwrap();
        assert_eq!((stop.stop_hook_active, stop.timestamp), (Some(true), None));
    }

    #[test]
    fn the_hook_types_are_the_cores() {
        let ours: Vec<&str> = HookType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(ours, copilot_core::HOOK_TYPES);
    }

    #[test]
    fn unset_unknown_and_unreadable_hooks_leave_the_answer_to_the_engine() {
        let hooks = SessionHooks::new().on_session_end(|_, _| None);
        let run = |p: Value| invoke(&hooks, p.to_string().as_bytes(), "s");
        assert!(matches!(run(json!({"hookType": "sessionStart", "input": {}})), HookAnswer::NoHook));
        assert!(matches!(run(json!({"hookType": "someday", "input": {}})), HookAnswer::NoHook));
        assert!(matches!(run(json!({"input": {}})), HookAnswer::Failed(HookFailure::Unreadable)));
    }

    #[test]
    fn an_input_member_of_another_kind_is_its_empty_value() {
        let hooks = SessionHooks::new().on_session_end(|input, _| {
            Some(SessionEndOutput {
                session_summary: Some(format!("{:?} {:?}", input.reason, input.working_directory)),
                ..Default::default()
            })
        });
        let run = |p: Value| invoke(&hooks, p.to_string().as_bytes(), "s");
        for input in [json!({"reason": 3, "cwd": ["/w"]}), json!("not an object")] {
            match run(json!({"hookType": "sessionEnd", "input": input})) {
                HookAnswer::Answer(v) => assert_eq!(v["sessionSummary"], "\"\" None", "{input}"),
                _ => panic!("the hook is asked: {input}"),
            }
        }
    }
}
