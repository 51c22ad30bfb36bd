//! Events not lost across a recovery: a session's log read back a page at
//! a time ([`copilot_core::EVENT_LOG_READ`]), as the core's recovery asks
//! ([`copilot_core::RecoveryStep::ReadLog`]); the core then says which of
//! the events read the stream lost.

use std::sync::Arc;
use std::time::Instant;

use copilot_core::{EVENT_LOG_PAGE, EVENT_LOG_READ};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::connection::Connection;
use super::recover::Run;
use crate::error::{Error, Result};
use crate::wait::block_on;

impl Connection {
    /// Reads page `page` of the log of the session `run` resumes (backward,
    /// durable events only; from page 1 on, from the cursor of the page
    /// before) and puts its events before those read so far: whether the
    /// CLI has more further back.
    pub(super) fn read_log(self: &Arc<Self>, run: &mut Run, page: usize) -> Result<bool> {
        if page == 0 {
            run.log.clear();
            run.cursor = None;
        }
        let mut params = json!({
            "sessionId": run.session_id, "direction": "backward", "max": EVENT_LOG_PAGE, "includeEphemeral": false,
        });
        if let Some(c) = &run.cursor {
            params["cursor"] = c.clone().into();
        }
        let deadline = Instant::now() + self.deadlines.request;
        let body = block_on(self.request(EVENT_LOG_READ, &params, deadline)?)?;
        let mut read: Page = serde_json::from_slice(&body)
            .map_err(|e| Error::Protocol(format!("`{EVENT_LOG_READ}` answered unreadable JSON: {e}")))?;
        let more = read.has_more && !read.events.is_empty();
        read.events.append(&mut run.log);
        run.log = read.events;
        run.cursor = read.cursor;
        Ok(more)
    }
}

/// A page of the log, its events as the CLI wrote them.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    events: Vec<Box<RawValue>>,
    cursor: Option<String>,
    #[serde(rename = "hasMore", default)]
    has_more: bool,
}
