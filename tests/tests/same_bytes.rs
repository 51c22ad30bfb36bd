//! The Rust client and the JavaScript client send the same bytes for the
//! core's rules that show on the wire (issue 16: answers and refusals, the
//! hook call, generic kinds, follow-ups, handshake, stop, launch argv,
//! option names, the tool-failure text; the kept events, the turn rule and
//! the capacities send nothing of their own): both run one scenario
//! against the fake CLI (`fake_cli --record FILE`, spawned by each client as
//! it spawns the real CLI, over stdio), and what each SENT is compared item
//! by item, normalised only where a value is legitimately random (the
//! client's request ids, the session id it picks, the connection token).
//!
//! The scenario: start; open a session with a permission handler that
//! approves, a tool whose handler fails, an MCP OAuth handler that gives a
//! token, an elicitation handler that accepts without content, a user
//! input handler, an exit-plan-mode handler, three canvases, a system message section
//! transform, a BYOK provider with a token callback (its default type),
//! a local and a remote MCP server (their types inferred in JS) and a
//! pre-tool-use hook that denies; run the turn `obligations:failing_tool`,
//! in which the fake raises a permission prompt, an elicitation, a call of
//! the tool, an MCP OAuth request, a user input request, an exit-plan-mode
//! request, a transform of two sections, a provider token request, a
//! `preToolUse` hook call, a `sessionEnd` hook call (no hook set), a
//! `sessionFs.readFile` request (no handler), an unknown request and the
//! canvas requests (opens, an action, closes, failures with a code and
//! without, an action without a handler, a canvas not declared), then
//! the same kinds of waits with unreadable data (a member the handler reads
//! missing or of another kind: refused by the core's `HandlerKind::reads`;
//! any other member missing or of another kind: the handler is asked), and
//! ends the turn when all are answered (every typed handler kind's answer
//! is shaped by the core's `ANSWER_SHAPES`); stop the client (which destroys the
//! session and shuts the spawned CLI down, as the core's `STOP_STEPS` say).
//!
//! A second test starts and stops alone, over TCP (the connection token)
//! and against a CLI without `connect` (the `ping` fallback), and compares
//! the argv and every frame. A third opens sessions in each client mode
//! (the core's `ClientMode`): an empty-mode client (its CLI's state folder
//! and variables, the defaults under the user's values, the system
//! message without `environment_context`, `largeOutput`'s wire names, the
//! `session.options.update` after each open), the same when the CLI
//! refuses the patch (the session is destroyed, the open fails), and the
//! default mode (a patch only of what the user set); it compares the argv,
//! the variables and every frame.
//!
//! The JavaScript half is `tests/js/same_bytes.mjs`, run by Node on the
//! package's sources; it needs the WebAssembly built (`scripts/build-wasm`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use copilot_host::events::{ElicitationRequestedData, McpOauthRequiredData};
use copilot_host::{
    approve_all, Canvas, CanvasAction, CanvasContext, CanvasError, Client, ClientMode, ClientOptions,
    ElicitationResponse, ExitPlanModeRequest, ExitPlanModeResponse, LargeToolOutputConfig, McpServerConfig, OAuthToken,
    PreToolUseOutput, ProviderConfig, ProviderTokenRequest, ProviderType, SectionAction, SessionConfig, SessionHooks,
    SystemMessage, Tool, ToolInvocation, Transport, UserInputRequest, UserInputResponse,
};
use copilot_tests::real_cli::TempDir;
use serde_json::{json, Value};

/// The turn's own bound; the fake ends it as soon as every wait is answered.
const TURN: Duration = Duration::from_secs(30);
/// The prompt that makes the fake raise every wait (see `fake_cli`).
const PROMPT: &str = "obligations:failing_tool";

