//! `policy.json`'s `recovery`: the names of the reports and steps of
//! `CoreEngine::recover` (the core's `Recovery`), in the order of their
//! numbers, and the core's backoff, resume flag, texts and log reads, as the JS
//! client's recovery uses them.

use serde_json::{json, Value};

#[test]
fn the_recovery_is_the_cores() {
    let policy: Value = serde_json::from_str(include_str!("../../policy.json")).expect("the policy is JSON");
    let reports = [
        (crate::RECOVER_LOST, "lost"),
        (crate::RECOVER_NEXT, "next"),
        (crate::RECOVER_CONNECTED, "connected"),
        (crate::RECOVER_FAILED, "failed"),
        (crate::RECOVER_RESUMED, "resumed"),
        (crate::RECOVER_REFUSED, "refused"),
        (crate::RECOVER_SKIPPED, "skipped"),
        (crate::RECOVER_LOG, "log"),
        (crate::RECOVER_LOG_MORE, "logMore"),
    ];
    for (number, name) in reports {
        assert_eq!(policy["recovery"]["reports"][number as usize], name);
    }
    assert_eq!(policy["recovery"]["reports"].as_array().unwrap().len(), reports.len());
    assert_eq!(
        policy["recovery"],
        json!({
            "reports": policy["recovery"]["reports"],
            // The first number of each step `CoreEngine::recover` returns.
            "steps": ["wait", "connect", "resume", "readLog", "deliver", "end", "recovered", "gaveUp"],
            "backoffMs": copilot_core::RECOVERY_BACKOFF_MS,
            "resumeFlag": copilot_core::RECOVERY_RESUME_FLAG,
            "eventLog": { "method": copilot_core::EVENT_LOG_READ, "page": copilot_core::EVENT_LOG_PAGE },
            "refused": copilot_core::RESUME_REFUSED,
            "gaveUp": copilot_core::RECOVERY_GAVE_UP,
            "gaps": copilot_core::GAP_NAMES,
        })
    );
}
