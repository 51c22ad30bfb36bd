//! Reconciliation: the engine asks the CLI which waits are pending, and
//! takes on each one it has not answered as an ordinary wait.
//!
//! The CLI keeps two lists ([`PENDING_LISTS`]): the client tool calls
//! waiting for `session.tools.handlePendingToolCall`, and the permission
//! prompts waiting for `session.permissions.handlePendingPermissionRequest`.
//! After a resume it does not send their `*.requested` events again, and a
//! forwarder may drop an event: the lists are what says a wait is pending.
//!
//! When: the engine sends both list requests itself once a resume's open
//! completes ([`Engine::reserve_resume`], [`Engine::complete_open`]), and
//! whenever the host asks ([`Engine::reconcile`], after a reconnect). The
//! requests go with ids of the engine's own ([`LIST_ID_PREFIX`]), queued in
//! the transmit store with the rest; their replies come back through
//! [`Engine::poll`] as an [`Output::listed`](super::Output::listed), which
//! the host hands to [`Engine::open_listed`]. Each listed wait the engine
//! does not know (not open, not among the waits discharged last) becomes an
//! obligation of the same row as its event, handed to the host as a
//! [`ListedWait`] with the data its handler reads, and is answered,
//! refused or timed out like any other. An event for a wait the engine
//! knows (taken on from a list, or answered) is delivered but not taken on
//! again.

use heapless::Vec;

use super::{Cause, Engine, Obligation};
use crate::answers::row_for_event;
use crate::frame::FrameBuffer;
use crate::json::{Kind, Value};
use crate::obligations::MAX_KEPT_SESSION_ID;
use crate::session::{SessionHandle, SessionState, StaleHandle, MAX_SESSION_ID_LEN};
use crate::transmit::Transmit;

/// The event that starts a turn: from it until `session.idle`, a session
/// silent for [`EngineConfig::stall_interval`](super::EngineConfig) is
/// reconciled.
pub const TURN_START_EVENT: &str = "assistant.turn_start";

/// The prefix of the ids of the list requests the engine sends.
pub const LIST_ID_PREFIX: &str = "pending-";

/// How a listed item becomes the data of its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedShape {
    /// `{requestId, toolCallId, toolName, arguments, ...}`: the event's
    /// data less its `sessionId`, which the engine adds.
    Tool,
    /// `{requestId, request}`, `request` being the event's
    /// `promptRequest`: the engine writes it as `promptRequest`, and as
    /// `permissionRequest` with its kind renamed
    /// ([`PROMPT_KIND_RENAMES`]).
    Permission,
}

/// One list of pending waits the CLI keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingList {
    /// The request, with params `{sessionId}`; its result is `{items:[..]}`.
    pub method: &'static str,
    /// The event whose waits it lists (its row in [`ANSWERS`](crate::ANSWERS)).
    pub event_type: &'static str,
    /// How an item becomes that event's data.
    pub shape: ListedShape,
}

/// Every list the engine reads, in the order it asks.
pub static PENDING_LISTS: &[PendingList] = &[
    PendingList {
        method: "session.tools.listPendingRequests",
        event_type: "external_tool.requested",
        shape: ListedShape::Tool,
    },
    PendingList {
        method: "session.permissions.pendingRequests",
        event_type: "permission.requested",
        shape: ListedShape::Permission,
    },
];

/// The prompt kinds (`promptRequest.kind`) whose permission kind
/// (`permissionRequest.kind`) has another name; every other kind has the
/// same name in both (CLI 1.0.102's schema; `path` has no permission kind
/// and stays as it is).
pub static PROMPT_KIND_RENAMES: &[(&str, &str)] = &[("commands", "shell")];

/// The reply to a list request, routed: hand it to [`Engine::open_listed`].
#[derive(Debug)]
pub struct Listed<'a, T> {
    /// The session the list is of.
    pub session: SessionHandle,
    /// Its target.
    pub target: T,
    /// Which list.
    pub list: &'static PendingList,
    /// The reply's `items` (an array).
    pub items: Value<'a>,
}

/// A listed wait the engine took on: call the handler of
/// `obligation.handler` with [`write_event`](Self::write_event)'s event, as
/// for the wait's event (it is not an event of the session's stream: it
/// has no `id`), then answer the obligation as any other.
#[derive(Debug)]
pub struct ListedWait<'a, T> {
    /// Give it back to answer.
    pub obligation: Obligation,
    /// The session's target.
    pub target: T,
    /// The awaited event's type.
    pub event_type: &'static str,
    shape: ListedShape,
    /// The session id as written in the answer.
    session_id: Vec<u8, MAX_KEPT_SESSION_ID>,
    item: Value<'a>,
}

