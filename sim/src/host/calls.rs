//! The calls the host makes on its own: creates (under an id of its own
//! or one the server assigns), joins of another client's session (a
//! resume, also of a session open here: a takeover), destroys and
//! prompts, each reserving or closing in the engine as a host must.

use copilot_core::HandlerKind;

use super::{Host, RecState, SessionRec, Waiter};

impl Host {
    /// Opens a session: a create under an id of the client's, or one the
    /// server assigns. A line for the trace.
    pub fn create(&mut self, now: u64) -> Option<String> {
        if !self.ready() {
            return None;
        }
        let key = self.next_key;
        let assigned = self.rng.chance(self.profile.server_assigned_percent);
        let (handle, id) = if assigned {
            (self.engine.reserve_unassigned(key).ok()?, None)
        } else {
            self.created += 1;
            let id = format!("s-{}", self.created);
            (self.engine.reserve(&id, key).ok()?, Some(id))
        };
        let params = match &id {
            Some(id) => format!(r#"{{"sessionId":"{id}",{}}}"#, self.open_flags()),
            None => format!("{{{}}}", self.open_flags()),
        };
        if !self.call(now, Waiter::Open { key, handle }, "session.create", &params) {
            self.engine.release(handle);
            self.drain_parked(now);
            return None;
        }
        self.next_key += 1;
        self.sessions.insert(key, SessionRec::new(handle, id.clone(), now));
        Some(format!("host: create {} (key {key})", id.as_deref().unwrap_or("<server-assigned>")))
    }

    /// Joins session `id` (a resume: the engine then asks what is
    /// pending): another client's, or one open here, which the new handle
    /// takes over (the engine moves its open obligations to it).
    pub fn join(&mut self, now: u64, id: &str) -> Option<String> {
        let here = self.sessions.iter().find(|(_, s)| s.state != RecState::Released && s.cli_id.as_deref() == Some(id));
        let old_key = match here {
            None => None,
            Some((key, rec)) if rec.state == RecState::Open => Some(*key),
            Some(_) => return None,
        };
        // A takeover cannot be undone: make sure the resume can be sent.
        if !self.ready() || self.engine.router().pending().len() >= super::PENDING {
            return None;
        }
        let key = self.next_key;
        let (handle, old) = self.engine.reserve_resume(id, key).ok()?;
        match (old, old_key) {
            (None, None) => {}
            (Some((_, old_target)), Some(old_key)) if old_target == old_key => {
                let rec = self.sessions.get_mut(&old_key).expect("found above");
                (rec.state, rec.released_at) = (RecState::Released, Some(now));
                for ob in &mut self.obligations {
                    if ob.session == Some(old_key) {
                        ob.session = Some(key);
                    }
                }
            }
            (old, _) => {
                self.failures
                    .push(format!("reserve_resume({id}) gave back {old:?}; the host had key {old_key:?} open"));
            }
        }
        let params = format!(r#"{{"sessionId":"{id}",{}}}"#, self.open_flags());
        if !self.call(now, Waiter::Open { key, handle }, "session.resume", &params) {
            self.failures.push("the pending table had room, then none".into());
            return None;
        }
        self.next_key += 1;
        self.sessions.insert(key, SessionRec::new(handle, Some(id.to_owned()), now));
        let what = if old_key.is_some() { "takes over" } else { "joins" };
        Some(format!("host: {what} {id} (key {key})"))
    }

    /// The ids of the sessions open here.
    pub fn open_ids(&self) -> Vec<String> {
        self.sessions.values().filter(|s| s.state == RecState::Open).filter_map(|s| s.cli_id.clone()).collect()
    }

    /// What a create or resume announces: permission prompts, and
    /// elicitations when the host has a handler for them.
    pub(super) fn open_flags(&self) -> String {
        let elicits = self.profile.handlers.contains(&HandlerKind::Elicitation);
        format!(r#""requestPermission":true,"requestElicitation":{elicits}"#)
    }

    /// An open session, chosen at random.
    fn pick_open(&mut self) -> Option<u32> {
        let open: Vec<u32> = self.sessions.iter().filter(|(_, s)| s.state == RecState::Open).map(|(k, _)| *k).collect();
        (!open.is_empty()).then(|| open[self.rng.index(open.len())])
    }

    /// Destroys an open session.
    pub fn destroy(&mut self, now: u64) -> Option<String> {
        if !self.ready() {
            return None;
        }
        let key = self.pick_open()?;
        let rec = &self.sessions[&key];
        let (handle, id) = (rec.handle, rec.cli_id.clone().unwrap_or_default());
        let params = format!(r#"{{"sessionId":"{id}"}}"#);
        if !self.call(now, Waiter::Destroy { key, handle }, "session.destroy", &params) {
            return None;
        }
        if self.engine.close(handle).is_err() {
            self.failures.push(format!("close() of open session {id} found a stale handle"));
        }
        self.sessions.get_mut(&key).expect("picked").state = RecState::Closing;
        Some(format!("host: destroy {id}"))
    }

    /// Sends a prompt to an open session.
    pub fn send(&mut self, now: u64) -> Option<String> {
        if !self.ready() {
            return None;
        }
        let key = self.pick_open()?;
        let id = self.sessions[&key].cli_id.clone().unwrap_or_default();
        let params = format!(r#"{{"sessionId":"{id}","prompt":"hi"}}"#);
        self.call(now, Waiter::Send { key }, "session.send", &params).then(|| format!("host: send to {id}"))
    }
}
