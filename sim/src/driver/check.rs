//! The driver mode's invariant, after every step: every event routed to a
//! session while a subscriber was registered reaches that subscriber
//! exactly once, in wire order, and before any call whose answer followed
//! it on the wire returns (checked at the moment the call returns, by the
//! host); none reaches another session. At the end, every live subscriber
//! has every event it was owed.

use super::DriverWorld;
use crate::check::Violation;

/// The invariant a call returning early breaks.
pub const BEFORE_RETURN: &str =
    "a call returns only once the events before its answer reached every subscriber registered when they arrived";

/// The invariant the churn's loss breaks: a subscriber dropped the moment
/// `destroy()` returns misses an event read before the destroy's answer.
pub const LOST_TAIL: &str =
    "a subscription dropped right after destroy() returns has had every event read before the destroy's answer";

fn violation(invariant: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { invariant, detail })
}

/// Checks the invariant after a step.
pub fn step(w: &DriverWorld) -> Result<(), Violation> {
    if let Some((invariant, detail)) = w.host.failures.first() {
        return violation(invariant, detail.clone());
    }
    for (id, sub) in &w.host.subs {
        let session = &w.host.sessions[&sub.key].id;
        let mut last = 0;
        for n in &sub.owed {
            let Some((pos, sid)) = w.host.event_pos.get(n) else {
                return violation("an event routed was read from the wire", format!("event #{n}"));
            };
            if sid != session {
                return violation(
                    "no event reaches another session",
                    format!("event #{n} of session {sid} routed to subscriber {id} of session {session}"),
                );
            }
            if *pos <= last {
                return violation(
                    "events are routed in wire order",
                    format!("event #{n} (frame {pos}) routed to subscriber {id} after one of frame {last}"),
                );
            }
            last = *pos;
        }
        if sub.got.len() > sub.owed.len() || sub.got[..] != sub.owed[..sub.got.len()] {
            return violation(
                "each event reaches its subscriber once, in wire order",
                format!("subscriber {id} of session {session} got {:?}, was owed {:?}", sub.got, sub.owed),
            );
        }
    }
    Ok(())
}

/// Checks the end: every live subscriber got everything it was owed.
pub fn finish(w: &DriverWorld) -> Result<(), Violation> {
    step(w)?;
    for (id, sub) in &w.host.subs {
        if sub.live && sub.got.len() != sub.owed.len() {
            return violation(
                "every event routed to a subscriber reaches it by the end",
                format!("subscriber {id} got {:?}, was owed {:?}", sub.got, sub.owed),
            );
        }
    }
    Ok(())
}