impl<T> ListedWait<'_, T> {
    /// The session's id as the answer writes it (JSON-escaped, no quotes).
    pub fn session_id(&self) -> &[u8] {
        &self.session_id
    }

    /// Writes the wait as its event would have been, `{"type", "data"}`,
    /// with the data the list gives (see [`ListedShape`]).
    pub fn write_event(&self, out: &mut impl FnMut(&[u8])) {
        out(b"{\"type\":\"");
        out(self.event_type.as_bytes());
        out(b"\",\"data\":{");
        match self.shape {
            ListedShape::Tool => {
                out(b"\"sessionId\":\"");
                out(&self.session_id);
                out(b"\"");
                members_but(self.item, &["sessionId"], out);
            }
            ListedShape::Permission => {
                let rid = self.item.get("requestId").map_or(&b"null"[..], |v| v.as_bytes());
                out(b"\"requestId\":");
                out(rid);
                if let Some(request) = self.item.get("request") {
                    out(b",\"permissionRequest\":");
                    write_renamed(request, out);
                    out(b",\"promptRequest\":");
                    out(request.as_bytes());
                }
                members_but(self.item, &["requestId", "request"], out);
            }
        }
        out(b"}}");
    }
}

/// Writes `,"key":value` for each member of `object` not named in `skip`.
fn members_but(object: Value<'_>, skip: &[&str], out: &mut impl FnMut(&[u8])) {
    for (key, value) in object.members() {
        if skip.iter().any(|s| key == *s) {
            continue;
        }
        out(b",\"");
        out(key.as_bytes());
        out(b"\":");
        out(value.as_bytes());
    }
}

/// Writes a prompt request as its permission request: its kind renamed
/// per [`PROMPT_KIND_RENAMES`], every other member as it is.
fn write_renamed(request: Value<'_>, out: &mut impl FnMut(&[u8])) {
    if request.kind() != Kind::Object {
        out(request.as_bytes());
        return;
    }
    out(b"{");
    for (i, (key, value)) in request.members().enumerate() {
        out(if i == 0 { b"\"" } else { b",\"" });
        out(key.as_bytes());
        out(b"\":");
        let renamed = (key == "kind")
            .then(|| value.as_str())
            .flatten()
            .and_then(|k| PROMPT_KIND_RENAMES.iter().find(|(from, _)| k == *from));
        match renamed {
            Some((_, to)) => {
                out(b"\"");
                out(to.as_bytes());
                out(b"\"");
            }
            None => out(value.as_bytes()),
        }
    }
    out(b"}");
}

/// `(list, slot index, generation)` from the id of a list request
/// (`pending-<list>-<index>-<generation>`, the raw text of a JSON string).
pub(super) fn read_list_id(raw: &str) -> Option<(usize, usize, u32)> {
    // By hand rather than `str::parse`: the WebAssembly module is
    // downloaded by every page, and number parsing is kilobytes there.
    let rest = raw.as_bytes().strip_prefix(LIST_ID_PREFIX.as_bytes())?;
    let (mut numbers, mut at, mut digits) = ([0u32; 3], 0, 0);
    for &b in rest {
        match b {
            b'0'..=b'9' => {
                numbers[at] = numbers[at].checked_mul(10)?.checked_add(u32::from(b - b'0'))?;
                digits += 1;
            }
            b'-' if digits > 0 && at + 1 < numbers.len() => (at, digits) = (at + 1, 0),
            _ => return None,
        }
    }
    (at + 1 == numbers.len() && digits > 0).then_some((numbers[0] as usize, numbers[1] as usize, numbers[2]))
}

/// `id` escaped as the inside of a JSON string, as answers write it.
fn escaped(id: &str) -> Option<Vec<u8, MAX_KEPT_SESSION_ID>> {
    let mut buf = [0; 6 * MAX_SESSION_ID_LEN + 2];
    let mut at = 0;
    crate::json::write_escaped(&mut buf, &mut at, id)?;
    Vec::from_slice(&buf[1..at - 1]).ok()
}

