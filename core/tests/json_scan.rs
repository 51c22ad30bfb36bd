//! The word-at-a-time JSON scanner against a byte-at-a-time reference: the
//! same verdict, error kind and offset on every input, and serde_json's
//! verdict of validity where serde_json can judge. Inputs are built to hit
//! the scanner's edges: quotes, backslashes and control bytes at every offset
//! from an 8-byte boundary, multi-byte UTF-8 cut across words, invalid UTF-8,
//! strings cut off by the end of the text.
// Not under WebAssembly: proptest does not build for wasm32-unknown-unknown.
#![cfg(not(target_arch = "wasm32"))]

use copilot_core::json::{validate, JsonError, JsonErrorKind, MAX_DEPTH};
use proptest::prelude::*;

/// The scanner as it was before it read words: one byte at a time, UTF-8
/// checked per string once the string has ended.
mod reference {
    use super::*;

    fn err(kind: JsonErrorKind, offset: usize) -> JsonError {
        JsonError { kind, offset }
    }

    fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    }

    fn scan_string(b: &[u8], mut i: usize) -> Result<usize, JsonError> {
        let start = i + 1;
        i += 1;
        loop {
            match b.get(i) {
                None => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
                Some(b'"') => {
                    if let Err(e) = core::str::from_utf8(&b[start..i]) {
                        return Err(err(JsonErrorKind::InvalidUtf8, start + e.valid_up_to()));
                    }
                    return Ok(i + 1);
                }
                Some(b'\\') => match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => {
                        match b.get(i + 2..i + 6) {
                            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => {}
                            Some(_) => return Err(err(JsonErrorKind::InvalidEscape, i)),
                            None => return Err(err(JsonErrorKind::UnexpectedEnd, b.len())),
                        }
                        i += 6;
                    }
                    Some(_) => return Err(err(JsonErrorKind::InvalidEscape, i)),
                    None => return Err(err(JsonErrorKind::UnexpectedEnd, b.len())),
                },
                Some(c) if *c < 0x20 => return Err(err(JsonErrorKind::ControlCharacter, i)),
                Some(_) => i += 1,
            }
        }
    }

    fn scan_digits(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    }

    fn scan_number(b: &[u8], mut i: usize) -> Result<usize, JsonError> {
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = scan_digits(b, i + 1),
            _ => return Err(err(JsonErrorKind::InvalidNumber, i)),
        }
        if b.get(i) == Some(&b'.') {
            let j = scan_digits(b, i + 1);
            if j == i + 1 {
                return Err(err(JsonErrorKind::InvalidNumber, j));
            }
            i = j;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let j = scan_digits(b, i);
            if j == i {
                return Err(err(JsonErrorKind::InvalidNumber, j));
            }
            i = j;
        }
        match b.get(i) {
            None | Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}') => Ok(i),
            Some(_) => Err(err(JsonErrorKind::InvalidNumber, i)),
        }
    }

    fn scan_literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, JsonError> {
        let end = i + word.len();
        match b.get(i..end) {
            Some(w) if w == word => Ok(end),
            Some(_) => Err(err(JsonErrorKind::UnexpectedByte, i)),
            None if word.starts_with(&b[i..]) => Err(err(JsonErrorKind::UnexpectedEnd, b.len())),
            None => Err(err(JsonErrorKind::UnexpectedByte, i)),
        }
    }

    fn scan_key(b: &[u8], i: usize) -> Result<usize, JsonError> {
        match b.get(i) {
            Some(b'"') => {}
            None => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
            Some(_) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
        }
        let colon = skip_ws(b, scan_string(b, i)?);
        match b.get(colon) {
            Some(b':') => Ok(skip_ws(b, colon + 1)),
            None => Err(err(JsonErrorKind::UnexpectedEnd, colon)),
            Some(_) => Err(err(JsonErrorKind::UnexpectedByte, colon)),
        }
    }

    /// `Ok(())` or the first error, as the scanner reports it.
    pub fn validate(b: &[u8]) -> Result<(), JsonError> {
        // true: object, false: array.
        let mut stack: Vec<bool> = Vec::new();
        let mut i = skip_ws(b, 0);
        'value: loop {
            match b.get(i) {
                None => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
                Some(&open @ (b'{' | b'[')) => {
                    if stack.len() == MAX_DEPTH {
                        return Err(err(JsonErrorKind::TooDeep, i));
                    }
                    let object = open == b'{';
                    stack.push(object);
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(if object { &b'}' } else { &b']' }) {
                        stack.pop();
                        i += 1;
                    } else {
                        if object {
                            i = scan_key(b, i)?;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => i = scan_string(b, i)?,
                Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
                Some(b't') => i = scan_literal(b, i, b"true")?,
                Some(b'f') => i = scan_literal(b, i, b"false")?,
                Some(b'n') => i = scan_literal(b, i, b"null")?,
                Some(_) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
            }
            loop {
                i = skip_ws(b, i);
                let Some(&object) = stack.last() else {
                    return if i == b.len() { Ok(()) } else { Err(err(JsonErrorKind::TrailingCharacters, i)) };
                };
                match (b.get(i), object) {
                    (Some(b','), true) => {
                        i = scan_key(b, skip_ws(b, i + 1))?;
                        continue 'value;
                    }
                    (Some(b','), false) => {
                        i = skip_ws(b, i + 1);
                        continue 'value;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        stack.pop();
                        i += 1;
                    }
                    (None, _) => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
                    (Some(_), _) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
                }
            }
        }
    }
}

/// Pieces of string content chosen to land on every kind of stop byte and
/// every UTF-8 shape, valid or not.
fn string_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[a-z ]{0,12}".prop_map(String::into_bytes),
        1 => Just(b"\"".to_vec()),
        1 => Just(b"\\\\".to_vec()),
        1 => Just(b"\\n".to_vec()),
        1 => Just(b"\\\"".to_vec()),
        1 => Just(b"\\u00e9".to_vec()),
        1 => Just(b"\\ud83d\\ude00".to_vec()),
        1 => Just(b"\\".to_vec()),
        1 => Just(b"\\x".to_vec()),
        1 => Just(b"\\u12g4".to_vec()),
        1 => (0u8..0x20).prop_map(|c| vec![c]),
        1 => Just(vec![0x1f]),
        1 => Just(vec![0x7f]),
        2 => any::<char>().prop_map(|c| c.to_string().into_bytes()),
        1 => Just("é".as_bytes().to_vec()),
        1 => Just("€".as_bytes().to_vec()),
        1 => Just("😀".as_bytes().to_vec()),
        1 => Just("😀".as_bytes()[..3].to_vec()),
        1 => Just("€".as_bytes()[..2].to_vec()),
        1 => Just(vec![0x80]),
        1 => Just(vec![0xc0, 0x80]),
        1 => Just(vec![0xed, 0xa0, 0x80]),
        1 => Just(vec![0xf4, 0x90, 0x80, 0x80]),
        1 => Just(vec![0xff]),
        1 => any::<u8>().prop_map(|c| vec![c]),
    ]
}

