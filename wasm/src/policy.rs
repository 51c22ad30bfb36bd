//! `wasm/policy.json`: the core's protocol policy for JavaScript, and the
//! tests that hold it to the core.
//!
//! The JSON is not in the WebAssembly module: the module has a size gate
//! (`scripts/build-wasm`), and the policy as a string there cost 660 bytes
//! gzipped (code that writes it, or one export per rule, several KB).
//! `scripts/build-wasm` ships it beside the module as
//! `dist/policy.js` (`export default {..}`), which the JS client imports.
//! The tests below derive every member from the core (its constants, and
//! the output of its functions for every case), so the file cannot drift
//! from what the Rust host does.
//!
//! Its members, read once by the JS client (times in milliseconds):
//! - `limits`: `protocolVersion`, `requestTimeoutMs`, `handlerTimeoutMs`,
//!   `shutdownGraceMs`, `startupTimeoutMs`, `maxSessions`,
//!   `maxPendingRequests`, `maxObligations`, `maxParkedFrames`,
//!   `maxParkedBytes`, `maxFrameBytes`, `maxKeptEvents`, `maxKeptBytes`,
//!   `maxBacklogBytes`, `backlogStallMs` (`copilot_core::limits`). A session nobody has subscribed to keeps an
//!   event of `bytes` (its batch item's `bytes`) for its first subscriber
//!   while none was left out, fewer than `maxKeptEvents` are kept and
//!   `bytes` fits in what is left of `maxKeptBytes`.
//! - `turn` `{reply, replyUnless, error, end}`: a `sendAndWait` turn ends
//!   at an event of type `end`; it failed if it had an event of type
//!   `error` (the last one), else its reply is the data of its last event
//!   of type `reply` whose data lacks `replyUnless` (`copilot_core::Turn`).
//! - `handshake` `{connect, params, tokenParam, ping, pingOn}`: send
//!   `connect` with `params` plus `tokenParam: token` when there is a
//!   connection token; an error answer with code `pingOn` sends `ping`
//!   with `{}` instead, any other error fails the handshake as it came;
//!   the answer's `protocolVersion` must be `limits.protocolVersion`, and
//!   `connect`'s `version` is the server's
//!   (`copilot_core::read_handshake_answer`).
//! - `followUps` `[{handler, method, eventType}]`: once a session is open,
//!   for each entry whose handler kind is set, in order, the request
//!   `method` with params `{sessionId, eventType}`, answered before the
//!   session is handed over (`copilot_core::write_follow_ups`).
//! - `launch`: a started CLI's argv is `args`, the log level (`logLevel`
//!   unless the user says), then `authArgs` if the user gave a GitHub
//!   token (non-empty), then `stdioArgs`, or `tcpArgs` and the port, then,
//!   if any secret is set, `secretsArg` followed by the secrets' variable
//!   names joined by `,` (the auth token's first), then the user's own
//!   arguments. The secrets are set last in the child's environment: the
//!   token in `authTokenEnv`, and for TCP the connection token (the
//!   user's, else a random UUID) in `connectionTokenEnv`. `cliPathEnv`
//!   names the CLI when none is given; `cliSearch`: where to look for the
//!   CLI, in order (`{explicit}`: the path given, an error if it is not a
//!   file; `{variable}`: the path in that variable; `{pathFolders}`: that
//!   name in each folder of `PATH`; `{relative}`: that path from the
//!   working folder; `copilot_core::CLI_SEARCH`); `ownProcessGroup`: start it in a
//!   process group of its own, ended on stop; `portAnnouncement`: a TCP
//!   server prints it, in any case, then the port, on stdout
//!   (`copilot_core::launch_items`, `copilot_core::read_announced_port`).
//!   With telemetry configured, `telemetryEnabledEnv` is `true` and each
//!   option `[option, variable]` of `telemetryEnv` that is set sets its
//!   variable (flags as `true`/`false`), after the user's environment and
//!   before the secrets (`copilot_core::TELEMETRY_ENV`); the members
//!   `traceContextMembers` of the user's trace context go at the top of the
//!   params of `session.create`, `session.resume` and `session.send`
//!   (`copilot_core::TRACE_CONTEXT_MEMBERS`). A client that connects to
//!   a CLI it did not start refuses each option of `spawnOnlyOptions`
//!   given to it, with `spawnOnlyRefusal` and the option's name
//!   (`copilot_core::SPAWN_ONLY_OPTIONS`).
//! - `stop` `[{step, method?, spawnedOnly?, errorFails?}]`: a stop's steps
//!   in order, within one grace; a step with a `method` sends it only
//!   while connected (`session.destroy {sessionId}` to every open session
//!   at once; `runtime.shutdown {}`), `spawnedOnly` steps only for a CLI
//!   this client started, and only an error of an `errorFails` step fails
//!   the stop (`copilot_core::STOP_STEPS`).
//! - `genericKinds`: the handler kinds (as the answer rows name them) that
//!   a user's generic request handler answers, by the row's name; the
//!   others have typed handlers (`copilot_core::GENERIC_HANDLER_KINDS`).
//! - `genericRows` `[{name, handler}]`: the rows of the answer table whose
//!   kind is generic, in its order: the event type or request method a
//!   generic handler is set for, and its kind (`copilot_core::ANSWERS`).
//! - `answers` `{elicitationAcceptContent}`: an elicitation handler's
//!   accept without content (or with `null`) answers with this content;
//!   content that is not an object is a failed handler
//!   (`copilot_core::write_elicitation_answer`).
//! - `hooks` `{types, defaultInput, inputRenames, inputTime}`: the hook
//!   types the CLI calls; a hook gets its input with each member `[wire,
//!   name]` of `inputRenames` under its name, and `inputTime` (Unix ms) as
//!   a `Date` (`copilot_core::HOOK_INPUT_RENAMES`, `HOOK_INPUT_TIME`); a
//!   `hooks.invoke` whose `input` is missing or null gives its hook
//!   `defaultInput`, and its `sessionId` (else the session's) in the
//!   invocation (`copilot_core::read_hook_call`).
//! - `options` `{both, createOnly, resumeOnly, wire, onlyWhenTrue}`: the
//!   session options by name and by request; an option goes under its
//!   own name unless `wire` names another (`null`: not sent), and one of
//!   `onlyWhenTrue` goes as `true` only when set true
//!   (`copilot_core::OPEN_OPTIONS`).
//! - `answerShapes` `{<name>: {members, open, nothing}}`: the answer of
//!   each typed handler kind (and `permissionDecisionContext`, the members
//!   sent beside a permission decision), from what the handler gave: each
//!   member `{name, type, oneOf?, required?, default?, const?, when?}`, in
//!   order: `const` is always written; a given member (not `null`) must be
//!   of its `type` (`string`, `boolean`, `integer`, `object`; a string of
//!   `oneOf`), else the handler failed; absent or `null`, `default` is
//!   written, a `required` one fails the handler, and any other is left
//!   out; with `when` `{member, is}` the member is written only when the
//!   given `member` is the string `is`. An `open` shape writes the given
//!   object's other members as given after them. With `text`, an answer
//!   that is not an object with a string `text` member is first
//!   `{<text>: <the string, or the value's JSON text with members in name
//!   order>}`. A handler that gives
//!   nothing (`null`, `undefined`) means `nothing`: `{answer}` sent as it
//!   is, or `{refuse: cause}` (`copilot_core::ANSWER_SHAPES`,
//!   `copilot_core::write_answer`).
//! - `config` `{mcpTypeByMember, mcpDefaultType, mcpLocalTypes,
//!   mcpWorkingDirectory, providerDefaultType, providerTokenCallbackFlag,
//!   providerTokenName, systemMessageDefaultMode, sectionTransformAction}`:
//!   an MCP server config without `type` takes the type of the first
//!   `[member, type]` of `mcpTypeByMember` it has, else `mcpDefaultType`;
//!   one of `mcpLocalTypes` has `args` `[]` unless given;
//!   `mcpWorkingDirectory` `[name, wire]` renames that member; a BYOK
//!   provider's `type` is `providerDefaultType` unless given, and
//!   `providerTokenCallbackFlag` is `true` when a token callback is set;
//!   that callback answers `providerToken.getToken` for the provider
//!   `providerTokenName` only (any other has no handler); a system
//!   message's `mode` is `systemMessageDefaultMode` unless given, and a
//!   section the client rewrites has the action `sectionTransformAction`
//!   (`copilot_core::mcp_server_type` and the constants beside it);
//!   `largeOutputRenames`: see policy_modes.rs.
//! - `modes`: the client's mode (see policy_modes.rs).
//! - `canvas` `{requests, actionMember, handlerError, actionNoHandler,
//!   unknownPrefix, opened, closed}`: each canvas request method `[call,
//!   nothing]` (`open`, `close` or `action` of the canvas its `canvasId`
//!   names; `nothing`: the result when the handler gives none, or a close
//!   has no handler); an action is found by the params' `actionMember`; a
//!   failed handler settles as failed with its error's code (else
//!   `handlerError`); an action without a handler fails with
//!   `actionNoHandler` `[code, message]`, an unknown canvas with
//!   `unknownPrefix` and the id in double quotes. A session's open
//!   instances are the open's answer's `openAnswer` list; an event `opened`
//!   replaces or adds its `data` (by the first of `openMembers`), `closed`
//!   removes the one its `data` names; an instance or data without each
//!   of `openMembers` as a non-empty string is skipped
//!   (`copilot_core::CANVAS_REQUESTS`, `read_canvas_change`,
//!   `open_answer_canvases` and the constants beside them).
//! - `inference` `{kind, setProvider, requestStart, requestChunk,
//!   responseStart, responseChunk, ack, maxInFlight, maxBufferedChunks,
//!   failed, cancelled, unfinished, busy, overflow, hopHeaders}`: the
//!   inference request handler's rule. A client with a `requestHandler`
//!   sends `setProvider` after each handshake; the waits of handler kind
//!   `kind` (the CLI's `requestStart` and `requestChunk`, never routed by
//!   session) are answered `ack` at once; a request past `maxInFlight`
//!   fails `busy`, a body past `maxBufferedChunks` unread chunks
//!   `overflow`; a failure `[status, message, code]` sends a head of
//!   `status` if none was sent, then a `responseChunk` with `end` and
//!   `error: {message, code?}` (a throw's text as the message of
//!   `failed`); a forwarded request drops `hopHeaders`
//!   (`copilot_core::INFERENCE_*`, `MAX_INFERENCE_*`). A request whose
//!   head's `transport` is `websocket.transport` is a WebSocket: once the
//!   handler opened it, a head of status `websocket.opened`, then one
//!   chunk per message each way; it ends once, as `websocket.ends` says
//!   for the way it ended (`null`: the end chunk; else a failure as
//!   above) (`copilot_core::websocket_end`).
//! - `bridgeTokenProtocolPrefix`: the WebSocket subprotocol that carries
//!   the bridge's token is this prefix and the token
//!   (`copilot_core::BRIDGE_TOKEN_PROTOCOL_PREFIX`).
//! - `messages`: the core's message texts by number, then the binding's
//!   own (its calls' failures: `messages.rs`). The module carries each as
//!   the token `"\u0003<number>\u0004"` (it is built with `--cfg
//!   copilot_message_ids`), in what it throws and in the `error` of what it
//!   returns; the JS client writes each token's text in its place
//!   (`copilot_core::MESSAGES`, `BINDING_MESSAGES`).
//! - `stats` `{counters, causes}`: the names of the numbers
//!   `CoreEngine::stats` returns, in its order: `counters` (the last,
//!   `oldestObligationAge`, is `NaN` when no obligation is open), then the
//!   refusals by cause, `causes` (`copilot_core::Cause::ALL`).
//! - `capabilities` `{openAnswerMember, changedEvent, known, uiMethod,
//!   uiCalls, missing}`: a session's capabilities start with nothing said;
//!   the open's answer's `openAnswerMember` object, then the `data` of
//!   each event of type `changedEvent` (applied as it is routed, before it
//!   is delivered), each say, for every `[group, name]` of `known`, the
//!   capability at `group.name` (`name` when `group` is null) where that
//!   is a boolean; one it does not say keeps its value. A UI call of
//!   `uiCalls` (`{needs: [group, name], field?, schema?, onlyTrue?}`) is
//!   refused before it is sent unless the capability it `needs` was said
//!   `true`, with the text `session.ui.<call>: ` and `missing[<name>]`.
//!   It sends `uiMethod` with `{sessionId, message, requestedSchema}`;
//!   with a `field`, the form is `{type: "object", properties: {<field>:
//!   {...schema, ...the call's members}}, required: [<field>]}` and the
//!   answer is the result's `content[<field>]` when its `action` is
//!   `accept` and that is neither absent nor null (with `onlyTrue`: only a
//!   `true`), else none (`copilot_core::Capabilities`,
//!   `copilot_core::UI_CALLS`, `write_ui_form`, `read_ui_answer`).
//! - `recovery` `{reports, steps, backoffMs, resumeFlag, eventLog: {method,
//!   page}, refused, gaveUp, gaps}`: the core sequences a recovery
//!   (`copilot_core::Recovery`, through `CoreEngine.recover`): `reports`
//!   names the reports by number, `steps` the steps by their first number,
//!   `backoffMs` the waits before each attempt;
//!   the resume of each open session sets `resumeFlag` `true`; its log is
//!   read backward with `method`, `page` events at a time; a session whose
//!   resume is refused ends with `refused` and the CLI's words; a
//!   recovery that gave up ends the connection with `gaveUp` around the
//!   number of attempts and the last failure; `gaps` names how much of a
//!   session's gap was delivered, by the number of the `deliver` step's
//!   third value (`copilot_core::Gap`, `GAP_NAMES`) (`RESUME_REFUSED`,
//!   `RECOVERY_GAVE_UP`, `RECOVERY_BACKOFF_MS`, `RECOVERY_RESUME_FLAG`, `EVENT_LOG_READ`,
//!   `EVENT_LOG_PAGE`; held to them in `policy/recovery.rs`).

