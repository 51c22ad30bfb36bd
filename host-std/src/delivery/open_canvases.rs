//! A session's open canvas instances, as the CLI last said: changed by the
//! reader in frame order (the core's [`copilot_core::CanvasChange`]s, read
//! from the open's answer and the `session.canvas.opened` / `closed`
//! events), before the event is delivered.

use copilot_core::{CanvasChange, JsonStr};
use serde_json::Value;

/// The instances open, oldest first, each with its `instanceId`.
#[derive(Default)]
pub(super) struct OpenCanvases {
    list: Vec<(String, Value)>,
}

impl OpenCanvases {
    /// Applies `change`; `first`: the first of an open's answer, which
    /// replaces what was kept.
    pub(super) fn change(&mut self, change: CanvasChange<'_>, first: bool) {
        if first {
            self.list.clear();
        }
        let decoded = |id: JsonStr<'_>| id.chars().collect::<String>();
        match change {
            CanvasChange::Opened { instance_id, instance } => {
                let (id, Ok(instance)) = (decoded(instance_id), serde_json::from_slice(instance.as_bytes())) else {
                    return;
                };
                match self.list.iter_mut().find(|(i, _)| *i == id) {
                    Some(slot) => slot.1 = instance,
                    None => self.list.push((id, instance)),
                }
            }
            CanvasChange::Closed { instance_id } => {
                let id = decoded(instance_id);
                self.list.retain(|(i, _)| *i != id);
            }
        }
    }

    /// A copy of the instances, oldest first.
    pub(super) fn list(&self) -> Vec<Value> {
        self.list.iter().map(|(_, v)| v.clone()).collect()
    }
}
