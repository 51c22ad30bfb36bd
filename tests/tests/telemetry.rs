//! OpenTelemetry through the real Copilot CLI 1.0.102 and the scripted
//! model: with telemetry configured (the file exporter) and a trace context
//! provider, the CLI's spans join the caller's trace (the trace id the
//! provider gave is in the spans it writes), and a tool handler gets the
//! context of the CLI's span for its call, in the same trace.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use copilot_host::{Client, EventKind, TelemetryConfig, Tool, ToolInvocation, TraceContext, Transport};
use copilot_testkit::scripted_model::{Reply, ScriptedModel};
use copilot_tests::real_cli::{scripted_options, scripted_session, TempDir};
use serde_json::json;

const TURN: Duration = Duration::from_secs(90);
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The traceparent and tracestate of each tool call.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

#[test]
fn the_clis_spans_and_a_tools_call_join_the_callers_trace() {
    let dir = TempDir::new("copilot-telemetry");
    let model = ScriptedModel::start().expect("start the scripted model");
    let spans = dir.path().join("spans.jsonl");
    let mut options = scripted_options(Transport::Stdio, dir.path(), &model).trace_context_provider(|| TraceContext {
        traceparent: Some(format!("00-{TRACE_ID}-00f067aa0ba902b7-01")),
        tracestate: Some("app=1".into()),
    });
    options.telemetry = Some(TelemetryConfig::file(&spans));
    let client = Client::start(options).expect("start the CLI");

    let seen: Seen = Arc::default();
    let weather = Tool::new("get_weather", "Get the weather.", json!({"type": "object"}), {
        let seen = Arc::clone(&seen);
        move |call: &ToolInvocation| {
            seen.lock().unwrap().push((call.traceparent.clone(), call.tracestate.clone()));
            "Sunny"
        }
    })
    .skip_permission();
    let session = client.create_session(scripted_session(dir.path(), "traced").tool(weather)).unwrap();
    model.script(session.id(), vec![Reply::tool_call("get_weather", json!({"city": "Paris"})), Reply::text("Sunny.")]);
    let reply = session.send_and_wait("Weather?", TURN).expect("the turn");
    assert!(matches!(reply.as_ref().map(|e| &e.kind), Some(EventKind::AssistantMessage(m)) if m.content == "Sunny."));
    session.destroy().unwrap();
    client.stop().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let traceparent = seen[0].0.clone().expect("the tool's call carries the CLI's span");
    eprintln!("the tool's traceparent: {traceparent}, tracestate: {:?}", seen[0].1);
    assert_eq!(traceparent.split('-').nth(1), Some(TRACE_ID), "the tool's span is in the caller's trace");
    let written = std::fs::read_to_string(&spans).expect("the CLI wrote its spans");
    let lines = written.lines().filter(|l| l.contains(TRACE_ID)).count();
    eprintln!("{} span lines, {lines} in the caller's trace", written.lines().count());
    assert!(lines > 0, "the CLI's spans are in the caller's trace:\n{}", &written[..written.len().min(2000)]);
}
