//! Property tests: framing survives any chunking and recovers from garbage;
//! encoding and decoding are inverse; the JSON scanner agrees with serde_json.
// Not under WebAssembly: proptest seeds its RNG through getrandom, which does
// not build for wasm32-unknown-unknown (and proptest is no wasm32 dev-dependency).
#![cfg(not(target_arch = "wasm32"))]

use copilot_core::json::validate;
use copilot_core::{Envelope, FrameDecoder, FrameError, Id, Message, Outgoing, RequestId, Value};
use proptest::prelude::*;

const BUF: usize = 512;

/// Feeds `input` cut at `cuts` and returns the frames and errors decoded.
fn decode_chunked(input: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, Vec<FrameError>) {
    decode_chunked_in::<BUF>(input, cuts)
}

fn decode_chunked_in<const N: usize>(input: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, Vec<FrameError>) {
    let mut d = FrameDecoder::<[u8; N]>::new();
    let (mut frames, mut errors) = (Vec::new(), Vec::new());
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.push(0);
    points.push(input.len());
    points.sort_unstable();
    for w in points.windows(2) {
        let mut rest = &input[w[0]..w[1]];
        loop {
            rest = &rest[d.feed(rest)..];
            while let Some(r) = d.poll() {
                match r {
                    Ok(body) => frames.push(body.to_vec()),
                    Err(e) => errors.push(e),
                }
            }
            if rest.is_empty() {
                break;
            }
        }
    }
    if let Err(e) = d.finish() {
        errors.push(e);
    }
    (frames, errors)
}

fn header(len: usize, variant: u8) -> Vec<u8> {
    match variant % 4 {
        0 => format!("Content-Length: {len}\r\n\r\n"),
        1 => format!("content-length:{len}\r\n\r\n"),
        2 => format!("Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH: {len}\r\n\r\n"),
        _ => format!("Content-Length:  {len} \r\nX-Extra: 1\r\n\r\n"),
    }
    .into_bytes()
}

fn garbage() -> impl Strategy<Value = Vec<u8>> {
    // Log-like lines: anything printable but the letter that starts a header.
    proptest::collection::vec(prop::char::range(' ', '~').prop_filter("no c", |c| !matches!(c, 'c' | 'C')), 1..40)
        .prop_map(|cs| {
            let mut line: String = cs.into_iter().collect();
            line.push('\n');
            line.into_bytes()
        })
}

