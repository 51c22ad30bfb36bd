//! `session.lifecycle` notifications, read into [`LifecycleEvent`]s for a
//! receiver.

use crate::driver::LifecycleSink;
use crate::events::LifecycleEvent;

/// A receiver of the driver's `session.lifecycle` params that reads each
/// into a [`LifecycleEvent`] and hands it to `f` (which says `false` once
/// it is gone). Unreadable ones are logged and skipped.
pub(crate) fn lifecycle_sink(mut f: impl FnMut(&LifecycleEvent) -> bool + Send + 'static) -> LifecycleSink {
    Box::new(move |params| match LifecycleEvent::from_json(params) {
        Ok(event) => f(&event),
        Err(e) => {
            log::warn!("unreadable session.lifecycle: {e}");
            true
        }
    })
}
