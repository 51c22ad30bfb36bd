//! OpenTelemetry, as the official SDKs offer it: the CLI's own trace export
//! configured through its environment ([`TelemetryConfig`]), and the
//! caller's trace context passed on every open and send
//! ([`TraceContextProvider`]); a tool handler gets the context of the CLI's
//! span for its call ([`ToolInvocation::traceparent`](crate::ToolInvocation)).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

/// How a started CLI exports its OpenTelemetry traces (the official SDKs'
/// `telemetry` options). Setting it turns the CLI's export on; each option
/// set goes in the variable the core names for it
/// ([`TELEMETRY_ENV`](copilot_core::TELEMETRY_ENV)), over the user's
/// environment.
/// Its `Debug` output does not show the endpoint, which may carry a key.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// The OTLP HTTP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_endpoint: Option<String>,
    /// `http/json` or `http/protobuf` (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub otlp_protocol: Option<String>,
    /// A file the CLI writes its spans to, one JSON object a line
    /// (`COPILOT_OTEL_FILE_EXPORTER_PATH`).
    pub file_path: Option<PathBuf>,
    /// `otlp-http` or `file` (`COPILOT_OTEL_EXPORTER_TYPE`).
    pub exporter_type: Option<String>,
    /// The instrumentation scope's name (`COPILOT_OTEL_SOURCE_NAME`).
    pub source_name: Option<String>,
    /// Whether spans carry prompts and replies
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`).
    pub capture_content: Option<bool>,
}

impl TelemetryConfig {
    /// Telemetry with the CLI's defaults (the export on, nothing else set).
    pub fn new() -> Self {
        Self::default()
    }

    /// Spans go to `path`, one JSON object a line (the `file` exporter).
    pub fn file(path: impl Into<PathBuf>) -> Self {
        TelemetryConfig { file_path: Some(path.into()), exporter_type: Some("file".into()), ..Self::default() }
    }

    /// Spans go to the OTLP HTTP endpoint `url`.
    pub fn otlp(url: impl Into<String>) -> Self {
        TelemetryConfig { otlp_endpoint: Some(url.into()), exporter_type: Some("otlp-http".into()), ..Self::default() }
    }

    /// The variables a started CLI gets, in the core's order.
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = vec![(copilot_core::TELEMETRY_ENABLED_ENV.into(), "true".into())];
        for (option, variable) in copilot_core::TELEMETRY_ENV {
            let value: Option<OsString> = match *option {
                "otlpEndpoint" => self.otlp_endpoint.as_ref().map(Into::into),
                "otlpProtocol" => self.otlp_protocol.as_ref().map(Into::into),
                "filePath" => self.file_path.as_ref().map(Into::into),
                "exporterType" => self.exporter_type.as_ref().map(Into::into),
                "sourceName" => self.source_name.as_ref().map(Into::into),
                "captureContent" => self.capture_content.map(|c| c.to_string().into()),
                other => unreachable!("the core's telemetry option {other} has no field here"),
            };
            if let Some(value) = value {
                env.push(((*variable).into(), value));
            }
        }
        env
    }
}

impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("otlp_endpoint", &self.otlp_endpoint.as_ref().map(|_| "<redacted>"))
            .field("otlp_protocol", &self.otlp_protocol)
            .field("file_path", &self.file_path)
            .field("exporter_type", &self.exporter_type)
            .field("source_name", &self.source_name)
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

/// A W3C trace context, as the official SDKs pass it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// The `traceparent` header's value.
    pub traceparent: Option<String>,
    /// The `tracestate` header's value.
    pub tracestate: Option<String>,
}

/// Gives the caller's current trace context (wire it to the OpenTelemetry
/// SDK in use): asked at each open and send, whose params carry it, so the
/// CLI's spans join the caller's trace.
pub type TraceContextProvider = Arc<dyn Fn() -> TraceContext + Send + Sync>;

impl TraceContext {
    /// The trace context of the current `tracing` span, through
    /// tracing-opentelemetry (feature `opentelemetry`): empty when the span
    /// has no valid OpenTelemetry context (no OpenTelemetry layer, or no
    /// span).
    #[cfg(feature = "opentelemetry")]
    pub fn from_current_span() -> TraceContext {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = tracing::Span::current().context();
        let span = context.span();
        let span = span.span_context();
        if !span.is_valid() {
            return TraceContext::default();
        }
        let state = span.trace_state().header();
        TraceContext {
            traceparent: Some(format!("00-{}-{}-{:02x}", span.trace_id(), span.span_id(), span.trace_flags().to_u8())),
            tracestate: (!state.is_empty()).then_some(state),
        }
    }
}

/// Adds the provider's context to `params` (an object), under the core's
/// names ([`TRACE_CONTEXT_MEMBERS`](copilot_core::TRACE_CONTEXT_MEMBERS)).
pub(crate) fn with_trace_context(provider: Option<&TraceContextProvider>, mut params: Value) -> Value {
    let (Some(provider), Value::Object(members)) = (provider, &mut params) else { return params };
    let context = provider();
    for (name, value) in copilot_core::TRACE_CONTEXT_MEMBERS.iter().zip([context.traceparent, context.tracestate]) {
        if let Some(value) = value {
            members.insert((*name).to_owned(), value.into());
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_telemetry_option_sets_the_cores_variable() {
        let all = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:4318".into()),
            otlp_protocol: Some("http/json".into()),
            file_path: Some("/tmp/spans.jsonl".into()),
            exporter_type: Some("file".into()),
            source_name: Some("app".into()),
            capture_content: Some(false),
        };
        let env = all.env();
        assert_eq!(env[0], ("COPILOT_OTEL_ENABLED".into(), "true".into()));
        let names: Vec<&str> = env[1..].iter().map(|(k, _)| k.to_str().unwrap()).collect();
        let core: Vec<&str> = copilot_core::TELEMETRY_ENV.iter().map(|(_, v)| *v).collect();
        assert_eq!(names, core);
        assert_eq!(env.last().unwrap().1, "false");
        assert_eq!(TelemetryConfig::new().env().len(), 1, "only the switch");
    }

    #[test]
    fn the_endpoint_stays_out_of_debug_output() {
        let config = TelemetryConfig::otlp("https://collector.example/v1?api-key=s3cret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret") && shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn the_trace_context_goes_in_the_params_and_only_what_is_given() {
        let provider: TraceContextProvider =
            Arc::new(|| TraceContext { traceparent: Some("00-a-b-01".into()), tracestate: None });
        let params = with_trace_context(Some(&provider), json!({"sessionId": "s", "prompt": "p"}));
        assert_eq!(params, json!({"traceparent": "00-a-b-01", "sessionId": "s", "prompt": "p"}));
        let none: TraceContextProvider = Arc::new(TraceContext::default);
        assert_eq!(with_trace_context(Some(&none), json!({"a": 1})), json!({"a": 1}));
        assert_eq!(with_trace_context(None, json!({"a": 1})), json!({"a": 1}));
    }
}
