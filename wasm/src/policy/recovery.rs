//! `policy.json`'s `recovery`: the core's backoff and resume flag, as the
//! JS client's recovery reads them.

use serde_json::{json, Value};

#[test]
fn the_recovery_is_the_cores() {
    let policy: Value = serde_json::from_str(include_str!("../../policy.json")).expect("the policy is JSON");
    assert_eq!(
        policy["recovery"],
        json!({
            "backoffMs": copilot_core::RECOVERY_BACKOFF_MS,
            "resumeFlag": copilot_core::RECOVERY_RESUME_FLAG,
        })
    );
}
