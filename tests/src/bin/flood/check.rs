//! The delivery check every style runs on the events it takes: event `i`
//! (id `"i"`) arrives once, in order, intact, and `session.idle` ends the
//! flood.

use copilot_host::events::EventKind;
use copilot_host::SessionEvent;

/// Checks that delta `i` (id and content `"i"`) arrives once, in order.
pub struct DeliveryCheck {
    seen: Vec<bool>,
    /// The id the next delta should have.
    next: usize,
    /// Deltas taken, good or not.
    pub received: usize,
    /// Deltas that arrived after a later one.
    pub out_of_order: usize,
    /// Deltas that arrived more than once.
    pub duplicates: usize,
    /// Deltas whose id is not a number below N, or whose content differs
    /// from their id.
    pub corrupt: usize,
    /// Whether `session.idle` arrived.
    pub idle: bool,
}

impl DeliveryCheck {
    /// A check of a flood of `events` deltas.
    pub fn new(events: usize) -> DeliveryCheck {
        DeliveryCheck {
            seen: vec![false; events],
            next: 0,
            received: 0,
            out_of_order: 0,
            duplicates: 0,
            corrupt: 0,
            idle: false,
        }
    }

    /// Records one event; true when it is `session.idle`. Event `i` of
    /// the flood has the id `"i"`: a delta's content is `"i"`, a message's
    /// content and a tool result's start with `"i "` (see
    /// `copilot_tests::flood_mix`).
    pub fn see(&mut self, event: &SessionEvent) -> bool {
        let first_word = |text: &str| text.split(' ').next() == Some(event.id.as_str());
        let intact = match &event.kind {
            EventKind::SessionIdle(_) => {
                self.idle = true;
                return true;
            }
            EventKind::AssistantMessageDelta(delta) => delta.delta_content == event.id,
            EventKind::AssistantMessage(message) => first_word(&message.content),
            EventKind::ToolExecutionComplete(tool) => {
                tool.tool_call_id == event.id && tool.result.as_ref().is_some_and(|r| first_word(&r.content))
            }
            // session.start and the like.
            _ => return false,
        };
        self.received += 1;
        let index = match event.id.parse::<usize>() {
            Ok(i) if i < self.seen.len() && intact => i,
            _ => {
                self.corrupt += 1;
                return false;
            }
        };
        if std::mem::replace(&mut self.seen[index], true) {
            self.duplicates += 1;
        } else if index < self.next {
            // A later event came first. (A gap alone is counted as lost.)
            self.out_of_order += 1;
        }
        self.next = self.next.max(index + 1);
        false
    }

    /// Deltas that never arrived.
    pub fn lost(&self) -> usize {
        self.seen.iter().filter(|&&seen| !seen).count()
    }

    /// What the check found, to add up over several consumers.
    pub fn tally(&self) -> Tally {
        Tally {
            lost: self.lost(),
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            corrupt: self.corrupt,
            idle: self.idle,
        }
    }
}

/// The faults found by one or more [`DeliveryCheck`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Deltas that never arrived.
    pub lost: usize,
    /// Deltas that arrived after a later one.
    pub out_of_order: usize,
    /// Deltas that arrived more than once.
    pub duplicates: usize,
    /// Deltas with a bad id or content.
    pub corrupt: usize,
    /// Whether every consumer saw `session.idle`.
    pub idle: bool,
}

impl Tally {
    /// No consumer at all: nothing lost, idle (the unit of [`add`](Self::add)).
    pub const NONE: Tally = Tally { lost: 0, out_of_order: 0, duplicates: 0, corrupt: 0, idle: true };

    /// The faults of both (a mixed run's consumers each count).
    pub fn add(self, other: Tally) -> Tally {
        Tally {
            lost: self.lost + other.lost,
            out_of_order: self.out_of_order + other.out_of_order,
            duplicates: self.duplicates + other.duplicates,
            corrupt: self.corrupt + other.corrupt,
            idle: self.idle && other.idle,
        }
    }

    /// Every event once, in order, and the idle seen.
    pub fn passed(&self) -> bool {
        self.idle && self.lost == 0 && self.out_of_order == 0 && self.duplicates == 0 && self.corrupt == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn delta(id: &str, content: &str) -> Arc<SessionEvent> {
        let json = format!(
            r#"{{"type":"assistant.message_delta","id":"{id}","timestamp":"","data":{{"messageId":"m","deltaContent":"{content}"}}}}"#
        );
        Arc::new(SessionEvent::from_json(json.as_bytes()).expect("a valid delta"))
    }

    fn check(ids: &[&str]) -> DeliveryCheck {
        let mut check = DeliveryCheck::new(4);
        for id in ids {
            assert!(!check.see(&delta(id, id)));
        }
        check
    }

    #[test]
    fn every_delta_once_in_order_passes() {
        let c = check(&["0", "1", "2", "3"]);
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (0, 0, 0, 0));
    }

    #[test]
    fn a_swap_is_one_out_of_order() {
        let c = check(&["0", "2", "1", "3"]);
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (0, 1, 0, 0));
    }

    #[test]
    fn gaps_repeats_and_bad_content_are_found() {
        let mut c = check(&["0", "0", "3", "9", "x"]);
        assert!(!c.see(&delta("1", "not 1")));
        assert_eq!((c.lost(), c.out_of_order, c.duplicates, c.corrupt), (2, 0, 1, 3));
    }

    #[test]
    fn messages_and_tool_results_of_the_mix_are_checked() {
        use copilot_tests::flood_mix::MixWriter;
        let mut writer = MixWriter::new("s", "t");
        // Event i of the mixed flood as JSON, under the id `id`.
        let mut event = |i: usize, id: &str| {
            let mut frame = Vec::new();
            writer.frame(i, &mut frame);
            let at = frame.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let mut v: serde_json::Value = serde_json::from_slice(&frame[at..]).unwrap();
            v["params"]["event"]["id"] = id.into();
            SessionEvent::from_json(v["params"]["event"].to_string().as_bytes()).expect("a valid event")
        };
        let mut check = DeliveryCheck::new(1000);
        let (message, tool) = (event(12, "12"), event(999, "999"));
        assert!(matches!(message.kind, EventKind::AssistantMessage(_)));
        assert!(matches!(tool.kind, EventKind::ToolExecutionComplete(_)));
        assert!(!check.see(&message) && !check.see(&tool));
        assert_eq!((check.received, check.corrupt, check.lost()), (2, 0, 998));
        // The same events under another id: their content no longer matches.
        assert!(!check.see(&event(12, "13")) && !check.see(&event(999, "998")));
        assert_eq!(check.corrupt, 2);
    }

    #[test]
    fn idle_ends_the_run() {
        let idle = SessionEvent::from_json(br#"{"type":"session.idle","id":"e","data":{}}"#).expect("a valid event");
        assert!(DeliveryCheck::new(1).see(&Arc::new(idle)));
    }

    #[test]
    fn a_mixed_run_fails_when_any_consumer_does() {
        let good = check(&["0", "1", "2", "3"]);
        let mut short = check(&["0", "1"]);
        assert!(short.see(&Arc::new(
            SessionEvent::from_json(br#"{"type":"session.idle","id":"e","data":{}}"#).expect("a valid event")
        )));
        // The good one never saw the idle: not passed on its own either.
        assert!(!good.tally().passed());
        let total = Tally::NONE.add(short.tally()).add(good.tally());
        assert_eq!((total.lost, total.idle), (2, false));
        assert!(!total.passed());
        let mut done = check(&["0", "1", "2", "3"]);
        done.idle = true;
        assert!(Tally::NONE.add(done.tally()).passed());
    }
}