impl<
        T: Clone,
        W,
        P: FrameBuffer,
        X: FrameBuffer,
        const SESSIONS: usize,
        const PENDING: usize,
        const OBLIGATIONS: usize,
    > Engine<T, W, P, X, SESSIONS, PENDING, OBLIGATIONS>
{
    /// Asks the CLI now which waits of session `handle` are pending (every
    /// list of [`PENDING_LISTS`], queued to send); their replies come back
    /// through [`poll`](Self::poll) as [`Output::listed`](super::Output::listed).
    /// For a session whose open is still in flight, the lists are asked
    /// once it completes. Call after anything that may have lost a wait: a
    /// reconnect, a restart. (A resume asks by itself.)
    pub fn reconcile(&mut self, handle: SessionHandle) -> Result<(), StaleHandle> {
        let sessions = self.core.router.sessions();
        match sessions.state(handle).ok_or(StaleHandle)? {
            SessionState::Reserved | SessionState::AwaitingId => {
                self.core.reconcile_on_open[handle.index()] = true;
                return Ok(());
            }
            SessionState::Active | SessionState::Closing => {}
        }
        let name = sessions.name(handle).ok_or(StaleHandle)?;
        let Some(session_id) = escaped(&name) else { return Ok(()) };
        let mut digits = [[0; 20]; 3];
        for (list, pending) in PENDING_LISTS.iter().enumerate() {
            let [a, b, c] = &mut digits;
            let sent = self.core.tx.emit(&[
                b"{\"jsonrpc\":\"2.0\",\"id\":\"",
                LIST_ID_PREFIX.as_bytes(),
                crate::text::itoa(list as u64, a),
                b"-",
                crate::text::itoa(handle.index() as u64, b),
                b"-",
                crate::text::itoa(u64::from(handle.generation()), c),
                b"\",\"method\":\"",
                pending.method.as_bytes(),
                b"\",\"params\":{\"sessionId\":\"",
                &session_id,
                b"\"}}",
            ]);
            // A fixed store with no room: counted; the host asks again later.
            if Transmit::<X>::full(sent) {
                self.core.stats.unsent += 1;
            } else {
                self.core.stats.lists_sent += 1;
            }
        }
        Ok(())
    }

    /// Reconciles each session whose running turn has been silent for the
    /// stall interval at `now`, and finds the next stall due.
    pub(super) fn reconcile_stalled(&mut self, now: u64) {
        let interval = self.core.config.stall_interval.unwrap_or(u64::MAX);
        let mut next = super::NEVER;
        for index in 0..self.core.stall_due.len() {
            let (due, generation, wait) = self.core.stall_due[index];
            if due == 0 {
                continue;
            }
            let mut due = due;
            if due <= now {
                let asked = SessionHandle::from_parts(index, generation).map(|h| self.reconcile(h));
                if !matches!(asked, Some(Ok(()))) {
                    // The session is gone.
                    self.core.stall_due[index] = (0, 0, 0);
                    continue;
                }
                self.core.stats.stalls += 1;
                // Each ask waits twice the previous one, up to the cap.
                let cap = interval.max(crate::limits::MAX_STALL_INTERVAL_MS);
                let wait = u64::from(wait).saturating_mul(2).clamp(interval, cap);
                due = now.saturating_add(wait).max(1);
                self.core.stall_due[index] = (due, generation, u32::try_from(wait).unwrap_or(u32::MAX));
            }
            next = next.min(due);
        }
        self.core.next_stall = next;
    }

    /// Takes on each wait of a list reply ([`Output::listed`](super::Output::listed))
    /// that the engine does not know, handing it to `found`; returns how
    /// many. A wait open or among those discharged last is skipped
    /// ([`EngineStats::duplicate_waits`](super::EngineStats::duplicate_waits));
    /// one that cannot be taken on (no usable `requestId`, table full) is
    /// refused as its event would be. Nothing is taken on for a session
    /// released since the list was asked.
    pub fn open_listed(&mut self, listed: &Listed<'_, T>, now: u64, mut found: impl FnMut(ListedWait<'_, T>)) -> usize {
        let Some(name) = self.core.router.sessions().name(listed.session) else { return 0 };
        let Some(session_id) = escaped(&name) else { return 0 };
        let Some((row_index, _)) =
            row_for_event(crate::json::JsonStr::from_validated(listed.list.event_type.as_bytes()))
        else {
            return 0;
        };
        let mut taken = 0;
        for item in listed.items.elements() {
            let Some(rid) = item.get("requestId").and_then(|v| v.as_str()) else {
                self.core.stats.unanswerable += 1;
                continue;
            };
            let rid = [&b"\""[..], rid.as_bytes(), b"\""];
            if self.core.obligations.knows(row_index, &session_id, rid) {
                self.core.stats.duplicate_waits += 1;
                continue;
            }
            let opened = if item.kind() == Kind::Object {
                self.core.open(row_index, Some(listed.session), &session_id, rid, now)
            } else {
                Err(Cause::Unreadable)
            };
            match opened {
                Ok(obligation) => {
                    taken += 1;
                    self.core.stats.listed += 1;
                    found(ListedWait {
                        obligation,
                        target: listed.target.clone(),
                        event_type: listed.list.event_type,
                        shape: listed.list.shape,
                        session_id: session_id.clone(),
                        item,
                    });
                }
                Err(cause) => self.core.refuse_at_once(row_index, &session_id, rid, cause),
            }
        }
        taken
    }
}

