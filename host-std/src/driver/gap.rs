//! Events not lost across a recovery: the durable events the session's
//! log has after the last one delivered (the core's mark,
//! [`copilot_core::undelivered_from`]) are read back and delivered before
//! the live stream goes on.

use std::sync::Arc;
use std::time::Instant;

use copilot_core::{event_id_of, undelivered_from, EVENT_LOG_MAX_PAGES, EVENT_LOG_PAGE, EVENT_LOG_READ};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::connection::Connection;
use crate::error::{Error, Result};

impl Connection {
    /// The events of session `session_id`'s log after the durable event
    /// whose id hashes to `mark`, oldest first, read backward a page at a
    /// time until it is found. Empty, with a warning, when it is not within
    /// [`EVENT_LOG_MAX_PAGES`] (the gap is unknown: nothing is delivered
    /// twice).
    pub(super) async fn read_gap(
        self: &Arc<Self>,
        session_id: &str,
        mark: u64,
        deadline: Instant,
    ) -> Result<Vec<Vec<u8>>> {
        // Pages read so far, oldest first (a page is oldest first), as
        // the CLI wrote them.
        let mut events: Vec<Box<RawValue>> = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..EVENT_LOG_MAX_PAGES {
            let mut params = json!({
                "sessionId": session_id, "direction": "backward", "max": EVENT_LOG_PAGE, "includeEphemeral": false,
            });
            if let Some(c) = &cursor {
                params["cursor"] = c.clone().into();
            }
            let body = self.request(EVENT_LOG_READ, &params, deadline)?.await?;
            let mut page: Page = serde_json::from_slice(&body)
                .map_err(|e| Error::Protocol(format!("`{EVENT_LOG_READ}` answered unreadable JSON: {e}")))?;
            let more = page.has_more && !page.events.is_empty();
            page.events.append(&mut events);
            events = page.events;
            let ids = events.iter().map(|e| event_id_of(e.get().as_bytes()));
            if let Some(from) = undelivered_from(mark, ids) {
                return Ok(events[from..].iter().map(|e| e.get().as_bytes().to_vec()).collect());
            }
            if !more {
                break;
            }
            cursor = page.cursor;
        }
        log::warn!(
            "{}: session {session_id}: the last event delivered is not in the last {} of its log; events of the gap, if any, are not delivered",
            self.label,
            events.len()
        );
        Ok(Vec::new())
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