/// The ids of the fake's server requests in the `obligations:` turn, and
/// the request ids of its events, with the item each answer is.
const SERVER_REQUESTS: &[(&str, &str)] = &[
    ("hook-pre", "the answer to a hook call (preToolUse, denied)"),
    ("hook-unset", "the answer to a hook call with no hook set (sessionEnd)"),
    ("no-handler", "the refusal of a request with no handler (sessionFs.readFile)"),
    ("unknown-method", "the refusal of an unknown request (fake.unknownMethod)"),
    ("input-1", "the answer to a user input request (ANSWER_SHAPES userInput)"),
    ("plan-1", "the answer to an exit-plan-mode request (ANSWER_SHAPES exitPlanMode)"),
    ("transform-1", "the answer to a system message transform (ANSWER_SHAPES systemMessageTransform)"),
    ("token-1", "the answer to a provider token request (ANSWER_SHAPES providerToken)"),
    ("bad-input-choices", "the answer to a user input request whose choices are not a list"),
    ("bad-input-question", "the refusal of a user input request without a question (HandlerKind::reads)"),
    ("bad-plan", "the answer to an exit-plan-mode request whose summary and actions are of another kind"),
    ("bad-transform", "the answer to a transform whose sections have no string content"),
    ("bad-token", "the refusal of a provider token request without a provider name (HandlerKind::reads)"),
    ("bad-hook", "the refusal of a hook call without a hook type (HandlerKind::reads)"),
    ("bad-hook-input", "the answer to a hook call whose input members are of another kind"),
    ("canvas-open", "the answer to a canvas open (the handler's result)"),
    ("canvas-open-quiet", "the answer to a canvas open whose handler gives nothing (CANVAS_REQUESTS)"),
    ("canvas-action", "the answer to a canvas action (the handler's result)"),
    ("canvas-close", "the answer to a canvas close (after on_close)"),
    ("canvas-close-quiet", "the answer to a canvas close without on_close"),
    ("canvas-coded", "the error of a canvas action whose handler fails with a code (Engine::fail_coded)"),
    ("canvas-failed", "the error of a canvas open whose handler fails without a code (CANVAS_HANDLER_ERROR)"),
    ("canvas-no-action", "the error of a canvas action without a handler (CANVAS_ACTION_NO_HANDLER)"),
    ("canvas-unknown", "the error of a request for a canvas not declared (CANVAS_UNKNOWN_PREFIX)"),
    ("bad-canvas", "the refusal of a canvas request without a canvas id (HandlerKind::reads)"),
];
const EVENT_WAITS: &[(&str, &str)] = &[
    ("perm-1", "the answer to a permission request (approved)"),
    ("elicit-1", "the answer to an elicitation accepted without content"),
    ("tool-1", "the answer for a tool whose handler fails"),
    ("oauth-1", "the answer to an MCP OAuth request with a token (ANSWER_SHAPES mcpOAuth)"),
    ("bad-perm", "the refusal of a permission request whose permissionRequest is not an object (HandlerKind::reads)"),
    ("bad-tool-ids", "the answer for a tool call without sessionId and toolCallId"),
    ("bad-tool-name", "the refusal of a tool call whose toolName is not a string (HandlerKind::reads)"),
    ("bad-elicit", "the answer to an elicitation whose mode and schema are of another kind"),
    ("bad-oauth", "the answer to an MCP OAuth request without a reason"),
    ("bad-command", "the refusal of a command without command and args, with no handler"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_owned()
}

fn fake_cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fake_cli"))
}

/// `fake_cli`'s arguments after the client's own: `extra`, then the record.
fn fake_args(record: &Path, extra: &[&str]) -> Vec<String> {
    let record = ["--record".to_owned(), record.display().to_string()];
    extra.iter().map(|a| (*a).to_owned()).chain(record).collect()
}

/// A client of `copilot_host`, in this process, started on the fake.
fn start_rust(record: &Path, transport: Transport, extra: &[&str]) -> Client {
    Client::start(fake_options(record, transport, extra)).expect("start the fake CLI")
}

fn fake_options(record: &Path, transport: Transport, extra: &[&str]) -> ClientOptions {
    ClientOptions {
        cli_path: Some(fake_cli()),
        transport,
        extra_args: fake_args(record, extra),
        ..ClientOptions::default()
    }
}

/// The state folder of the mode scenarios' clients (`SAME_BYTES_HOME` for
/// the JavaScript half).
const MODE_HOME: &str = "/tmp/copilot-same-bytes-home";

