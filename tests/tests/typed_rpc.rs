//! The typed calls (`copilot_host::rpc`, feature `rpc-types`) against the
//! real Copilot CLI 1.0.102 and the scripted model: the model list, a model
//! switch and a custom agent selected through the session's typed calls,
//! each seen in the next model request; a file attachment that reaches the
//! model (tagged in the user message); the async API's typed calls. Every event these tests provoke is
//! typed (no `EventKind::Other`).
//!
//! The tests share one CLI (it starts in about 2 s) and keep apart by
//! session.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use copilot_host::rpc::{self, Attachment};
use copilot_host::{
    Client, CustomAgentConfig, EventKind, MessageOptions, Session, SessionConfig, SessionEvent, Transport,
};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};

const TURN: Duration = Duration::from_secs(90);

struct Fixture {
    /// The async client; `client()` is the blocking one on the same
    /// connection.
    async_client: copilot_host::asynch::Client,
    model: ScriptedModel,
    dir: TempDir,
}

fn shared() -> Arc<Fixture> {
    static SLOT: Mutex<Weak<Fixture>> = Mutex::new(Weak::new());
    let mut slot = SLOT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = slot.upgrade() {
        return f;
    }
    let dir = TempDir::new("copilot-typed-rpc");
    let model = ScriptedModel::start().expect("start the scripted model");
    let async_client =
        Client::start(scripted_options(Transport::Stdio, dir.path(), &model)).expect("start the CLI").into();
    let f = Arc::new(Fixture { async_client, model, dir });
    *slot = Arc::downgrade(&f);
    f
}

impl Fixture {
    fn client(&self) -> &Client {
        self.async_client.blocking()
    }

    fn config(&self, name: &str) -> SessionConfig {
        scripted_session(self.dir.path(), name)
    }

    /// The `model` of every model request of `session`, oldest first.
    fn models_asked(&self, session: &Session) -> Vec<String> {
        self.model
            .requests_for(session.id())
            .iter()
            .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// Every event of `session` so far (persisted and live), none of them
/// `EventKind::Other`.
fn assert_all_typed(events: &Mutex<Vec<SessionEvent>>) {
    let events = events.lock().unwrap();
    assert!(!events.is_empty(), "the session had events");
    let other: Vec<&str> =
        events.iter().filter(|e| matches!(e.kind, EventKind::Other { .. })).map(SessionEvent::event_type).collect();
    assert!(other.is_empty(), "events not typed: {other:?}");
}

fn record(session: &Session) -> (Arc<Mutex<Vec<SessionEvent>>>, copilot_host::Subscription) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let sub = session.on(move |e| sink.lock().unwrap().push(e.clone()));
    (seen, sub)
}

#[test]
fn list_models_is_the_scripted_models_list_with_capabilities() {
    let f = shared();
    let models = f.client().list_models().expect("models.list");
    // The scripted model's two, and the CLI's own virtual `auto`.
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["auto", ScriptedModel::OTHER_MODEL, ScriptedModel::MODEL]);
    let by_id = |id: &str| models.iter().find(|m| m.id == id).expect("listed").capabilities.clone();
    let context = |id: &str| by_id(id).limits.and_then(|l| l.max_context_window_tokens);
    assert_eq!(context(ScriptedModel::MODEL), Some(128000));
    assert_eq!(context(ScriptedModel::OTHER_MODEL), Some(64000));
    assert_eq!(by_id(ScriptedModel::MODEL).supports.and_then(|s| s.vision), Some(false));

    // The same list through the generated call.
    let typed = f.client().rpc().models().list(rpc::ModelsListRequest::default()).expect("rpc models.list");
    assert_eq!(typed.models, models);
}

#[test]
fn a_model_switch_through_the_typed_call_names_the_new_model_in_the_next_request() {
    let f = shared();
    let session = f.client().create_session(f.config("switch")).expect("create");
    let (events, _sub) = record(&session);
    f.model.script(session.id(), vec![Reply::text("first"), Reply::text("second")]);

    session.send_and_wait("one", TURN).expect("first turn");
    assert_eq!(f.models_asked(&session), [ScriptedModel::MODEL]);

    let current = session.rpc().model().get_current().expect("model.getCurrent");
    assert_eq!(current.model_id.as_deref(), Some(ScriptedModel::MODEL));
    let params = rpc::SessionModelSwitchToParams { model_id: ScriptedModel::OTHER_MODEL.into(), ..Default::default() };
    let switched = session.rpc().model().switch_to(params).expect("model.switchTo");
    assert_eq!(switched.model_id.as_deref(), Some(ScriptedModel::OTHER_MODEL));

    session.send_and_wait("two", TURN).expect("second turn");
    assert_eq!(f.models_asked(&session), [ScriptedModel::MODEL, ScriptedModel::OTHER_MODEL]);
    for e in session.messages().expect("getMessages") {
        events.lock().unwrap().push(e);
    }
    assert_all_typed(&events);
    session.destroy().expect("destroy");
}