/// A text holding one string at any offset from a word boundary, in an array
/// among other values, possibly cut off anywhere.
fn string_text() -> impl Strategy<Value = Vec<u8>> {
    (0usize..16, proptest::collection::vec(string_piece(), 0..12), any::<bool>(), any::<bool>(), any::<usize>())
        .prop_map(|(pad, pieces, close, more, cut)| {
            let mut text = b"[".to_vec();
            text.extend(std::iter::repeat_n(b' ', pad));
            text.push(b'"');
            for piece in pieces {
                text.extend(piece);
            }
            if close {
                text.push(b'"');
            }
            if more {
                text.extend_from_slice(b", \"after\", 1]");
            } else {
                text.push(b']');
            }
            if cut % 4 == 0 {
                text.truncate(cut / 4 % (text.len() + 1));
            }
            text
        })
}

/// Where serde_json can judge, it agrees that the text is or is not JSON. It
/// cannot judge escaped lone surrogates or numbers beyond f64, which RFC 8259
/// allows and serde_json rejects.
fn serde_agrees(text: &[u8], ours: &Result<(), JsonError>) -> Result<(), TestCaseError> {
    match serde_json::from_slice::<serde_json::Value>(text) {
        Ok(_) => prop_assert!(ours.is_ok(), "serde_json accepts it"),
        Err(e) => {
            let why = e.to_string();
            let serde_only = why.contains("out of range") || why.contains("surrogate");
            prop_assert!(ours.is_err() || serde_only, "serde_json rejects it: {}", why);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn strings_scan_as_the_reference_does(text in string_text()) {
        let ours = validate(&text);
        prop_assert_eq!(ours, reference::validate(&text), "{:?}", String::from_utf8_lossy(&text));
        serde_agrees(&text, &ours)?;
    }

    #[test]
    fn any_bytes_scan_as_the_reference_does(
        text in proptest::collection::vec(
            prop_oneof![
                Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'}'), Just(b'['), Just(b']'), Just(b':'), Just(b','),
                Just(b' '), Just(b'a'), Just(b'n'), Just(b'u'), Just(b'0'), Just(b'1'), Just(b'-'), Just(b'.'),
                Just(b'e'), Just(0x01), Just(0xc3), Just(0xa9), Just(0xe2), Just(0x82), Just(0xac), any::<u8>(),
            ],
            0..64,
        )
    ) {
        let ours = validate(&text);
        prop_assert_eq!(ours, reference::validate(&text));
        serde_agrees(&text, &ours)?;
    }

    #[test]
    fn json_texts_scan_as_the_reference_does(value in any_json(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3)) {
        let mut text = serde_json::to_vec(&value).unwrap();
        for (at, byte) in edits {
            if text.is_empty() { break; }
            let at = at % text.len();
            match byte % 3 {
                0 => { text.remove(at); }
                1 => text.insert(at, b"{}[],:\"\\0e \x01\x80\xc3"[usize::from(byte) % 14]),
                _ => text[at] = byte,
            }
        }
        let ours = validate(&text);
        prop_assert_eq!(ours, reference::validate(&text));
        serde_agrees(&text, &ours)?;
    }
}

fn any_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<String>().prop_map(serde_json::Value::String),
        "[a-z\"\\\\\n\u{1}é😀]{0,40}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map("[a-z\"é]{0,10}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every stop byte at every offset from the start of a word, in strings long
/// enough to take the word path before and after it, and past the sixteen
/// bytes read inline; as a value and as a key. The bytes next to the stops
/// (space, `!`, `#`, `[`, `]`, DEL) must not stop a string: a mask that marks
/// one of them would report it as an error.
#[test]
fn every_stop_byte_at_every_offset() {
    let stops: [&[u8]; 15] = [
        b"\"",
        b"\\n",
        b"\\u0041",
        b"\x00",
        b"\x1f",
        b"\\q",
        "é".as_bytes(),
        "😀".as_bytes(),
        b"\xff",
        b" ",
        b"!",
        b"#",
        b"[",
        b"]",
        b"\x7f",
    ];
    for pad in 0..8 {
        for before in 0..40 {
            for stop in stops {
                for after in [0, 1, 7, 8, 9, 17] {
                    for close in [true, false] {
                        let mut string = vec![b'"'];
                        string.extend(std::iter::repeat_n(b'x', before));
                        string.extend_from_slice(stop);
                        string.extend(std::iter::repeat_n(b'y', after));
                        if close {
                            string.push(b'"');
                        }
                        let mut value = vec![b' '; pad];
                        value.extend_from_slice(&string);
                        let mut key = b"{".to_vec();
                        key.extend(std::iter::repeat_n(b' ', pad));
                        key.extend_from_slice(&string);
                        key.extend_from_slice(b":1}");
                        for text in [value, key] {
                            let ours = validate(&text);
                            assert_eq!(ours, reference::validate(&text), "{:?}", String::from_utf8_lossy(&text));
                        }
                    }
                }
            }
        }
    }
}

/// Every lead byte above 0x7F with every boundary of the bytes that may
/// follow it (RFC 3629's ranges: overlong forms, surrogates and code points
/// past U+10FFFF are refused), at both ends of a word.
#[test]
fn every_utf8_lead_byte_and_follower_boundary() {
    let followers = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff];
    for lead in 0x80..=0xffu8 {
        for second in followers {
            for rest in [0x80u8, 0xbf, 0x7f, 0xc0] {
                for before in [0, 6, 7, 14, 15] {
                    let mut text = b"\"".to_vec();
                    text.extend(std::iter::repeat_n(b'a', before));
                    text.extend_from_slice(&[lead, second, rest, rest]);
                    text.extend_from_slice(b"bcdefghijklmnopq\"");
                    assert_eq!(validate(&text), reference::validate(&text), "{text:x?}");
                }
            }
        }
    }
}

/// Each multi-byte character, and each of its truncations, with its first
/// byte at every offset from the start of a word.
#[test]
fn utf8_split_across_words() {
    for c in ["é", "€", "😀", "\u{7ff}", "\u{800}", "\u{ffff}", "\u{10000}", "\u{10ffff}"] {
        let bytes = c.as_bytes();
        for keep in 1..=bytes.len() {
            for before in 0..16 {
                let mut text = b"\"".to_vec();
                text.extend(std::iter::repeat_n(b'a', before));
                text.extend_from_slice(&bytes[..keep]);
                text.extend_from_slice(b"bcdefghij\"");
                let ours = validate(&text);
                assert_eq!(ours, reference::validate(&text));
                assert_eq!(ours.is_ok(), keep == bytes.len(), "{text:?}");
            }
        }
    }
}

/// Runs of bytes above 0x7F are checked as UTF-8 one run at a time: runs of
/// every length up to past two pair-reads (CJK, accented Latin, emoji), with
/// one bad or cut sequence at every position of the run, at every offset
/// from a word boundary, followed by each kind of stop.
#[test]
fn utf8_runs_with_a_bad_sequence_anywhere() {
    let chars = ["中", "é", "😀"];
    let bad: [&[u8]; 4] = [b"\xff", b"\xe4\xb8", b"\xc3", b"\xed\xa0\x80"];
    let ends: [&[u8]; 4] = [b"\"", b"\\n\"", b"a\"", b"\x01\""];
    for c in chars {
        for count in 0..14 {
            for before in 0..8 {
                for at in 0..=count {
                    for fault in [None, Some(0), Some(1), Some(2), Some(3)] {
                        for end in ends {
                            let mut text = b"\"".to_vec();
                            text.extend(std::iter::repeat_n(b'a', before));
                            for k in 0..=count {
                                if let (true, Some(f)) = (k == at, fault) {
                                    text.extend_from_slice(bad[f]);
                                }
                                if k < count {
                                    text.extend_from_slice(c.as_bytes());
                                }
                            }
                            text.extend_from_slice(end);
                            let ours = validate(&text);
                            assert_eq!(ours, reference::validate(&text), "{text:x?}");
                        }
                    }
                }
            }
        }
    }
}

/// JSON white space of each kind, in each place a token may be preceded or
/// followed by it: the compact text's one-test short cuts (after a key's
/// quote, before a value) must read spaced text as the reference does, and
/// reject a stray byte where white space would be.
#[test]
fn white_space_in_every_place() {
    let text = br#"{"a":"x","bc":[1,true,{"d":null}],"e":{}}"#;
    for at in 0..=text.len() {
        for insert in [&b" "[..], b"\t", b"\n", b"\r", b" \t\r\n ", b"\x0b", b"\x0c", b"x"] {
            let mut spaced = text[..at].to_vec();
            spaced.extend_from_slice(insert);
            spaced.extend_from_slice(&text[at..]);
            assert_eq!(validate(&spaced), reference::validate(&spaced), "{:?}", String::from_utf8_lossy(&spaced));
        }
    }
}