mod recovery;

mod tests {
    /// The file `scripts/build-wasm` ships.
    const POLICY: &str = include_str!("../policy.json");
    use copilot_core::{limits, HandlerKind, LaunchItem, LaunchTransport, StopStep};
    use serde_json::{json, Value};

    fn policy() -> Value {
        serde_json::from_str(POLICY).expect("the policy is JSON")
    }

    #[test]
    fn the_messages_are_the_cores_then_the_bindings() {
        let all: Vec<&str> = copilot_core::MESSAGES.iter().chain(crate::messages::BINDING_MESSAGES).copied().collect();
        assert_eq!(policy()["messages"], json!(all));
        let numbers: Vec<usize> = (copilot_core::MESSAGES.len()..all.len()).collect();
        assert_eq!(crate::messages::NUMBERS, numbers, "numbered after the core's, in order");
    }

    #[test]
    fn the_stats_are_named_in_the_bindings_order() {
        let causes: Vec<&str> = copilot_core::Cause::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(policy()["stats"], json!({"counters": crate::STATS, "causes": causes}));
    }

    #[test]
    fn the_limits_are_the_cores() {
        let p = policy();
        let expected = json!({
            "protocolVersion": limits::PROTOCOL_VERSION,
            "requestTimeoutMs": limits::DEFAULT_REQUEST_TIMEOUT_MS,
            "handlerTimeoutMs": limits::DEFAULT_HANDLER_TIMEOUT_MS,
            "shutdownGraceMs": limits::DEFAULT_SHUTDOWN_GRACE_MS,
            "startupTimeoutMs": limits::DEFAULT_STARTUP_TIMEOUT_MS,
            "maxSessions": limits::MAX_SESSIONS,
            "maxPendingRequests": limits::MAX_PENDING_REQUESTS,
            "maxObligations": limits::MAX_OBLIGATIONS,
            "maxParkedFrames": limits::MAX_PARKED_FRAMES,
            "maxParkedBytes": limits::MAX_PARKED_BYTES,
            "maxFrameBytes": limits::MAX_FRAME_BYTES,
            "maxKeptEvents": limits::MAX_KEPT_EVENTS,
            "maxKeptBytes": limits::MAX_KEPT_BYTES,
            "maxBacklogBytes": limits::MAX_BACKLOG_BYTES,
            "backlogStallMs": limits::BACKLOG_STALL_MS,
        });
        assert_eq!(p["limits"], expected);
    }

