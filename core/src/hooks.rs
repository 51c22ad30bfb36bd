//! The hook call (`hooks.invoke`), read once for every host: which hook it
//! names, for which session, with which input. The answer is the
//! answer table's (`{"output": ..}`, `{}` for none; see
//! [`ANSWERS`](crate::ANSWERS)).

use crate::json::{JsonStr, Kind, Value};

/// Every hook type the CLI calls, by wire name, in the schema's order.
pub static HOOK_TYPES: &[&str] = &[
    "preToolUse",
    "preMcpToolCall",
    "postToolUse",
    "postToolUseFailure",
    "userPromptSubmitted",
    "userPromptTransformed",
    "sessionStart",
    "sessionEnd",
    "postResult",
    "prePRDescription",
    "errorOccurred",
    "agentStop",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "permissionRequest",
    "notification",
];

/// The input a hook gets when the call has none (or `null`): every hook's
/// input is an object, so a hook reads its fields from `{}`.
pub const HOOK_DEFAULT_INPUT: &str = "{}";

/// The members of a hook's input that a hook gets under another name, the
/// official SDKs' (`[wire, name]`): the agent's working directory `cwd` as
/// `workingDirectory`, and `stop_hook_active` as `stopHookActive`. Every
/// other member keeps its name.
pub static HOOK_INPUT_RENAMES: &[(&str, &str)] = &[("cwd", "workingDirectory"), ("stop_hook_active", "stopHookActive")];

/// The member of a hook's input that is a time: Unix time in milliseconds
/// on the wire, the language's time for the hook (a `Date` in JavaScript,
/// a `SystemTime` in Rust); a value that is not a number is left as it is.
pub const HOOK_INPUT_TIME: &str = "timestamp";

/// One `hooks.invoke`, read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HookCall<'a> {
    /// The hook type, as it came (an unknown one has no hook: the host
    /// answers as for an unset hook).
    pub hook_type: JsonStr<'a>,
    /// The index of `hook_type` in [`HOOK_TYPES`], if it is known.
    pub known: Option<usize>,
    /// The session the call names, if it names one (else the host uses the
    /// session the request came for).
    pub session_id: Option<JsonStr<'a>>,
    /// The hook's input: the call's `input`, or [`HOOK_DEFAULT_INPUT`].
    pub input: Value<'a>,
}

/// The params of a `hooks.invoke` are not an object with a string
/// `hookType`: the host refuses the call as unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnreadableHookCall;

impl UnreadableHookCall {
    /// The message that [`Display`](core::fmt::Display) shows.
    pub const fn message(&self) -> &'static str {
        "the hook call is not an object with a string hookType"
    }
}

impl core::fmt::Display for UnreadableHookCall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Reads the params of a `hooks.invoke`.
pub fn read_hook_call(params: &[u8]) -> Result<HookCall<'_>, UnreadableHookCall> {
    let params = Value::parse(crate::json::trim_ws(params)).map_err(|_| UnreadableHookCall)?;
    let hook_type = params.get("hookType").and_then(|v| v.as_str()).ok_or(UnreadableHookCall)?;
    let known = HOOK_TYPES.iter().position(|t| hook_type == *t);
    let session_id = params.get("sessionId").and_then(|v| v.as_str());
    let input = match params.get("input") {
        Some(v) if v.kind() != Kind::Null => v,
        _ => Value::parse(HOOK_DEFAULT_INPUT.as_bytes()).map_err(|_| UnreadableHookCall)?,
    };
    Ok(HookCall { hook_type, known, session_id, input })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_call_names_its_hook_session_and_input() {
        let call = read_hook_call(br#"{"sessionId":"s","hookType":"preToolUse","input":{"toolName":"bash"}}"#).unwrap();
        assert_eq!((call.hook_type, call.known), (JsonStr::from_validated(b"preToolUse"), Some(0)));
        assert_eq!(call.session_id.map(|s| s == "s"), Some(true));
        assert_eq!(call.input.as_bytes(), br#"{"toolName":"bash"}"#);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_missing_or_null_input_is_an_empty_object_and_an_unknown_type_is_not_known() {
        for params in [&br#"{"hookType":"notification"}"#[..], br#"{"hookType":"notification","input":null}"#] {
            let call = read_hook_call(params).unwrap();
            assert_eq!(call.input.as_bytes(), b"{}");
            assert_eq!(call.known, Some(HOOK_TYPES.len() - 1));
            assert_eq!(call.session_id, None);
        }
        assert_eq!(read_hook_call(br#"{"hookType":"later","input":1}"#).unwrap().known, None);
        for bad in [&b"[]"[..], b"{}", br#"{"hookType":1}"#, b"{"] {
            assert_eq!(read_hook_call(bad), Err(UnreadableHookCall));
        }
    }
}
