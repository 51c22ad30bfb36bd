//! The client's calls, written once as futures: the async API awaits them
//! and the blocking API waits on them ([`block_on`](crate::wait::block_on)).
//! The handshake, the open sequence (reserve, `session.create`/`resume`,
//! the core's follow-ups) and every other call of a client exist here only;
//! a session's are [`SessionOps`](super::session::SessionOps).

use std::sync::Arc;
use std::time::{Duration, Instant};

use copilot_core::{read_handshake_answer, HandshakeError, HandshakeRequest, HandshakeStep};
use copilot_core::{ClientMode, HANDSHAKE_CONNECT, HANDSHAKE_PING, OPTIONS_UPDATE_METHOD};
use serde::Serialize;
use serde_json::{json, Value};

use super::client_options::PROTOCOL_VERSION;
use super::config::SessionConfig;
use super::replies::{parse, raw_json, read_delete, read_last_id, read_session_list};
use super::replies::{AuthStatus, Pong, ServerInfo, SessionMetadata, Status};
use super::session::Session;
use super::telemetry::{with_trace_context, TraceContextProvider};
use crate::delivery::SessionInner;
use crate::driver::{Connection, Reopen, Waiter};
use crate::error::{Error, Result};

/// The core's handshake ([`copilot_core::read_handshake_answer`]):
/// Registers the client as the CLI's inference provider (the core's
/// `INFERENCE_SET_PROVIDER`); an answer without `success: true` fails.
pub(super) async fn set_inference_provider(conn: &Arc<Connection>, timeout: Duration) -> Result<()> {
    let method = copilot_core::INFERENCE_SET_PROVIDER;
    let body = conn.request(method, &json!({}), Instant::now() + timeout)?.await?;
    let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
    if answer.get("success") != Some(&Value::Bool(true)) {
        return Err(Error::Protocol(format!("{method} was not accepted: {answer}")));
    }
    Ok(())
}

/// `connect` with the params the core writes, `ping` for servers that lack
/// it, and the protocol version checked.
pub(super) async fn handshake(conn: &Arc<Connection>, token: Option<&str>, timeout: Duration) -> Result<ServerInfo> {
    let mut params = Vec::new();
    copilot_core::write_connect_params(token, &mut |b| params.extend_from_slice(b));
    let params = raw_json(params)?;
    let deadline = Instant::now() + timeout;
    let mut to = HandshakeRequest::Connect;
    let mut answer = conn.request(HANDSHAKE_CONNECT, &params, deadline)?.await;
    let body = loop {
        match answer {
            Ok(body) => break body,
            Err(e) => {
                let Error::Rpc { code, .. } = &e else { return Err(e) };
                match read_handshake_answer(to, Err(*code)) {
                    HandshakeStep::Ping => {
                        to = HandshakeRequest::Ping;
                        answer = conn.request(HANDSHAKE_PING, &json!({}), Instant::now() + timeout)?.await;
                    }
                    // The answer's own error, as it came (-32002: a wrong
                    // connection token).
                    _ => return Err(e),
                }
            }
        }
    };
    match read_handshake_answer(to, Ok(&body)) {
        HandshakeStep::Ready { version } => {
            Ok(ServerInfo { protocol_version: PROTOCOL_VERSION, version: version.map(|v| v.to_string()) })
        }
        HandshakeStep::Failed(HandshakeError::Version { server }) => {
            Err(Error::ProtocolVersion { server, supported: PROTOCOL_VERSION })
        }
        step => Err(Error::Protocol(format!("the handshake's answer: {step:?}"))),
    }
}

/// A client's calls, with a timeout of their own or the connection's.
pub(crate) struct ClientOps<'a> {
    pub(crate) conn: &'a Arc<Connection>,
    pub(crate) timeout: Option<Duration>,
    /// The caller's trace context, for opens (and the sessions' sends).
    pub(crate) trace: Option<&'a TraceContextProvider>,
    /// How sessions default what the application leaves unset.
    pub(crate) mode: ClientMode,
}