    #[test]
    fn the_turn_rule_is_the_cores() {
        let t = &policy()["turn"];
        let step = |ty: &Value, sub| copilot_core::turn_step(ty.as_str().unwrap(), sub);
        assert_eq!(step(&t["reply"], false), copilot_core::TurnStep::Reply);
        assert_eq!(step(&t["reply"], true), copilot_core::TurnStep::Other);
        assert_eq!(step(&t["error"], false), copilot_core::TurnStep::Error);
        assert_eq!(step(&t["end"], false), copilot_core::TurnStep::End);
        assert_eq!(t["replyUnless"], copilot_core::TURN_REPLY_UNLESS);
    }

    #[test]
    fn the_handshake_sends_what_the_core_writes_and_falls_back_as_it_reads() {
        use copilot_core::{read_handshake_answer, HandshakeRequest, HandshakeStep};
        let h = &policy()["handshake"];
        for token in [None, Some("t\"1")] {
            let mut core = Vec::new();
            copilot_core::write_connect_params(token, &mut |b: &[u8]| core.extend_from_slice(b));
            let mut params = h["params"].clone();
            if let Some(t) = token {
                params[h["tokenParam"].as_str().unwrap()] = t.into();
            }
            assert_eq!(params, serde_json::from_slice::<Value>(&core).unwrap(), "{token:?}");
        }
        assert_eq!((h["connect"].as_str(), h["ping"].as_str()), (Some("connect"), Some("ping")));
        let code = h["pingOn"].as_i64().unwrap();
        assert_eq!(read_handshake_answer(HandshakeRequest::Connect, Err(code)), HandshakeStep::Ping);
        assert_ne!(read_handshake_answer(HandshakeRequest::Connect, Err(code - 1)), HandshakeStep::Ping);
    }