impl<T: Clone, W, X: FrameBuffer, const SESSIONS: usize, const PENDING: usize, const OBLIGATIONS: usize>
    super::Core<T, W, X, SESSIONS, PENDING, OBLIGATIONS>
{
    /// An event of session `handle` arrived at `now`: a turn starts
    /// (`assistant.turn_start`), goes on, or ends (`session.idle`), and
    /// its stall is due an interval after this event.
    pub(super) fn note_activity(&mut self, handle: SessionHandle, event_type: crate::json::JsonStr<'_>, now: u64) {
        let Some(interval) = self.config.stall_interval else { return };
        let Some(slot) = self.stall_due.get_mut(handle.index()) else { return };
        if event_type == crate::turn::TURN_END_EVENT {
            *slot = (0, 0, 0);
            return;
        }
        let running = slot.0 != 0 && slot.1 == handle.generation();
        if running || event_type == TURN_START_EVENT {
            // An event of the turn starts the schedule again.
            let due = now.saturating_add(interval).max(1);
            *slot = (due, handle.generation(), u32::try_from(interval).unwrap_or(u32::MAX));
            self.next_stall = self.next_stall.min(due);
        }
    }

    /// The reply to a list request of the engine's (`id`: the raw text of
    /// its string id), as a [`Listed`] for the host; `None`, counted in
    /// [`EngineStats::lists_failed`](super::EngineStats::lists_failed),
    /// when the list failed or is unreadable or its session is gone.
    pub(super) fn listed<'a>(
        &mut self,
        id: &str,
        result: &Result<Value<'a>, crate::envelope::RpcError<'a>>,
    ) -> Option<Listed<'a, T>> {
        let found = read_list_id(id).and_then(|(list, index, generation)| {
            let session = SessionHandle::from_parts(index, generation)?;
            let target = self.router.sessions().get(session)?;
            let items = result.as_ref().ok()?.get("items").filter(|v| v.kind() == Kind::Array)?;
            Some(Listed { session, target, list: PENDING_LISTS.get(list)?, items })
        });
        if found.is_none() {
            self.stats.lists_failed += 1;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    fn event_of(shape: ListedShape, item: &str) -> std::string::String {
        let list = PENDING_LISTS.iter().find(|l| l.shape == shape).unwrap();
        let wait = ListedWait {
            obligation: Obligation {
                id: crate::ObligationId::from_bits(0),
                handler: crate::HandlerKind::Tool,
                deadline: None,
            },
            target: (),
            event_type: list.event_type,
            shape,
            session_id: Vec::from_slice(b"s-1").unwrap(),
            item: Value::parse(item.as_bytes()).unwrap(),
        };
        let mut out = std::vec::Vec::new();
        wait.write_event(&mut |b: &[u8]| out.extend_from_slice(b));
        std::string::String::from_utf8(out).unwrap()
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_listed_tool_call_reads_as_its_event() {
        let item = r#"{"requestId":"r1","toolCallId":"call_1","toolName":"get_weather","arguments":{"city":"Paris"}}"#;
        assert_eq!(
            event_of(ListedShape::Tool, item),
            r#"{"type":"external_tool.requested","data":{"sessionId":"s-1","requestId":"r1","toolCallId":"call_1","toolName":"get_weather","arguments":{"city":"Paris"}}}"#
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_listed_prompt_reads_as_its_event_with_the_permission_kind() {
        let item = r#"{"requestId":"p1","request":{"kind":"commands","fullCommandText":"ls","toolCallId":"t"}}"#;
        assert_eq!(
            event_of(ListedShape::Permission, item),
            concat!(
                r#"{"type":"permission.requested","data":{"requestId":"p1","#,
                r#""permissionRequest":{"kind":"shell","fullCommandText":"ls","toolCallId":"t"},"#,
                r#""promptRequest":{"kind":"commands","fullCommandText":"ls","toolCallId":"t"}}}"#
            )
        );
        let item = r#"{"requestId":"p2","request":{"toolName":"x","kind":"custom-tool"},"extra":1}"#;
        assert_eq!(
            event_of(ListedShape::Permission, item),
            concat!(
                r#"{"type":"permission.requested","data":{"requestId":"p2","#,
                r#""permissionRequest":{"toolName":"x","kind":"custom-tool"},"#,
                r#""promptRequest":{"toolName":"x","kind":"custom-tool"},"extra":1}}"#
            )
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn list_ids_read_back() {
        assert_eq!(read_list_id("pending-1-12-3"), Some((1, 12, 3)));
        assert_eq!(read_list_id("pending-1-12-3-4"), None);
        assert_eq!(read_list_id("pending-1-12-"), None);
        assert_eq!(read_list_id("answer-1"), None);
        assert_eq!(read_list_id("pending-x"), None);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn every_list_names_a_row() {
        for list in PENDING_LISTS {
            assert!(
                row_for_event(crate::json::JsonStr::from_validated(list.event_type.as_bytes())).is_some(),
                "{}",
                list.event_type
            );
        }
    }
}