/// Junk that cannot form a header: any bytes, with pieces that look like the
/// start of a header line, where no `Content-Length` or `Content-Type` (in any
/// case) appears.
fn headerless_junk() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(prop::char::range(' ', '~'), 0..24)
            .prop_map(|cs| cs.into_iter().collect::<String>().into_bytes()),
        prop::sample::select(vec![
            "zz",
            "a:",
            "Warning: disk low",
            "X-Note: 1\r\n",
            "\r",
            "\n",
            "\r\n",
            ":",
            "Content-",
            "content-len",
            "Content-Typ",
            "b: c\r\n\r\n",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
    ];
    proptest::collection::vec(piece, 1..5).prop_map(|pieces| {
        let mut junk = pieces.concat();
        // Break every header name the pieces happen to spell.
        while let Some(at) = [&b"content-length"[..], b"content-type"]
            .iter()
            .find_map(|name| junk.windows(name.len()).position(|w| w.eq_ignore_ascii_case(name)))
        {
            junk[at] = b'#';
        }
        junk
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_chunking_yields_the_same_frames(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..BUF), 0..8),
        variants in proptest::collection::vec(any::<u8>(), 8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input = Vec::new();
        for (i, b) in bodies.iter().enumerate() {
            input.extend(header(b.len(), variants[i]));
            input.extend(b);
        }
        let (frames, errors) = decode_chunked(&input, &cuts);
        prop_assert_eq!(errors, vec![]);
        prop_assert_eq!(frames, bodies);
    }

    #[test]
    fn garbage_and_oversize_frames_lose_no_valid_frame(
        items in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..BUF).prop_map(|b| (0u8, b)),
                garbage().prop_map(|g| (1u8, g)),
                (BUF + 1..3 * BUF).prop_map(|n| (2u8, vec![b'x'; n])),
            ],
            0..10,
        ),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input = Vec::new();
        let mut expected_frames = Vec::new();
        let mut bad_runs = 0;
        let mut oversize = 0;
        let mut previous_bad = false;
        for (kind, bytes) in &items {
            match kind {
                0 => {
                    input.extend(header(bytes.len(), 0));
                    input.extend(bytes);
                    expected_frames.push(bytes.clone());
                    previous_bad = false;
                }
                1 => {
                    input.extend(bytes);
                    bad_runs += usize::from(!previous_bad);
                    previous_bad = true;
                }
                _ => {
                    input.extend(header(bytes.len(), 0));
                    input.extend(bytes);
                    oversize += 1;
                    previous_bad = false;
                }
            }
        }
        let (frames, errors) = decode_chunked(&input, &cuts);
        prop_assert_eq!(frames, expected_frames);
        let too_large = errors.iter().filter(|e| matches!(e, FrameError::TooLarge { .. })).count();
        prop_assert_eq!(too_large, oversize);
        prop_assert_eq!(errors.len() - too_large, bad_runs, "one report per run of garbage: {:?}", errors);
    }

    #[test]
    fn junk_glued_before_headers_loses_no_valid_frame(
        items in proptest::collection::vec(
            (proptest::option::of(headerless_junk()), proptest::collection::vec(any::<u8>(), 0..BUF / 2), any::<u8>()),
            1..8,
        ),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input = Vec::new();
        let mut bodies = Vec::new();
        let mut junk_runs = 0;
        for (junk, body, variant) in &items {
            if let Some(junk) = junk {
                input.extend(junk);
                junk_runs += 1;
            }
            input.extend(header(body.len(), *variant));
            input.extend(body);
            bodies.push(body.clone());
        }
        let (frames, errors) = decode_chunked(&input, &cuts);
        prop_assert_eq!(frames, bodies);
        prop_assert!(errors.len() <= junk_runs, "at most one report per run of junk: {:?}", errors);
        prop_assert!(!errors.iter().any(|e| matches!(e, FrameError::TooLarge { .. } | FrameError::Truncated)), "{:?}", errors);
    }

    #[test]
    fn requests_decode_to_what_was_encoded(
        id in any::<u64>(),
        method in any::<String>(),
        params in json_value(),
        with_params in any::<bool>(),
    ) {
        // JSON-RPC params are structured: wrap scalars in an array.
        let params = if params.is_object() || params.is_array() { params } else { serde_json::json!([params]) };
        let text = serde_json::to_string(&params).unwrap();
        let value = Value::parse(text.as_bytes()).unwrap();
        let params = with_params.then_some(&value as &dyn copilot_core::Payload);
        let mut buf = vec![0u8; text.len() + method.len() * 6 + 128];
        let n = Outgoing::Request { id: RequestId(id), method: &method, params }.encode(&mut buf).unwrap();
        let (frames, errors) = decode_chunked_in::<{ 1 << 16 }>(&buf[..n], &[]);
        prop_assert!(errors.is_empty(), "{:?}", errors);
        let e = Envelope::decode(&frames[0]).unwrap();
        let Message::Request { id: got_id, method: got_method, params: got_params } = e.message else {
            panic!("not a request: {e:?}")
        };
        prop_assert_eq!(got_id.as_u64(), Some(id));
        prop_assert_eq!(got_method.to_string(), method);
        prop_assert_eq!(got_params.map(|p| p.raw().to_owned()), with_params.then_some(text));
    }

    #[test]
    fn responses_decode_to_what_was_encoded(
        string_id in any::<String>(),
        number_id in any::<i64>(),
        use_string in any::<bool>(),
        result in json_value(),
        error in proptest::option::of((any::<i64>(), any::<String>())),
    ) {
        // Ids arrive from the peer, so build them the way the peer writes them.
        let id_text = if use_string { serde_json::to_string(&string_id).unwrap() } else { number_id.to_string() };
        let id_value = Value::parse(id_text.as_bytes()).unwrap();
        let id = match id_value.as_str() {
            Some(s) => Id::String(s),
            None => Id::Number(id_value.as_number().unwrap()),
        };
        let text = serde_json::to_string(&result).unwrap();
        let value = Value::parse(text.as_bytes()).unwrap();
        let out = match &error {
            None => Outgoing::Response { id, result: &value },
            Some((code, message)) => Outgoing::Error { id, code: *code, message, data: Some(&value) },
        };
        let mut buf = vec![0u8; text.len() + id_text.len() + 6 * error.as_ref().map_or(0, |e| e.1.len()) + 160];
        let n = out.encode_body(&mut buf).unwrap();
        let e = Envelope::decode(&buf[..n]).unwrap();
        let Message::Response { id: got, result: got_result } = e.message else { panic!() };
        prop_assert_eq!(got, id);
        match (got_result, &error) {
            (Ok(v), None) => prop_assert_eq!(v.raw(), text.as_str()),
            (Err(rpc), Some((code, message))) => {
                prop_assert_eq!(rpc.code, *code);
                prop_assert_eq!(rpc.message.to_string(), message.clone());
                prop_assert_eq!(rpc.data.map(|d| d.raw()), Some(text.as_str()));
            }
            (other, _) => panic!("{other:?}"),
        }
    }

    #[test]
    fn scanner_agrees_with_serde_json(value in json_value(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4)) {
        let mut text = serde_json::to_string_pretty(&value).unwrap().into_bytes();
        prop_assert_eq!(validate(&text), Ok(()));
        for (at, byte) in edits {
            if text.is_empty() { break; }
            let at = at % text.len();
            match byte % 3 {
                0 => { text.remove(at); }
                1 => text.insert(at, b"{}[],:\"\\0-e.tfn \x01"[usize::from(byte) % 17]),
                _ => text[at] = byte,
            }
        }
        let ours = validate(&text);
        match serde_json::from_slice::<serde_json::Value>(&text) {
            Ok(_) => prop_assert_eq!(ours, Ok(())),
            Err(e) => {
                let why = e.to_string();
                // serde_json rejects some valid JSON texts: numbers beyond f64
                // and escaped lone surrogates. RFC 8259 allows both.
                let serde_only = why.contains("out of range") || why.contains("surrogate");
                prop_assert!(ours.is_err() || serde_only, "we accepted what serde_json rejects: {}", why);
            }
        }
    }
}