#[test]
fn a_custom_agent_selected_through_the_typed_call_gives_the_model_its_prompt() {
    let f = shared();
    let mut config = f.config("agent");
    config.custom_agents.push(CustomAgentConfig {
        display_name: Some("Reviewer".into()),
        description: Some("Reviews changes.".into()),
        ..CustomAgentConfig::new("reviewer", "You are the reviewer agent; sign with REVIEWER-7731.")
    });
    let session = f.client().create_session(config).expect("create");
    let (events, _sub) = record(&session);
    f.model.script(session.id(), vec![Reply::text("as myself"), Reply::text("as the reviewer")]);

    let listed = session.rpc().agent().list(rpc::SessionAgentListParams::default()).expect("agent.list");
    assert!(listed.agents.iter().any(|a| a.name == "reviewer"), "{listed:?}");

    let none = session.rpc().agent().get_current().expect("agent.getCurrent without an agent");
    assert_eq!(none.agent, None, "no custom agent yet");
    session.send_and_wait("before", TURN).expect("turn without the agent");
    let selected = session.rpc().agent().select(rpc::SessionAgentSelectParams { name: "reviewer".into() });
    assert_eq!(selected.expect("agent.select").agent.name, "reviewer");
    let current = session.rpc().agent().get_current().expect("agent.getCurrent");
    assert_eq!(current.agent.map(|a| a.name).as_deref(), Some("reviewer"));
    session.send_and_wait("after", TURN).expect("turn with the agent");

    let requests = f.model.requests_for(session.id());
    let mentions = |i: usize| requests[i].body["messages"].to_string().contains("REVIEWER-7731");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(!mentions(0), "the agent's prompt is not there before it is selected");
    assert!(mentions(1), "the agent's prompt reaches the model once selected");
    assert_all_typed(&events);
    session.destroy().expect("destroy");
}

#[test]
fn a_file_attachment_reaches_the_model() {
    let f = shared();
    let config = f.config("attachment");
    let file = config.working_directory.clone().expect("work dir").join("notes.txt");
    std::fs::write(&file, "The launch code is PLUM-4471.\n").expect("write the attachment");
    let session = f.client().create_session(config).expect("create");
    let (events, _sub) = record(&session);
    f.model.script(session.id(), vec![Reply::text("read it")]);

    let message = MessageOptions {
        prompt: "What is in the attached file?".into(),
        attachments: vec![Attachment::file(file.to_string_lossy(), "notes.txt")],
        ..MessageOptions::default()
    };
    session.send_and_wait(message, TURN).expect("turn");

    // The CLI tags the file for the model (its `view` tool reads it).
    let requests = f.model.requests_for(session.id());
    let sent = requests.last().expect("a model request").last_user_text().unwrap_or_default();
    let tagged = format!("* {}", file.display());
    assert!(sent.contains("<tagged_files>") && sent.contains(&tagged), "the file reaches the model: {sent}");
    let user = events
        .lock()
        .unwrap()
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::UserMessage(m) => Some(m.clone()),
            _ => None,
        })
        .expect("user.message");
    assert_eq!(user.attachments.as_ref().map(Vec::len), Some(1), "{user:?}");
    assert_all_typed(&events);
    session.destroy().expect("destroy");
}

#[test]
fn the_async_api_has_the_same_typed_calls() {
    let f = shared();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    runtime.block_on(async {
        let models = f.async_client.list_models().await.expect("models.list");
        assert_eq!(models.len(), 3, "the scripted two and `auto`");
        let typed = f.async_client.rpc().models().list(rpc::ModelsListRequest::default()).await.expect("rpc");
        assert_eq!(typed.models, models);

        let session = f.async_client.create_session(f.config("async")).await.expect("create");
        let current = session.rpc().model().get_current().await.expect("model.getCurrent");
        assert_eq!(current.model_id.as_deref(), Some(ScriptedModel::MODEL));
        let params =
            rpc::SessionModelSwitchToParams { model_id: ScriptedModel::OTHER_MODEL.into(), ..Default::default() };
        session.rpc().model().switch_to(params).await.expect("model.switchTo");
        let current = session.rpc().model().get_current().await.expect("model.getCurrent");
        assert_eq!(current.model_id.as_deref(), Some(ScriptedModel::OTHER_MODEL));
        session.destroy().await.expect("destroy");
    });
}
