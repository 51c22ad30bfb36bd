//! Session options through the real Copilot CLI 1.0.102 against the
//! scripted model, checked where they take effect: in what the model
//! receives (its system prompt, its tool list) and in what the turn does
//! (an MCP server's tool called and answered, a custom agent's prompt, a
//! BYOK provider's token asked of this client).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{
    approve_all, Client, CustomAgentConfig, EventKind, McpServerConfig, Session, SessionConfig, SystemMessage,
    Transport,
};
use copilot_testkit::scripted_model::{ModelRequest, Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);

struct Fixture {
    client: Client,
    model: ScriptedModel,
    dir: TempDir,
}

impl Fixture {
    fn start() -> Fixture {
        let dir = TempDir::new("copilot-options");
        let model = ScriptedModel::start().expect("start the scripted model");
        let client = Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI");
        Fixture { client, model, dir }
    }

    fn config(&self, name: &str) -> SessionConfig {
        scripted_session(self.dir.path(), name)
    }

    /// One turn of a session made from `config` answered by `replies`; the
    /// session and the model requests of the turn.
    fn turn(&self, config: SessionConfig, replies: Vec<Reply>) -> (Session, Option<String>, Vec<ModelRequest>) {
        let session = self.client.create_session(config).expect("create");
        self.model.script(session.id(), replies);
        let reply = session.send_and_wait("Go.", TURN).unwrap_or_else(|e| panic!("turn failed: {e}"));
        let text = reply.and_then(|e| match &e.kind {
            EventKind::AssistantMessage(m) => Some(m.content.clone()),
            _ => None,
        });
        let requests = self.model.requests_for(session.id());
        (session, text, requests)
    }
}

#[test]
fn a_replaced_system_message_and_a_section_transform_reach_the_model() {
    let f = Fixture::start();
    let replaced = "You are Zed, a test double. Say only what you are told.";
    let (_, text, requests) = f.turn(
        SessionConfig { system_message: Some(SystemMessage::Replace(replaced.into())), ..f.config("replace") },
        vec![Reply::text("ok")],
    );
    assert_eq!(text.as_deref(), Some("ok"));
    assert_eq!(requests[0].system_prompt(), replaced, "the whole system prompt is the replacement");

    let seen = Arc::new(Mutex::new(String::new()));
    let seen_in = Arc::clone(&seen);
    let config = SessionConfig {
        system_message: Some(SystemMessage::customize().transform("identity", move |s: &str| {
            *seen_in.lock().unwrap() = s.to_owned();
            format!("IDENTITY-REWRITTEN-BY-THE-CLIENT ({} chars before)", s.len())
        })),
        ..f.config("transform")
    };
    let (_, _, requests) = f.turn(config, vec![Reply::text("ok")]);
    let original = seen.lock().unwrap().clone();
    assert!(!original.is_empty(), "the transform was called with the section's text");
    let prompt = requests[0].system_prompt();
    assert!(prompt.contains("IDENTITY-REWRITTEN-BY-THE-CLIENT"), "{prompt}");
    assert!(!prompt.contains(original.trim()), "the section's own text is gone: {prompt}");
}

#[test]
fn available_and_excluded_tools_change_the_tools_offered_to_the_model() {
    let f = Fixture::start();
    let (_, _, all) = f.turn(f.config("all"), vec![Reply::text("ok")]);
    let all = all[0].tool_names();
    assert!(all.iter().any(|t| t == "bash") && all.iter().any(|t| t == "view"), "{all:?}");

    let excluded = SessionConfig { excluded_tools: vec!["bash".into()], ..f.config("excluded") };
    let (_, _, requests) = f.turn(excluded, vec![Reply::text("ok")]);
    let names = requests[0].tool_names();
    assert!(!names.iter().any(|t| t == "bash"), "{names:?}");
    assert!(names.iter().any(|t| t == "view"), "only bash is excluded: {names:?}");

    let available = SessionConfig { available_tools: Some(vec!["view".into()]), ..f.config("available") };
    let (_, _, requests) = f.turn(available, vec![Reply::text("ok")]);
    assert_eq!(requests[0].tool_names(), ["view"]);
}

fn lookup_server() -> McpServerConfig {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/lookup-server.mjs");
    McpServerConfig::local("node", [script.to_string_lossy().into_owned()])
}

#[test]
fn the_model_calls_the_tool_of_an_mcp_server_of_the_session_and_reads_its_answer() {
    let f = Fixture::start();
    let config = f.config("mcp").mcp_server("lookup", lookup_server()).on_permission_shared(approve_all());
    let session = f.client.create_session(config).expect("create");
    f.model.script(
        session.id(),
        vec![Reply::tool_call("lookup-lookup_code", json!({"name": "grace"})), Reply::text("Done.")],
    );
    let reply = session.send_and_wait("Look up grace.", TURN).expect("turn");
    let requests = f.model.requests_for(session.id());
    assert!(requests[0].tool_names().contains(&"lookup-lookup_code".to_owned()), "{:?}", requests[0].tool_names());
    assert_eq!(requests[1].tool_results(), ["code of grace: ECARG"]);
    assert!(matches!(reply.map(|e| e.kind.clone()), Some(EventKind::AssistantMessage(m)) if m.content == "Done."));
}

#[test]
fn a_custom_agent_of_the_session_takes_effect() {
    let f = Fixture::start();
    let agent = CustomAgentConfig {
        description: Some("Writes haiku.".into()),
        ..CustomAgentConfig::new("haiku-writer", "AGENT-PROMPT-MARK: answer in haiku.")
    };
    let config = SessionConfig { agent: Some("haiku-writer".into()), ..f.config("agent").custom_agent(agent) };
    let (_, text, requests) = f.turn(config, vec![Reply::text("Five, seven, five.")]);
    assert_eq!(text.as_deref(), Some("Five, seven, five."));
    let prompt = requests[0].system_prompt();
    assert!(prompt.contains("AGENT-PROMPT-MARK"), "the agent's prompt reaches the model: {prompt}");
    // The same agent, not selected: its prompt is not the session's.
    let agent = CustomAgentConfig::new("haiku-writer", "AGENT-PROMPT-MARK: answer in haiku.");
    let (_, _, plain) = f.turn(f.config("no-agent").custom_agent(agent), vec![Reply::text("ok")]);
    assert!(!plain[0].system_prompt().contains("AGENT-PROMPT-MARK"));
}

#[test]
fn a_byok_provider_asks_this_client_for_a_bearer_token_per_model_request() {
    use copilot_host::{ProviderConfig, ProviderTokenRequest, ProviderType};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let f = Fixture::start();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let provider = ProviderConfig {
        model_id: Some(ScriptedModel::MODEL.into()),
        ..ProviderConfig::new(ProviderType::OpenAi, f.model.url()).bearer_token_provider(
            move |r: &ProviderTokenRequest| {
                assert_eq!(r.provider_name, "default");
                counter.fetch_add(1, Ordering::SeqCst);
                Some("byok-token".into())
            },
        )
    };
    let config = SessionConfig { provider: Some(provider), ..f.config("byok") };
    let session = f.client.create_session(config).expect("create");
    f.model.script(session.id(), vec![Reply::text("Through my own provider.")]);
    let reply = session.send_and_wait("Go.", TURN).unwrap_or_else(|e| panic!("turn failed: {e}"));
    assert!(reply.is_some(), "the turn went through the provider");
    // This fixture's CLI has run this one session: every model request is its.
    let requests = f.model.requests().len();
    assert!(requests >= 1);
    assert_eq!(asked.load(Ordering::SeqCst), requests, "one token per model request");
}