/// The mode scenarios through `copilot_host` (see `modes` in
/// tests/js/same_bytes.mjs): `empty-mode` and `empty-mode-fails` open
/// sessions `empty-1` (the user's values over some defaults, an appended
/// system message, `largeOutput`) and `empty-2` (a customized system
/// message), `default-mode` opens `cli-1` (one option to patch) and `cli-2`
/// (none). Returns the open's error, if any.
fn run_rust_modes(record: &Path, scenario: &str, extra: &[&str]) -> Option<String> {
    let mut options = fake_options(record, Transport::Stdio, extra);
    if scenario != "default-mode" {
        options.mode = ClientMode::Empty;
        options.base_directory = Some(MODE_HOME.into());
    }
    let client = Client::start(options).expect("start the fake CLI");
    let large = LargeToolOutputConfig {
        enabled: Some(true),
        max_size_bytes: Some(1000),
        output_directory: Some("/tmp/copilot-large-output".into()),
    };
    let (first, second) = if scenario == "default-mode" {
        let first = SessionConfig {
            session_id: Some("cli-1".into()),
            coauthor_enabled: Some(false),
            large_output: Some(large),
            ..SessionConfig::default()
        };
        (first, SessionConfig { session_id: Some("cli-2".into()), ..SessionConfig::default() })
    } else {
        let first = SessionConfig {
            session_id: Some("empty-1".into()),
            available_tools: Some(vec!["custom:*".into()]),
            enable_skills: Some(true),
            memory: Some(json!({"enabled": true})),
            system_message: Some(SystemMessage::Append("Be brief.".into())),
            large_output: Some(large),
            coauthor_enabled: Some(true),
            skip_custom_instructions: Some(false),
            ..SessionConfig::default()
        };
        let second = SessionConfig {
            session_id: Some("empty-2".into()),
            available_tools: Some(vec![]),
            system_message: Some(SystemMessage::customize().section("tone", SectionAction::Remove, None)),
            ..SessionConfig::default()
        };
        (first, second)
    };
    // The sessions stay open until the stop destroys them.
    let mut open = Vec::new();
    let failed = [first, second].into_iter().find_map(|config| match client.create_session(config) {
        Ok(session) => {
            open.push(session);
            None
        }
        Err(e) => Some(e),
    });
    client.stop().expect("stop");
    failed.map(|e| e.to_string())
}

/// The obligations scenario through `copilot_host`.
fn run_rust(record: &Path) {
    let client = start_rust(record, Transport::Stdio, &[]);
    let failing = Tool::new("failing_tool", "Always fails.", json!({"type": "object"}), |_: &ToolInvocation| {
        Err::<String, _>("the tool broke")
    });
    let config = SessionConfig::default()
        .on_permission_shared(approve_all())
        .on_elicitation(|_: &ElicitationRequestedData| ElicitationResponse::Accept(Value::Null))
        .on_mcp_oauth(|_: &McpOauthRequiredData| {
            Some(OAuthToken { access_token: "tok".into(), token_type: Some("Bearer".into()), expires_in: Some(60) })
        })
        .on_user_input(|_: &UserInputRequest| Some(UserInputResponse { answer: "a".into(), was_freeform: false }))
        .on_exit_plan_mode(|_: &ExitPlanModeRequest| ExitPlanModeResponse {
            approved: true,
            selected_action: Some("interactive".into()),
            feedback: None,
        })
        .mcp_server("local", McpServerConfig::local("mcp-server", ["--x"]))
        .mcp_server("remote", McpServerConfig::http("https://mcp.example/"))
        .tool(failing)
        .canvas(
            Canvas::new("counter", "Counter", "Counts.", |_: &CanvasContext| {
                Ok(json!({"title": "Count", "url": "https://example.test/c1"}))
            })
            .on_close(|_: &CanvasContext| Ok(()))
            .action(CanvasAction::new("increment", |_: &CanvasContext| Ok(json!({"count": 5}))))
            .action(CanvasAction::new("explode", |_: &CanvasContext| {
                Err(CanvasError::new("counter_broke", "the counter \"broke\""))
            }))
            .action(CanvasAction::without_handler("missing")),
        )
        .canvas(Canvas::new("quiet", "Quiet", "Says nothing.", |_: &CanvasContext| Ok(Value::Null)))
        .canvas(Canvas::new("broken", "Broken", "Never opens.", |_: &CanvasContext| {
            Err(CanvasError::failed("this canvas is broken"))
        }))
        .hooks(SessionHooks::new().on_pre_tool_use(|_, _| Some(PreToolUseOutput::deny("not in this test"))));
    let config = SessionConfig {
        system_message: Some(SystemMessage::customize().transform("tone", |text: &str| text.to_uppercase())),
        provider: Some(
            ProviderConfig::new(ProviderType::OpenAi, "http://127.0.0.1:9/v1")
                .bearer_token_provider(|_: &ProviderTokenRequest| Some("bearer-1".to_owned())),
        ),
        ..config
    };
    let session = client.create_session(config).expect("create the session");
    session.send_and_wait(PROMPT, TURN).expect("the turn ends when every wait is answered");
    client.stop().expect("stop");
}

