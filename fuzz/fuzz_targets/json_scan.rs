//! copilot-core's JSON scanner on arbitrary bytes: it never panics, and it
//! accepts exactly what serde_json accepts, except the texts RFC 8259 allows
//! and serde_json rejects (numbers beyond f64, escaped lone surrogates).
//! Strings are read a word at a time, so the verdict is also checked with the
//! text shifted against 8-byte boundaries: it must not change, and an error
//! must move with the text.
#![no_main]

use copilot_core::json::validate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ours = validate(data);
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(_) => assert_eq!(ours, Ok(()), "serde_json accepts {:?}", String::from_utf8_lossy(data)),
        Err(e) => {
            let why = e.to_string();
            let serde_only = why.contains("out of range") || why.contains("surrogate");
            assert!(ours.is_err() || serde_only, "serde_json rejects it: {why}");
        }
    }
    for shift in 1..8 {
        let mut shifted = vec![b' '; shift];
        shifted.extend_from_slice(data);
        let moved = validate(&shifted).map_err(|mut e| {
            e.offset -= shift;
            e
        });
        assert_eq!(moved, ours, "shifted by {shift}");
    }
});