    #[test]
    fn the_follow_ups_send_what_the_core_writes() {
        let follow = &policy()["followUps"];
        let kinds = copilot_core::TYPED_HANDLER_KINDS.iter().chain(copilot_core::GENERIC_HANDLER_KINDS);
        for kind in kinds {
            let mut core = Vec::new();
            copilot_core::write_follow_ups("s\"1", |k| k == *kind, &mut |m, p: &[u8]| {
                assert!(p.starts_with(br#"{"sessionId":"#), "the session id comes first");
                core.push((m.to_owned(), serde_json::from_slice::<Value>(p).unwrap()))
            })
            .unwrap();
            let from_policy: Vec<(String, Value)> = follow
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["handler"] == kind.name())
                .map(|f| {
                    let params = json!({"sessionId": "s\"1", "eventType": f["eventType"]});
                    (f["method"].as_str().unwrap().to_owned(), params)
                })
                .collect();
            assert_eq!(from_policy, core, "{kind:?}");
        }
        assert!(follow.as_array().unwrap().iter().any(|f| f["handler"] == HandlerKind::McpOAuth.name()));
    }

    /// A start as the policy's `launch` documents it: (argv, [(variable, secret)]).
    fn launch_from_policy(tcp: Option<u16>, level: &str, auth: bool) -> (Vec<String>, Vec<(String, &'static str)>) {
        let l = &policy()["launch"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
        };
        let mut args = strings(&l["args"]);
        args.push(level.to_owned());
        let mut secrets = Vec::new();
        if auth {
            args.extend(strings(&l["authArgs"]));
            secrets.push((l["authTokenEnv"].as_str().unwrap().to_owned(), "auth"));
        }
        match tcp {
            None => args.extend(strings(&l["stdioArgs"])),
            Some(port) => {
                args.extend(strings(&l["tcpArgs"]));
                args.push(port.to_string());
                secrets.push((l["connectionTokenEnv"].as_str().unwrap().to_owned(), "connection"));
            }
        }
        if !secrets.is_empty() {
            let names: Vec<&str> = secrets.iter().map(|(n, _)| n.as_str()).collect();
            args.push(format!("{}{}", l["secretsArg"].as_str().unwrap(), names.join(",")));
        }
        (args, secrets)
    }

    #[test]
    fn the_launch_is_what_the_core_gives_for_every_start() {
        for tcp in [None, Some(0), Some(4321)] {
            for auth in [false, true] {
                let transport = tcp.map_or(LaunchTransport::Stdio, |port| LaunchTransport::Tcp { port });
                let launch = copilot_core::Launch { transport, log_level: "debug", auth_token: auth };
                let (mut args, mut secrets) = (Vec::new(), Vec::new());
                copilot_core::launch_items(&launch, &mut |item| match item {
                    LaunchItem::Arg(a) => args.push(a.to_owned()),
                    LaunchItem::Secret { name, secret } => secrets.push((
                        name.to_owned(),
                        if secret == copilot_core::LaunchSecret::AuthToken { "auth" } else { "connection" },
                    )),
                });
                assert_eq!(launch_from_policy(tcp, "debug", auth), (args, secrets), "{tcp:?} {auth}");
            }
        }
        let l = &policy()["launch"];
        assert_eq!(l["logLevel"], copilot_core::DEFAULT_LOG_LEVEL);
        assert_eq!(l["cliPathEnv"], copilot_core::CLI_PATH_ENV);
        assert_eq!(l["telemetryEnabledEnv"], copilot_core::TELEMETRY_ENABLED_ENV);
        assert_eq!(l["telemetryEnv"], json!(copilot_core::TELEMETRY_ENV));
        assert_eq!(l["traceContextMembers"], json!(copilot_core::TRACE_CONTEXT_MEMBERS));
        assert_eq!(l["spawnOnlyOptions"], json!(copilot_core::SPAWN_ONLY_OPTIONS));
        assert_eq!(l["spawnOnlyRefusal"], copilot_core::SPAWN_ONLY_REFUSAL);
        let search: Vec<Value> = copilot_core::CLI_SEARCH
            .iter()
            .map(|c| match *c {
                copilot_core::CliCandidate::Explicit => json!({"explicit": true}),
                copilot_core::CliCandidate::Variable(v) => json!({"variable": v}),
                copilot_core::CliCandidate::PathFolders(f) => json!({"pathFolders": f}),
                copilot_core::CliCandidate::Relative(p) => json!({"relative": p}),
            })
            .collect();
        assert_eq!(l["cliSearch"], Value::Array(search));
        assert_eq!(l["ownProcessGroup"], copilot_core::LAUNCH_OWN_PROCESS_GROUP);
        let announcement = l["portAnnouncement"].as_str().unwrap();
        assert_eq!(copilot_core::read_announced_port(&format!("CLI server {announcement} 4321")), Some(4321));
    }

    #[test]
    fn the_stop_steps_are_the_cores_in_order() {
        let stop = policy()["stop"].clone();
        let expected: Vec<Value> = copilot_core::STOP_STEPS
            .iter()
            .map(|s: &StopStep| {
                let mut v = json!({"step": s.name()});
                if let Some(m) = s.method() {
                    v["method"] = m.into();
                    // A request needs the connection.
                    assert!(!s.applies(true, false), "{s:?}");
                }
                if !s.applies(false, true) {
                    v["spawnedOnly"] = true.into();
                }
                if s.error_fails_stop() {
                    v["errorFails"] = true.into();
                }
                v
            })
            .collect();
        assert_eq!(stop, Value::Array(expected));
    }

    #[test]
    fn an_accept_without_content_carries_the_cores_default() {
        let mut core = Vec::new();
        copilot_core::write_elicitation_answer(copilot_core::ElicitationAction::Accept, None, &mut |b: &[u8]| {
            core.extend_from_slice(b)
        })
        .unwrap();
        let core: Value = serde_json::from_slice(&core).unwrap();
        assert_eq!(core["content"], policy()["answers"]["elicitationAcceptContent"]);
        assert_eq!(policy()["answers"]["elicitationAcceptContent"], json!({}));
    }

    #[test]
    fn the_generic_kinds_are_the_cores() {
        let names: Vec<&str> = copilot_core::GENERIC_HANDLER_KINDS.iter().map(|k| k.name()).collect();
        assert_eq!(policy()["genericKinds"], json!(names));
        // The rows a generic handler answers, found as the JS client finds them.
        let rows: Vec<Value> = copilot_core::ANSWERS
            .iter()
            .filter(|r| r.handler.is_generic())
            .map(|r| {
                let (copilot_core::Trigger::Event(name) | copilot_core::Trigger::Request(name)) = r.trigger;
                json!({"name": name, "handler": r.handler.name()})
            })
            .collect();
        assert_eq!(
            policy()["genericRows"],
            Value::Array(rows),
            "{}",
            serde_json::to_string(&policy()["genericRows"]).unwrap()
        );
        let p = policy();
        let names: Vec<&str> =
            p["genericRows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, copilot_core::generic_request_names().collect::<Vec<_>>());
    }

    #[test]
    fn the_hooks_are_the_cores() {
        let h = &policy()["hooks"];
        assert_eq!(h["types"], json!(copilot_core::HOOK_TYPES));
        let call = copilot_core::read_hook_call(br#"{"hookType":"notification"}"#).unwrap();
        assert_eq!(h["defaultInput"], serde_json::from_slice::<Value>(call.input.as_bytes()).unwrap());
        assert_eq!(h["inputRenames"], json!(copilot_core::HOOK_INPUT_RENAMES));
        assert_eq!(h["inputTime"], copilot_core::HOOK_INPUT_TIME);
    }

    #[test]
    fn the_options_are_the_cores() {
        use copilot_core::{OptionScope, OPEN_OPTIONS};
        let o = &policy()["options"];
        let names = |scope| OPEN_OPTIONS.iter().filter(|x| x.scope == scope).map(|x| x.name).collect::<Vec<_>>();
        assert_eq!(o["both"], json!(names(OptionScope::Both)));
        assert_eq!(o["createOnly"], json!(names(OptionScope::CreateOnly)));
        assert_eq!(o["resumeOnly"], json!(names(OptionScope::ResumeOnly)));
        let mut wire = serde_json::Map::new();
        for x in OPEN_OPTIONS.iter().filter(|x| x.wire != Some(x.name)) {
            wire.insert(x.name.into(), x.wire.map_or(Value::Null, Into::into));
        }
        assert_eq!(o["wire"], Value::Object(wire));
        let flags: Vec<&str> = OPEN_OPTIONS.iter().filter(|x| x.only_when_true).map(|x| x.name).collect();
        assert_eq!(o["onlyWhenTrue"], json!(flags));
    }

    #[test]
    fn the_inference_rule_is_the_cores() {
        use copilot_core as c;
        let i = &policy()["inference"];
        let failure = |f: c::InferenceFailure| json!([f.status, f.message, f.code]);
        let expected = json!({
            "kind": c::HandlerKind::LlmInference.name(),
            "setProvider": c::INFERENCE_SET_PROVIDER,
            "requestStart": c::INFERENCE_REQUEST_START,
            "requestChunk": c::INFERENCE_REQUEST_CHUNK,
            "responseStart": c::INFERENCE_RESPONSE_START,
            "responseChunk": c::INFERENCE_RESPONSE_CHUNK,
            "ack": c::INFERENCE_ACK,
            "maxInFlight": c::MAX_INFERENCE_IN_FLIGHT,
            "maxBufferedChunks": c::MAX_INFERENCE_BUFFERED_CHUNKS,
            "failed": failure(c::INFERENCE_FAILED),
            "cancelled": failure(c::INFERENCE_CANCELLED),
            "unfinished": failure(c::INFERENCE_UNFINISHED),
            "busy": failure(c::INFERENCE_BUSY),
            "overflow": failure(c::INFERENCE_OVERFLOW),
            "hopHeaders": c::INFERENCE_HOP_HEADERS,
            "websocket": {
                "transport": c::INFERENCE_WEBSOCKET,
                "opened": c::INFERENCE_WEBSOCKET_OPENED,
                "ends": {
                    "unsupported": c::websocket_end(c::WebSocketEnd::Unsupported).map(failure),
                    "clientClosed": c::websocket_end(c::WebSocketEnd::ClientClosed).map(failure),
                    "clientCancelled": c::websocket_end(c::WebSocketEnd::ClientCancelled).map(failure),
                    "handlerClosed": c::websocket_end(c::WebSocketEnd::HandlerClosed).map(failure),
                    "handlerFailed": c::websocket_end(c::WebSocketEnd::HandlerFailed).map(failure),
                    "overflow": c::websocket_end(c::WebSocketEnd::Overflow).map(failure),
                },
            },
        });
        assert_eq!(*i, expected);
    }

    #[test]
    fn the_canvas_rule_is_the_cores() {
        use copilot_core::CanvasCall;
        let c = &policy()["canvas"];
        let mut requests = serde_json::Map::new();
        for r in copilot_core::CANVAS_REQUESTS {
            let call = match r.call {
                CanvasCall::Open => "open",
                CanvasCall::Close => "close",
                CanvasCall::Action => "action",
            };
            requests.insert(r.method.into(), json!([call, serde_json::from_str::<Value>(r.nothing).unwrap()]));
        }
        assert_eq!(c["requests"], Value::Object(requests));
        assert_eq!(c["actionMember"], copilot_core::CANVAS_ACTION_MEMBER);
        assert_eq!(c["handlerError"], copilot_core::CANVAS_HANDLER_ERROR);
        assert_eq!(c["actionNoHandler"], json!(copilot_core::CANVAS_ACTION_NO_HANDLER));
        assert_eq!(c["unknownPrefix"], copilot_core::CANVAS_UNKNOWN_PREFIX);
        assert_eq!(c["opened"], copilot_core::CANVAS_OPENED_EVENT);
        assert_eq!(c["closed"], copilot_core::CANVAS_CLOSED_EVENT);
        assert_eq!(c["openMembers"], json!(copilot_core::OPEN_CANVAS_MEMBERS));
        assert_eq!(c["openAnswer"], copilot_core::OPEN_ANSWER_CANVASES);
    }

    /// The open instances after `answer` and `events`, by the policy's rule
    /// as the JS client applies it, and by the core's functions.
    fn open_canvases(answer: &Value, events: &[Value]) -> (Vec<Value>, Vec<Value>) {
        let c = &policy()["canvas"];
        let members: Vec<&str> = c["openMembers"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        let named = |v: &Value, m: &str| v[m].as_str().is_some_and(|s| !s.is_empty());
        let instance = |v: &Value| members.iter().all(|m| named(v, m));
        let key = members[0];
        let listed = answer[c["openAnswer"].as_str().unwrap()].as_array().cloned().unwrap_or_default();
        let mut js: Vec<Value> = listed.into_iter().filter(|i| instance(i)).collect();
        for e in events {
            if e["type"] == c["opened"] && instance(&e["data"]) {
                match js.iter_mut().find(|i| i[key] == e["data"][key]) {
                    Some(i) => *i = e["data"].clone(),
                    None => js.push(e["data"].clone()),
                }
            } else if e["type"] == c["closed"] && named(&e["data"], key) {
                js.retain(|i| i[key] != e["data"][key]);
            }
        }
        let mut core: Vec<Value> = Vec::new();
        let answer = answer.to_string();
        let events: Vec<String> = events.iter().map(Value::to_string).collect();
        let changes = copilot_core::open_answer_canvases(answer.as_bytes()).chain(events.iter().filter_map(|e| {
            let v = copilot_core::Value::parse(e.as_bytes()).unwrap();
            copilot_core::read_canvas_change(v.get("type")?.as_str()?, v.get("data"))
        }));
        for change in changes {
            match change {
                copilot_core::CanvasChange::Opened { instance_id, instance } => {
                    let v: Value = serde_json::from_str(instance.raw()).unwrap();
                    match core.iter_mut().find(|i| i[key] == instance_id.raw()) {
                        Some(i) => *i = v,
                        None => core.push(v),
                    }
                }
                copilot_core::CanvasChange::Closed { instance_id } => core.retain(|i| i[key] != instance_id.raw()),
            }
        }
        (js, core)
    }

    #[test]
    fn the_policys_open_canvas_rule_keeps_what_the_core_keeps() {
        let i = |id: &str, title: &str| json!({"instanceId": id, "extensionId": "e", "canvasId": "c", "title": title});
        let answer = json!({"openCanvases": [i("a", "1"), {"instanceId": "x"}, i("b", "1")]});
        let ev = |ty: &str, data: Value| json!({"type": ty, "data": data});
        let events = [
            ev("session.canvas.opened", i("c", "1")),
            ev("session.canvas.opened", i("a", "2")),
            ev("session.canvas.opened", json!({"instanceId": "d", "canvasId": "c"})),
            ev("session.canvas.closed", json!({"instanceId": "b"})),
            ev("session.canvas.closed", json!({"instanceId": ""})),
            ev("session.canvas.recorded", i("e", "1")),
        ];
        let (js, core) = open_canvases(&answer, &events);
        assert_eq!(js, core);
        assert_eq!(js, [i("a", "2"), i("c", "1")]);
        assert_eq!(open_canvases(&json!({}), &[]), (vec![], vec![]));
    }

    /// `ANSWER_SHAPES` as the policy writes it.
    fn shapes_json() -> Value {
        use copilot_core::{GivenNothing, MemberType, Presence};
        let parse = |j: &str| serde_json::from_str::<Value>(j).unwrap();
        let mut shapes = serde_json::Map::new();
        for s in copilot_core::ANSWER_SHAPES {
            let members: Vec<Value> = s
                .members
                .iter()
                .map(|m| {
                    let mut v = json!({"name": m.name, "type": m.ty.name()});
                    if let MemberType::OneOf(names) = m.ty {
                        v["oneOf"] = json!(names);
                    }
                    match m.presence {
                        Presence::Required => v["required"] = true.into(),
                        Presence::Optional => {}
                        Presence::Default(d) => v["default"] = parse(d),
                        Presence::Const(c) => v["const"] = parse(c),
                    }
                    if let Some((member, is)) = m.when {
                        v["when"] = json!({"member": member, "is": is});
                    }
                    v
                })
                .collect();
            let nothing = match s.nothing {
                GivenNothing::Answer(a) => json!({"answer": parse(a)}),
                GivenNothing::Refuse(c) => json!({"refuse": c.name()}),
            };
            let mut shape = json!({"members": members, "open": s.open, "nothing": nothing});
            if let Some(text) = s.text {
                shape["text"] = text.into();
            }
            shapes.insert(s.name.into(), shape);
        }
        Value::Object(shapes)
    }

    #[test]
    fn the_answer_shapes_are_the_cores() {
        assert_eq!(policy()["answerShapes"], shapes_json(), "{:#}", shapes_json());
    }

    /// The policy's generic shaping, as the JS client does it (answering.js,
    /// `shapeAnswer`), against the core's `write_answer` on the same input.
    fn shape_from_policy(name: &str, given: &Value) -> Result<Value, String> {
        let shape = &policy()["answerShapes"][name];
        if given.is_null() {
            return match &shape["nothing"] {
                n if n.get("answer").is_some() => Ok(n["answer"].clone()),
                n => Err(format!("refuse {}", n["refuse"])),
            };
        }
        let text = shape.get("text").and_then(Value::as_str);
        let given = match text {
            Some(t) if given.get(t).is_none_or(|v| !v.is_string()) => {
                json!({ t: given.as_str().map_or_else(|| given.to_string(), str::to_owned) })
            }
            _ => given.clone(),
        };
        let Some(given) = given.as_object() else { return Err("fail".into()) };
        let mut answer = serde_json::Map::new();
        let members = shape["members"].as_array().unwrap();
        for m in members {
            let name = m["name"].as_str().unwrap();
            if let Some(when) = m.get("when") {
                if given.get(when["member"].as_str().unwrap()) != Some(&when["is"]) {
                    continue;
                }
            }
            let v = match (m.get("const"), given.get(name).filter(|v| !v.is_null())) {
                (Some(c), _) => c.clone(),
                (None, Some(v)) => {
                    let fits = match m["type"].as_str().unwrap() {
                        "string" => v.is_string(),
                        "boolean" => v.is_boolean(),
                        "integer" => v.is_i64() || v.is_u64(),
                        _ => v.is_object(),
                    };
                    let listed = m.get("oneOf").is_none_or(|l| l.as_array().unwrap().contains(v));
                    if !fits || !listed {
                        return Err("fail".into());
                    }
                    v.clone()
                }
                (None, None) if m.get("default").is_some() => m["default"].clone(),
                (None, None) if m.get("required").is_some() => return Err("fail".into()),
                (None, None) => continue,
            };
            answer.insert(name.into(), v);
        }
        if shape["open"] == true {
            for (k, v) in given.iter().filter(|(k, _)| !members.iter().any(|m| m["name"] == **k)) {
                answer.insert(k.clone(), v.clone());
            }
        }
        Ok(Value::Object(answer))
    }

    #[test]
    fn the_policys_shaping_answers_as_the_core_writes() {
        let cases: &[(&str, Value)] = &[
            ("permission", json!({"kind": "reject", "feedback": "no"})),
            ("permission", json!({"feedback": "no"})),
            ("permission", Value::Null),
            ("permissionDecisionContext", json!({"outcome": "o", "source": "s", "x": 1})),
            ("tool", json!({"textResultForLlm": "t", "sessionLog": "l"})),
            ("tool", json!({"textResultForLlm": "t", "resultType": "failure"})),
            ("tool", json!({"textResultForLlm": 1})),
            ("tool", json!("text")),
            ("tool", json!({"b": [1, "q\"\n"], "a": {}})),
            ("tool", json!({"textResultForLlm": "t", "resultType": 1})),
            ("tool", Value::Null),
            ("userInput", json!({"answer": "a"})),
            ("userInput", json!({"answer": "a", "wasFreeform": true})),
            ("userInput", json!({})),
            ("userInput", Value::Null),
            ("elicitation", json!({"action": "accept"})),
            ("elicitation", json!({"action": "accept", "content": {"a": 1}})),
            ("elicitation", json!({"action": "accept", "content": []})),
            ("elicitation", json!({"action": "decline", "content": {"a": 1}})),
            ("elicitation", json!({"action": "maybe"})),
            ("elicitation", json!("accept")),
            ("mcpOAuth", json!({"accessToken": "t", "expiresIn": 60, "kind": "x"})),
            ("mcpOAuth", json!({"accessToken": "t", "tokenType": null, "expiresIn": 1.5})),
            ("mcpOAuth", Value::Null),
            ("exitPlanMode", json!({"approved": false, "feedback": "f", "selectedAction": null})),
            ("exitPlanMode", json!({"approved": "yes"})),
            ("systemMessageTransform", json!({"sections": {"b": {"content": "x"}}})),
            ("providerToken", json!({"token": "t"})),
            ("providerToken", json!({"token": 1})),
            ("providerToken", Value::Null),
        ];
        for (name, given) in cases {
            let shape = copilot_core::answer_shape(name).unwrap();
            let mut core = Vec::new();
            let text = given.to_string();
            let given_bytes = (!given.is_null()).then_some(text.as_bytes());
            let core = match copilot_core::write_answer(shape, given_bytes, &mut |b: &[u8]| core.extend_from_slice(b)) {
                Ok(()) => Ok(serde_json::from_slice::<Value>(&core).unwrap()),
                Err(copilot_core::ShapeError::Nothing(c)) => Err(format!("refuse \"{}\"", c.name())),
                Err(_) => Err("fail".into()),
            };
            assert_eq!(shape_from_policy(name, given), core, "{name} {given}");
        }
    }

    #[test]
    fn the_config_defaults_and_the_bridge_prefix_are_the_cores() {
        let c = &policy()["config"];
        assert_eq!(c["mcpTypeByMember"], json!(copilot_core::MCP_TYPE_BY_MEMBER));
        for has in [&["url"][..], &["command"], &["url", "command"], &[]] {
            let first = c["mcpTypeByMember"].as_array().unwrap().iter().find(|p| has.contains(&p[0].as_str().unwrap()));
            let ty = first.map_or(&c["mcpDefaultType"], |p| &p[1]);
            assert_eq!(ty, copilot_core::mcp_server_type(|m| has.contains(&m)), "{has:?}");
        }
        assert_eq!(c["mcpLocalTypes"], json!(copilot_core::MCP_LOCAL_TYPES));
        assert_eq!(c["mcpWorkingDirectory"], json!(copilot_core::MCP_WORKING_DIRECTORY));
        assert_eq!(c["providerDefaultType"], copilot_core::PROVIDER_DEFAULT_TYPE);
        assert_eq!(c["providerTokenCallbackFlag"], copilot_core::PROVIDER_TOKEN_CALLBACK_FLAG);
        assert_eq!(c["providerTokenName"], copilot_core::PROVIDER_TOKEN_NAME);
        assert_eq!(c["systemMessageDefaultMode"], copilot_core::SYSTEM_MESSAGE_DEFAULT_MODE);
        assert_eq!(c["sectionTransformAction"], copilot_core::SECTION_TRANSFORM_ACTION);
        assert_eq!(policy()["bridgeTokenProtocolPrefix"], copilot_core::BRIDGE_TOKEN_PROTOCOL_PREFIX);
    }

    #[test]
    fn the_capabilities_and_ui_calls_are_the_cores() {
        use copilot_core::{Capability, MissingCapability, CAPABILITIES, UI_CALLS};
        let c = &policy()["capabilities"];
        assert_eq!(c["openAnswerMember"], copilot_core::OPEN_ANSWER_CAPABILITIES);
        assert_eq!(c["changedEvent"], copilot_core::CAPABILITIES_CHANGED_EVENT);
        assert_eq!(c["uiMethod"], copilot_core::UI_ELICITATION_METHOD);
        let path = |cap: Capability| json!([cap.path().0, cap.path().1]);
        assert_eq!(c["known"], Value::Array(CAPABILITIES.iter().map(|&k| path(k)).collect()));
        let mut calls = serde_json::Map::new();
        for call in UI_CALLS {
            let mut v = json!({"needs": path(call.needs)});
            if let Some((field, schema)) = call.field {
                v["field"] = field.into();
                v["schema"] = serde_json::from_str(schema).unwrap();
            }
            if call.only_true {
                v["onlyTrue"] = true.into();
            }
            calls.insert(call.name.into(), v);
            let missing = MissingCapability { call: call.name, needs: call.needs };
            assert_eq!(c["missing"][call.needs.path().1], missing.message());
        }
        assert_eq!(c["uiCalls"], Value::Object(calls));
    }

    /// The policy's capability rule, as the JS client keeps it (ui.js).
    fn apply_from_policy(state: &mut serde_json::Map<String, Value>, said: &Value) {
        for k in policy()["capabilities"]["known"].as_array().unwrap() {
            let name = k[1].as_str().unwrap();
            let (value, slot) = match k[0].as_str() {
                Some(group) => (&said[group][name], format!("{group}.{name}")),
                None => (&said[name], name.to_owned()),
            };
            if let Some(b) = value.as_bool() {
                state.insert(slot, b.into());
            }
        }
    }

    #[test]
    fn the_policys_capability_rule_keeps_what_the_core_keeps() {
        use copilot_core::{Capabilities, CAPABILITIES};
        let answer = json!({"capabilities": {"ui": {"elicitation": false, "mcpApps": true}, "extensions": false}});
        let changes = [
            json!({"ui": {"elicitation": true}}),
            json!({"ui": {"canvases": true, "mcpApps": "no"}}),
            json!({"ui": 1, "extensions": true}),
            json!(null),
            json!({"ui": {"elicitation": false}}),
        ];
        let mut core = Capabilities::from_open_answer(answer.to_string().as_bytes());
        let mut js = serde_json::Map::new();
        apply_from_policy(&mut js, &answer[policy()["capabilities"]["openAnswerMember"].as_str().unwrap()]);
        for change in std::iter::once(None).chain(changes.iter().map(Some)) {
            if let Some(change) = change {
                core.apply_change(change.to_string().as_bytes());
                apply_from_policy(&mut js, change);
            }
            for &cap in CAPABILITIES {
                let slot = match cap.path() {
                    (Some(group), name) => format!("{group}.{name}"),
                    (None, name) => name.to_owned(),
                };
                assert_eq!(js.get(&slot).and_then(Value::as_bool), core.get(cap), "{slot} after {change:?}");
            }
        }
    }

    #[test]
    fn the_policys_ui_forms_and_answers_are_the_cores() {
        let calls = &policy()["capabilities"]["uiCalls"];
        for (name, extra) in [
            ("confirm", None),
            ("select", Some(json!({"enum": ["a", "b"]}))),
            ("input", Some(json!({"title": "T", "minLength": 1}))),
            ("input", Some(json!({}))),
        ] {
            let call = copilot_core::ui_call(name).unwrap();
            let mut core = Vec::new();
            let extra_text = extra.as_ref().map(Value::to_string);
            copilot_core::write_ui_form(call, extra_text.as_deref().map(str::as_bytes), &mut |b| {
                core.extend_from_slice(b)
            })
            .unwrap();
            let p = &calls[name];
            let field = p["field"].as_str().unwrap();
            let mut schema = p["schema"].as_object().unwrap().clone();
            schema.extend(extra.as_ref().map_or_else(serde_json::Map::new, |e| e.as_object().unwrap().clone()));
            let js = json!({"type": "object", "properties": {field: schema}, "required": [field]});
            assert_eq!(serde_json::from_slice::<Value>(&core).unwrap(), js, "{name}");
        }
        for (name, result) in [
            ("confirm", json!({"action": "accept", "content": {"confirmed": true}})),
            ("confirm", json!({"action": "accept", "content": {"confirmed": false}})),
            ("confirm", json!({"action": "decline", "content": {"confirmed": true}})),
            ("select", json!({"action": "accept", "content": {"selection": "b"}})),
            ("select", json!({"action": "cancel"})),
            ("input", json!({"action": "accept", "content": {"value": null}})),
            ("input", json!({"action": "accept", "content": {"value": "v"}})),
            ("input", json!({"action": "accept"})),
        ] {
            let text = result.to_string();
            let core = copilot_core::read_ui_answer(copilot_core::ui_call(name).unwrap(), text.as_bytes())
                .map(|v| serde_json::from_str::<Value>(v.raw()).unwrap());
            let p = &calls[name];
            let v = &result["content"][p["field"].as_str().unwrap()];
            let accepted = result["action"] == "accept" && !v.is_null();
            let js = (accepted && (p["onlyTrue"] != true || *v == true)).then(|| v.clone());
            assert_eq!(js, core, "{name} {result}");
        }
    }
}
