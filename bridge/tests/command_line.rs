//! The published `copilot-bridge` program refuses, at start and with a
//! message a user can act on, what it cannot do safely or at all.

use std::process::Command;

/// Runs the program with `args`; returns its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_copilot-bridge")).args(args).output().expect("runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn offline_is_refused_without_a_model_stand_in() {
    let (code, stderr) = run(&["--listen", "127.0.0.1:0", "--offline"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("copilot-bridge-offline"), "{stderr}");
}

#[test]
fn a_non_loopback_bind_is_refused_without_allow_remote() {
    let (code, stderr) = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a loopback address") && stderr.contains("--allow-remote"), "{stderr}");
}

#[test]
fn a_short_token_is_refused() {
    let (code, stderr) = run(&["--listen", "127.0.0.1:0", "--token", "short"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("at least 16 characters"), "{stderr}");
}
