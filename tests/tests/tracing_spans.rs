//! The `tracing` integration (features `tracing` and `opentelemetry`)
//! through the real Copilot CLI 1.0.102 and the scripted model: the trace
//! context is taken from the current span; a `send_and_wait` runs in a
//! `copilot.turn` span, child of the caller's, whose context its send
//! carries (the CLI's spans join the caller's trace); a tool handler runs
//! in a `copilot.tool` span whose parent is the CLI's span for the call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{ClientOptions, TelemetryConfig, Tool, ToolInvocation, TraceContext, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use opentelemetry::trace::TracerProvider;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

const TURN: Duration = Duration::from_secs(90);

/// A span made: its name and its parent's.
type SpanMade = (&'static str, Option<&'static str>);

/// Records each span made.
struct Made(Arc<Mutex<Vec<SpanMade>>>);

impl<S> tracing_subscriber::Layer<S> for Made
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.name());
        self.0.lock().unwrap().push((attrs.metadata().name(), parent));
    }
}

/// What the tool handler saw: the current span's name, its trace context,
/// and the context the CLI gave the call.
type Seen = Arc<Mutex<Vec<(Option<&'static str>, TraceContext, Option<String>)>>>;

#[test]
fn a_turn_and_a_tool_call_are_spans_of_the_callers_trace() {
    // An OpenTelemetry tracer behind `tracing` (no exporter: the ids are
    // what matters), for every thread: handlers run on the client's.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let made = Arc::<Mutex<Vec<_>>>::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("app")))
        .with(Made(Arc::clone(&made)));
    tracing::subscriber::set_global_default(subscriber).expect("the test's subscriber");

    let dir = TempDir::new("copilot-tracing");
    let model = ScriptedModel::start().expect("start the scripted model");
    let spans = dir.path().join("spans.jsonl");
    let mut options: ClientOptions =
        scripted_options(Transport::Stdio, dir.path(), &model).trace_context_from_current_span();
    options.telemetry = Some(TelemetryConfig::file(&spans));
    let client = copilot_host::Client::start(options).expect("start the CLI");

    let seen: Seen = Arc::default();
    let weather = Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), {
        let seen = Arc::clone(&seen);
        move |call: &ToolInvocation| {
            let name = tracing::Span::current().metadata().map(|m| m.name());
            seen.lock().unwrap().push((name, TraceContext::from_current_span(), call.traceparent.clone()));
            "Sunny"
        }
    })
    .skip_permission();
    let session = client.create_session(scripted_session(dir.path(), "traced").tool(weather)).unwrap();
    model.script(session.id(), vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("Sunny.")]);

    let app = tracing::info_span!("app");
    let trace_id = {
        let _entered = app.enter();
        let ours = TraceContext::from_current_span().traceparent.expect("the caller's span has a context");
        session.send_and_wait("Weather?", TURN).expect("the turn");
        ours.split('-').nth(1).unwrap().to_owned()
    };
    assert_eq!(TraceContext::from_current_span(), TraceContext::default(), "outside any span: none");
    session.destroy().unwrap();
    client.stop().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one tool call");
    let (name, in_tool, from_cli) = &seen[0];
    assert_eq!(*name, Some("copilot.tool"), "the handler runs in the tool's span");
    let from_cli = from_cli.as_deref().expect("the CLI gave the call its span's context");
    let in_tool = in_tool.traceparent.as_deref().expect("the tool's span has a context");
    eprintln!("caller's trace {trace_id}; the CLI's span for the call {from_cli}; the tool's span {in_tool}");
    assert_eq!(from_cli.split('-').nth(1), Some(trace_id.as_str()), "the CLI's span is in the caller's trace");
    assert_eq!(in_tool.split('-').nth(1), Some(trace_id.as_str()), "the tool's span is in the caller's trace");
    assert_ne!(in_tool.split('-').nth(2), from_cli.split('-').nth(2), "a span of its own, child of the CLI's");
    let made = made.lock().unwrap().clone();
    assert!(made.contains(&("copilot.turn", Some("app"))), "the turn's span, the caller's child: {made:?}");
    assert!(made.contains(&("copilot.tool", None)), "the tool's span: {made:?}");
    let written = std::fs::read_to_string(&spans).expect("the CLI wrote its spans");
    assert!(written.lines().any(|l| l.contains(&trace_id)), "the CLI's spans are in the caller's trace");
}
