//! `policy.json`'s `recovery`: the core's backoff and resume flag, and how
//! the events of a gap are read back from a session's log, as the JS
//! client's recovery reads them.

use serde_json::{json, Value};

#[test]
fn the_recovery_is_the_cores() {
    let policy: Value = serde_json::from_str(include_str!("../../policy.json")).expect("the policy is JSON");
    assert_eq!(
        policy["recovery"],
        json!({
            "backoffMs": copilot_core::RECOVERY_BACKOFF_MS,
            "resumeFlag": copilot_core::RECOVERY_RESUME_FLAG,
            "eventLog": {
                "method": copilot_core::EVENT_LOG_READ,
                "page": copilot_core::EVENT_LOG_PAGE,
                "maxPages": copilot_core::EVENT_LOG_MAX_PAGES,
            },
        })
    );
}