impl ClientOps<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.conn.deadlines.request)
    }

    async fn body<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Vec<u8>> {
        self.conn.request(method, params, self.deadline())?.await
    }

    pub(crate) async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        parse(&self.body("ping", &json!({ "message": message })).await?, "ping")
    }

    pub(crate) async fn status(&self) -> Result<Status> {
        parse(&self.body("status.get", &json!({})).await?, "status.get")
    }

    pub(crate) async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        parse(&self.body(method, params).await?, method)
    }

    pub(crate) async fn auth_status(&self) -> Result<AuthStatus> {
        parse(&self.body("auth.getStatus", &json!({})).await?, "auth.getStatus")
    }

    pub(crate) async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        read_session_list(&self.body("session.list", &json!({})).await?)
    }

    pub(crate) async fn delete_session(&self, session_id: &str) -> Result<()> {
        read_delete(&self.body("session.delete", &json!({ "sessionId": session_id })).await?, session_id)
    }

    pub(crate) async fn last_session_id(&self) -> Result<Option<String>> {
        read_last_id(&self.body("session.getLastId", &json!({})).await?)
    }

    /// Opens a session (`session.create`, or `session.resume` of `resume`):
    /// its slot is reserved before the request is sent, so events that race
    /// the answer are delivered; then the core's steps after an open.
    pub(crate) async fn open(&self, config: SessionConfig, resume: Option<String>) -> Result<Session> {
        let method = if resume.is_some() { "session.resume" } else { "session.create" };
        config.check(resume.is_some())?;
        config.check_tools(self.mode)?;
        let conn = self.conn;
        let resuming = resume.is_some();
        let id = match (resume, config.server_assigned_id) {
            (Some(id), _) => Some(id),
            (None, true) => None,
            (None, false) => Some(config.session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string())),
        };
        let params = with_trace_context(self.trace, config.to_params(id.as_deref(), resuming, self.mode)?);
        let inner = SessionInner::new(id.as_deref(), config.answerer(), conn);
        let handle = conn.reserve(id.as_deref(), resuming, inner.clone())?;
        let target = inner.clone();
        // The reader completes the open in the engine and releases the slot
        // on any failure; dropping the call (or its timeout) releases it too.
        let call = conn.request_with(method, &params, |reply| Waiter::Open { handle, target, reply }, self.deadline());
        let body = match call {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                inner.close("the session could not be opened");
                return Err(e);
            }
        };
        let result: Value = parse(&body, method)?;
        let id = inner.name().unwrap_or_default();
        let mut session = Session::new(inner, Arc::clone(conn), handle, id, &result);
        session.trace = self.trace.cloned();
        // The core's steps after an open (registerInterest for the waits
        // the CLI asks only of clients that say they answer them).
        let follow_ups = config.follow_ups(session.id())?;
        for (method, params) in &follow_ups {
            self.body(method, params).await?;
        }
        // The options the CLI takes only once the session is open (the
        // mode's defaults among them). A session left with the CLI's
        // defaults is closed, and the open fails with the patch's error.
        let mut follow_ups = follow_ups;
        if let Some(params) = config.options_update(session.id(), self.mode)? {
            if let Err(e) = self.body(OPTIONS_UPDATE_METHOD, &params).await {
                let _ = session.ops(None).destroy_within(self.conn.deadlines.grace).await;
                return Err(e);
            }
            // Sent again after a recovery's resume, with the others.
            let raw = serde_json::value::to_raw_value(&params)
                .map_err(|e| Error::Protocol(format!("cannot serialize params: {e}")))?;
            follow_ups.push((OPTIONS_UPDATE_METHOD, raw));
        }
        // How to open it again should the connection be recovered.
        let params = with_trace_context(self.trace, config.to_params(Some(session.id()), true, self.mode)?);
        conn.remember_reopen(handle, Reopen { params, follow_ups });
        Ok(session)
    }
}