/// Arbitrary JSON, strings with any Unicode (surrogate pairs when escaped).
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
        any::<String>().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Walks a validated value with the core's accessors and compares every part
/// with serde_json's reading of the same text.
fn same_as_serde(v: Value<'_>, expected: &serde_json::Value) -> Result<(), TestCaseError> {
    use copilot_core::json::Kind;
    match expected {
        serde_json::Value::Null => prop_assert!(v.is_null()),
        serde_json::Value::Bool(b) => prop_assert_eq!(v.as_bool(), Some(*b)),
        serde_json::Value::Number(n) => {
            let ours = v.as_number().expect("a number");
            // The text was written by serde_json, so the number is its text.
            prop_assert_eq!(ours.raw(), n.to_string());
            if let Some(i) = n.as_i64() {
                prop_assert_eq!(ours.as_i64(), Some(i));
            }
        }
        serde_json::Value::String(s) => {
            let ours = v.as_str().expect("a string");
            prop_assert_eq!(ours.to_string(), s.clone());
            prop_assert!(ours == s.as_str());
            prop_assert_eq!(ours.decoded_len(), s.len());
            let mut buf = vec![0u8; s.len()];
            prop_assert_eq!(ours.decode_into(&mut buf), Some(s.as_str()));
        }
        serde_json::Value::Array(items) => {
            prop_assert_eq!(v.kind(), Kind::Array);
            let ours: Vec<_> = v.elements().collect();
            prop_assert_eq!(ours.len(), items.len());
            for (o, e) in ours.into_iter().zip(items) {
                same_as_serde(o, e)?;
            }
        }
        serde_json::Value::Object(map) => {
            prop_assert_eq!(v.kind(), Kind::Object);
            prop_assert_eq!(v.members().count(), map.len());
            for (key, e) in map {
                same_as_serde(v.get(key).expect("member present"), e)?;
            }
        }
    }
    Ok(())
}

/// serde_json writes non-ASCII as UTF-8; this rewrites every non-ASCII
/// character as `\u` escapes (surrogate pairs above U+FFFF), the other way a
/// peer may send the same text.
fn escape_non_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn navigation_agrees_with_serde_json(value in json_value(), escaped in any::<bool>(), pretty in any::<bool>()) {
        let mut text = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) }.unwrap();
        if escaped {
            text = escape_non_ascii(&text);
        }
        let v = Value::parse(text.as_bytes()).unwrap();
        same_as_serde(v, &value)?;
    }

    #[test]
    fn the_read_path_never_panics_on_arbitrary_bytes(
        pieces in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..64),
                Just(b"Content-Length: 20\r\n\r\n".to_vec()),
                Just(br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"x"}}}"#.to_vec()),
                json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
            ],
            0..24,
        ),
    ) {
        let router: copilot_core::Router<u8, u8, 2, 2> = copilot_core::Router::new();
        router.sessions().reserve("s", 1).unwrap();
        router.pending().insert(9).unwrap();
        let mut d = FrameDecoder::<[u8; 256]>::new();
        let input: Vec<u8> = pieces.concat();
        let (mut bodies, mut malformed, mut oversize, mut broken) = (0u64, 0u64, 0u64, 0u64);
        let mut rest = &input[..];
        while !rest.is_empty() {
            rest = &rest[d.feed(rest)..];
            while let Some(route) = router.poll(&mut d) {
                // Reading a route's parts must not panic either.
                let _ = format!("{route:?}");
                match route {
                    copilot_core::Route::FrameError(FrameError::TooLarge { .. }) => oversize += 1,
                    copilot_core::Route::FrameError(_) => broken += 1,
                    copilot_core::Route::Malformed(_) => {
                        malformed += 1;
                        bodies += 1;
                    }
                    _ => bodies += 1,
                }
            }
        }
        let _ = d.finish();
        // The counters agree with what was handed out.
        let s = router.stats();
        prop_assert_eq!(s.frames, bodies);
        prop_assert_eq!(s.oversize, oversize);
        prop_assert_eq!(s.malformed, malformed + broken);
    }
}