/// A scenario (`obligations` or `start-stop`) through the npm package's
/// client, in Node.
fn run_js(record: &Path, scenario: &str, transport: &str, extra: &[&str]) -> String {
    let dist = root().join("wasm/npm/dist/copilot_wasm_bg.wasm");
    assert!(dist.exists(), "{} is missing: run scripts/build-wasm first (this test never skips)", dist.display());
    let script = root().join("tests/js/same_bytes.mjs");
    let out = Command::new("node")
        .arg(&script)
        .args([fake_cli().as_os_str(), scenario.as_ref(), transport.as_ref()])
        .args(fake_args(record, extra))
        .env("SAME_BYTES_HOME", MODE_HOME)
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "the JavaScript half failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// What the fake recorded: the body of every frame the client sent, as
/// it came, in order.
fn recorded(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines().map(str::to_owned).collect()
}

/// The arguments the client started the fake with (`FILE.argv`), the
/// record file's own path as `<record>`.
fn launch_argv(record: &Path) -> String {
    let path = format!("{}.argv", record.display());
    let argv = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let record = Value::from(record.display().to_string()).to_string();
    argv.replace(&record, "\"<record>\"")
}

/// The variables of a client's mode the fake was started with (`FILE.env`).
fn launch_env(record: &Path) -> String {
    let path = format!("{}.env", record.display());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// One message as sent (normalised), and read.
struct Message {
    bytes: String,
    json: Value,
}

/// `bodies` read, and with the client's random values replaced in their
/// bytes: its request ids (`"<id>"`), the session id it picked
/// (`"<session>"`) and the connection token (`"<token>"`).
fn normalised(bodies: Vec<String>) -> Vec<Message> {
    let json: Vec<Value> =
        bodies.iter().map(|b| serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {b}"))).collect();
    let quoted = |v: &Value| v.as_str().map(|s| Value::from(s).to_string());
    let session = json.iter().find(|m| m["method"] == "session.create").and_then(|m| quoted(&m["params"]["sessionId"]));
    let token = json.iter().find(|m| m["method"] == "connect").and_then(|m| quoted(&m["params"]["token"]));
    bodies
        .into_iter()
        .zip(json)
        .map(|(mut bytes, json)| {
            if json.get("method").is_some() && json.get("id").is_some() {
                bytes = bytes.replacen(&format!("\"id\":{}", json["id"]), "\"id\":\"<id>\"", 1);
            }
            if let Some(session) = &session {
                bytes = bytes.replace(session, "\"<session>\"");
            }
            if let Some(token) = &token {
                bytes = bytes.replace(token, "\"<token>\"");
            }
            Message { bytes, json }
        })
        .collect()
}

/// One client's messages, split into the items compared: each item is the
/// bytes of its messages, one message a line.
struct Sent {
    items: Vec<(String, String)>,
}

impl Sent {
    /// Splits `bodies`, [`normalised`].
    fn new(argv: String, bodies: Vec<String>) -> Sent {
        let messages = normalised(bodies);

        let server_ids: Vec<&str> = SERVER_REQUESTS.iter().map(|r| r.0).collect();
        let wait_ids: Vec<&str> = EVENT_WAITS.iter().map(|w| w.0).collect();
        let is_answer = |m: &Message| {
            let id = m.json["id"].as_str();
            let responds = m.json.get("method").is_none() && id.is_some_and(|id| server_ids.contains(&id));
            let answers = m.json["params"]["requestId"].as_str().is_some_and(|id| wait_ids.contains(&id));
            responds || answers
        };
        let position = |method: &str| messages.iter().position(|m| m.json["method"] == method);
        let lines =
            |found: &mut dyn Iterator<Item = &Message>| found.map(|m| m.bytes.as_str()).collect::<Vec<_>>().join("\n");
        let mut items = vec![("the CLI's launch (argv)".to_owned(), argv)];
        let mut counted = 0;
        let mut item = |name: &str, found: Vec<&Message>| {
            counted += found.len();
            items.push((name.to_owned(), lines(&mut found.into_iter())));
        };

        let first = |method: &str| position(method).map(|i| &messages[i]).into_iter().collect();
        item("the connect request (handshake)", first("connect"));
        item("the session.create request (open params)", first("session.create"));
        // Everything sent between the create and the turn: the follow-ups.
        let (create, send) = (position("session.create"), position("session.send"));
        let follow_ups = match (create, send) {
            (Some(c), Some(s)) if c < s => messages[c + 1..s].iter().collect(),
            _ => Vec::new(),
        };
        item("the follow-ups after the open (registerInterest)", follow_ups);
        item("the session.send request", first("session.send"));
        for (id, name) in SERVER_REQUESTS {
            item(name, messages.iter().filter(|m| m.json.get("method").is_none() && m.json["id"] == *id).collect());
        }
        for (id, name) in EVENT_WAITS {
            item(name, messages.iter().filter(|m| m.json["params"]["requestId"] == *id).collect());
        }
        // After the turn's request: what is not an answer is the stop.
        let stop = send.map_or(Vec::new(), |s| messages[s + 1..].iter().filter(|m| !is_answer(m)).collect());
        item("the stop sequence (STOP_STEPS)", stop);
        // And nothing else: every message is in one of the items above.
        items.push((
            "the number of messages sent".to_owned(),
            format!("{} in all, {counted} in the items", messages.len()),
        ));
        Sent { items }
    }
}

#[test]
fn the_rust_and_javascript_clients_send_the_same_bytes() {
    let dir = TempDir::new("copilot-same-bytes");
    let (rust_record, js_record) = (dir.path().join("rust.jsonl"), dir.path().join("js.jsonl"));
    run_rust(&rust_record);
    run_js(&js_record, "obligations", "stdio", &[]);
    let rust = Sent::new(launch_argv(&rust_record), recorded(&rust_record));
    let js = Sent::new(launch_argv(&js_record), recorded(&js_record));

    let mut differences = Vec::new();
    for ((name, r), (_, j)) in rust.items.iter().zip(&js.items) {
        assert!(!r.is_empty() || !j.is_empty(), "neither client sent {name}");
        // Shown with `--nocapture`: what was compared.
        println!("{name}:\n  Rust: {r}\n  JS:   {j}");
        if r != j {
            differences.push(format!("{name}:\n  Rust: {r}\n  JS:   {j}"));
        }
    }
    assert!(differences.is_empty(), "the clients differ in {} item(s):\n{}", differences.len(), differences.join("\n"));
}

/// Starting and stopping alone, over TCP (a connection token in `connect`,
/// `runtime.shutdown` for a server that does not end with its socket) and
/// against a CLI older than `connect` (the `ping` fallback): the argv and
/// every frame, in order, the same bytes.
#[test]
fn the_rust_and_javascript_clients_start_and_stop_with_the_same_bytes() {
    let dir = TempDir::new("copilot-same-bytes-start");
    let cases: [(&str, Transport, &str, &[&str]); 2] = [
        ("over TCP", Transport::Tcp { port: 0 }, "tcp", &[]),
        ("against a CLI without connect", Transport::Stdio, "stdio", &["--legacy-connect"]),
    ];
    let mut differences = Vec::new();
    for (n, (case, transport, js_transport, extra)) in cases.into_iter().enumerate() {
        let (rust_record, js_record) =
            (dir.path().join(format!("rust-{n}.jsonl")), dir.path().join(format!("js-{n}.jsonl")));
        start_rust(&rust_record, transport, extra).stop().expect("stop");
        run_js(&js_record, "start-stop", js_transport, extra);
        let sent = |record: &Path| {
            let frames = normalised(recorded(record)).into_iter().map(|m| m.bytes).collect::<Vec<_>>();
            [("the CLI's launch (argv)", launch_argv(record)), ("every frame", frames.join("\n"))]
        };
        for ((item, r), (_, j)) in sent(&rust_record).into_iter().zip(sent(&js_record)) {
            println!("{case}, {item}:\n  Rust: {r}\n  JS:   {j}");
            assert!(!r.is_empty() || !j.is_empty(), "neither client sent {item} {case}");
            if r != j {
                differences.push(format!("{case}, {item}:\n  Rust: {r}\n  JS:   {j}"));
            }
        }
    }
    assert!(differences.is_empty(), "the clients differ in {} item(s):\n{}", differences.len(), differences.join("\n"));
}

/// Sessions in each client mode (the core's `ClientMode`): an empty-mode
/// client's state folder and variables, its sessions' defaults under the
/// user's values, the system message without `environment_context`,
/// `largeOutput` under its wire names, the `session.options.update` after
/// each open; the same with a CLI that refuses the patch (the session is
/// destroyed and the open fails with the CLI's error); a default-mode client
/// patching only what the user set. The argv, the variables and every
/// frame, in order, the same bytes.
#[test]
fn the_rust_and_javascript_clients_open_sessions_in_each_mode_with_the_same_bytes() {
    let dir = TempDir::new("copilot-same-bytes-modes");
    let cases: [(&str, &[&str]); 3] =
        [("empty-mode", &[]), ("empty-mode-fails", &["--fail-options-update"]), ("default-mode", &[])];
    let mut differences = Vec::new();
    for (scenario, extra) in cases {
        let (rust_record, js_record) =
            (dir.path().join(format!("rust-{scenario}.jsonl")), dir.path().join(format!("js-{scenario}.jsonl")));
        let rust_error = run_rust_modes(&rust_record, scenario, extra);
        let js_error = run_js(&js_record, scenario, "stdio", extra);
        let refused = scenario == "empty-mode-fails";
        assert_eq!(rust_error.is_some(), refused, "{scenario}: the Rust open failed: {rust_error:?}");
        if refused {
            let rust_error = rust_error.unwrap_or_default();
            assert!(rust_error.contains("options refused by the fake"), "the CLI's error: {rust_error}");
            assert!(js_error.contains("options refused by the fake"), "the CLI's error in JS: {js_error}");
        }
        let sent = |record: &Path| {
            let frames = normalised(recorded(record)).into_iter().map(|m| m.bytes).collect::<Vec<_>>();
            [
                ("the CLI's launch (argv)", launch_argv(record)),
                ("its mode's variables", launch_env(record)),
                ("every frame", frames.join("\n")),
            ]
        };
        let (rust, js) = (sent(&rust_record), sent(&js_record));
        let frames = &rust[2].1;
        assert_eq!(
            frames.matches("\"session.options.update\"").count(),
            if scenario == "empty-mode" { 2 } else { 1 },
            "{frames}"
        );
        if refused {
            assert!(frames.contains(r#""method":"session.destroy","params":{"sessionId":"<session>"}"#), "{frames}");
        }
        for ((item, r), (_, j)) in rust.into_iter().zip(js) {
            println!("{scenario}, {item}:\n  Rust: {r}\n  JS:   {j}");
            if r != j {
                differences.push(format!("{scenario}, {item}:\n  Rust: {r}\n  JS:   {j}"));
            }
        }
    }
    assert!(differences.is_empty(), "the clients differ in {} item(s):\n{}", differences.len(), differences.join("\n"));
}
