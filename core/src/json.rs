//! A validating JSON (RFC 8259) scanner that borrows from the text it reads.
//!
//! serde-json-core cannot read escaped surrogate pairs (`"\ud83d\ude00"`), not
//! even in fields it skips, and cannot skip a value whose type it does not
//! know. Routing must never fail on valid JSON, so the envelope is read by this
//! scanner instead: one pass validates the whole text and records where the
//! fields the router needs are. [`Value`], [`JsonStr`] and [`JsonNumber`] then
//! give zero-copy access to any part of a validated text.
//!
//! Accepted: every JSON text RFC 8259 allows, with containers nested at most
//! [`MAX_DEPTH`] deep. Escaped lone surrogates (`"\ud800"`) are valid JSON
//! text; they decode to U+FFFD.

use core::fmt;

use crate::scan::{scan, skip_back_ws, skip_ws, Visitor};
pub use crate::scan::{JsonError, JsonErrorKind, MAX_DEPTH};

impl JsonError {
    /// Writes the message that [`Display`](fmt::Display) shows, in parts,
    /// without `core::fmt` (for builds that leave it out).
    pub fn write_message(&self, out: &mut dyn FnMut(&str)) {
        out(match self.kind {
            JsonErrorKind::UnexpectedEnd => crate::messages::JSON_UNEXPECTED_END,
            JsonErrorKind::UnexpectedByte => crate::messages::JSON_UNEXPECTED_BYTE,
            JsonErrorKind::InvalidUtf8 => crate::messages::JSON_INVALID_UTF8,
            JsonErrorKind::ControlCharacter => crate::messages::JSON_CONTROL_CHARACTER,
            JsonErrorKind::InvalidEscape => crate::messages::JSON_INVALID_ESCAPE,
            JsonErrorKind::InvalidNumber => crate::messages::JSON_INVALID_NUMBER,
            JsonErrorKind::TooDeep => crate::messages::JSON_TOO_DEEP,
            JsonErrorKind::TrailingCharacters => crate::messages::JSON_TRAILING,
        });
        out(crate::messages::AT_BYTE);
        crate::text::write_decimal(self.offset as u64, out);
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::text::fmt_parts(f, |out| self.write_message(out))
    }
}

impl core::error::Error for JsonError {}

/// A visitor that only validates.
struct Ignore;

impl Visitor for Ignore {
    #[inline(always)]
    fn key(&mut self, _: usize, _: &[u8], _: bool) {}
    #[inline(always)]
    fn element(&mut self, _: usize) {}
    #[inline(always)]
    fn value(&mut self, _: usize, _: usize, _: usize) {}
}

/// Checks that `text` is one JSON value, optionally surrounded by white space.
pub fn validate(text: &[u8]) -> Result<(), JsonError> {
    scan(text, &mut Ignore).map(|_| ())
}

/// `b` without JSON white space at either end.
pub(crate) fn trim_ws(b: &[u8]) -> &[u8] {
    let end = skip_back_ws(b);
    &b[skip_ws(&b[..end], 0)..end]
}

// ---------------------------------------------------------------------------
// Zero-copy access to validated text.

/// The text of a validated slice. Validated JSON is UTF-8 and slices are cut
/// at ASCII delimiters, so this cannot fail; `unsafe` is forbidden here, so
/// the check is made rather than assumed.
fn utf8(text: &[u8]) -> &str {
    core::str::from_utf8(text).unwrap_or_default()
}

/// Index after the value that starts at `i` in validated text.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b[i] {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            j
        }
    }
}

/// Index after the closing quote of the validated string starting at `i`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    loop {
        match b[i] {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The kind of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `{...}`
    Object,
    /// `[...]`
    Array,
    /// `"..."`
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

/// A validated JSON value, borrowed from the text it was found in.
///
/// Access is lazy: `get` and the iterators skip over what they do not need.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    text: &'a [u8],
}

impl<'a> Value<'a> {
    /// Validates `text` as one JSON value (surrounding white space allowed).
    pub fn parse(text: &'a [u8]) -> Result<Self, JsonError> {
        let (start, end) = scan(text, &mut Ignore)?;
        Ok(Self::from_validated(&text[start..end]))
    }

    /// `text` must be one validated JSON value without surrounding white space.
    pub(crate) fn from_validated(text: &'a [u8]) -> Self {
        Value { text }
    }

    /// The value's JSON text, exactly as received.
    pub fn raw(&self) -> &'a str {
        utf8(self.text)
    }

    /// The value's JSON text as bytes, without a second UTF-8 check.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.text
    }

    /// What kind of value this is.
    pub fn kind(&self) -> Kind {
        match self.text[0] {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' | b'f' => Kind::Bool,
            b'n' => Kind::Null,
            _ => Kind::Number,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<JsonStr<'a>> {
        let b = self.text;
        (b[0] == b'"').then(|| JsonStr::from_validated(&b[1..b.len() - 1]))
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<JsonNumber<'a>> {
        (self.kind() == Kind::Number).then_some(JsonNumber { text: self.text })
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.text {
            b"true" => Some(true),
            b"false" => Some(false),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        self.text == b"null"
    }

    /// The member named `key` of an object (the last one, if the name repeats,
    /// as JavaScript's `JSON.parse` does). `None` for other kinds.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members().filter(|(k, _)| *k == key).last().map(|(_, v)| v)
    }

    /// Follows a path of member names: `v.pointer(&["event", "data"])`.
    pub fn pointer(&self, path: &[&str]) -> Option<Value<'a>> {
        path.iter().try_fold(*self, |v, key| v.get(key))
    }

    /// The members of an object in text order; empty for other kinds.
    pub fn members(&self) -> Members<'a> {
        let b = self.text;
        let pos = if b[0] == b'{' { skip_ws(b, 1) } else { b.len() };
        Members { text: b, pos }
    }

    /// The elements of an array in order; empty for other kinds.
    pub fn elements(&self) -> Elements<'a> {
        let b = self.text;
        let pos = if b[0] == b'[' { skip_ws(b, 1) } else { b.len() };
        Elements { text: b, pos }
    }

    /// Deserializes this value with serde-json-core.
    ///
    /// serde-json-core 0.7 rejects escaped surrogate pairs anywhere in its
    /// input, so the text is first copied into `scratch` with every escaped
    /// surrogate pair rewritten as the UTF-8 bytes it stands for (which is
    /// shorter, so it always fits in a buffer as long as the text).
    /// `unescape` is serde-json-core's buffer for strings with escapes.
    /// Limits of serde-json-core remain: no `deserialize_any` (untagged enums,
    /// maps of unknown value types).
    pub fn deserialize<'s, T: serde::Deserialize<'s>>(
        &self,
        scratch: &'s mut [u8],
        unescape: &mut [u8],
    ) -> Result<T, DeserializeError> {
        let len = transcode_surrogates(self.text, scratch).ok_or(DeserializeError::ScratchTooSmall)?;
        let scratch: &'s [u8] = scratch;
        serde_json_core::from_slice_escaped(&scratch[..len], unescape).map(|(v, _)| v).map_err(DeserializeError::Json)
    }
}

/// Why [`Value::deserialize`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeserializeError {
    /// The scratch buffer is shorter than the value's text.
    ScratchTooSmall,
    /// serde-json-core could not map the value onto the type.
    Json(serde_json_core::de::Error),
}

impl fmt::Display for DeserializeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeserializeError::ScratchTooSmall => f.write_str("scratch buffer shorter than the JSON text"),
            DeserializeError::Json(e) => write!(f, "cannot deserialize: {e}"),
        }
    }
}

impl core::error::Error for DeserializeError {}

/// Copies validated JSON `text` into `out`, replacing each `\uD8xx\uDCxx`
/// escape pair by its UTF-8 bytes and each lone surrogate escape by U+FFFD.
/// Returns the length written, or `None` if `out` is too short.
fn transcode_surrogates(text: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut w = 0;
    let mut i = 0;
    let mut in_string = false;
    while i < text.len() {
        let c = text[i];
        if in_string && c == b'\\' {
            if text[i + 1] == b'u' {
                let unit = hex4(&text[i + 2..i + 6]);
                if (0xD800..0xE000).contains(&unit) {
                    let (ch, used) = decode_surrogate(unit, &text[i + 6..]);
                    let mut utf8 = [0u8; 4];
                    let s = ch.encode_utf8(&mut utf8);
                    out.get_mut(w..w + s.len())?.copy_from_slice(s.as_bytes());
                    w += s.len();
                    i += 6 + used;
                    continue;
                }
            }
            let n = if text[i + 1] == b'u' { 6 } else { 2 };
            out.get_mut(w..w + n)?.copy_from_slice(&text[i..i + n]);
            w += n;
            i += n;
            continue;
        }
        if c == b'"' {
            in_string = !in_string;
        }
        *out.get_mut(w)? = c;
        w += 1;
        i += 1;
    }
    Some(w)
}

/// Given a surrogate code unit, and the text after its escape, returns the
/// character and how many bytes of `rest` its low half used.
fn decode_surrogate(unit: u16, rest: &[u8]) -> (char, usize) {
    if (0xD800..0xDC00).contains(&unit) && rest.len() >= 6 && rest[0] == b'\\' && rest[1] == b'u' {
        let low = hex4(&rest[2..6]);
        if (0xDC00..0xE000).contains(&low) {
            let cp = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
            return (char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER), 6);
        }
    }
    (char::REPLACEMENT_CHARACTER, 0)
}

fn hex4(h: &[u8]) -> u16 {
    h.iter().fold(0u16, |acc, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        (acc << 4) | u16::from(v)
    })
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// Iterator over an object's members; see [`Value::members`].
#[derive(Clone)]
pub struct Members<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JsonStr<'a>, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.text;
        if self.pos >= b.len() || b[self.pos] != b'"' {
            self.pos = b.len();
            return None;
        }
        let key_end = skip_string(b, self.pos);
        let key = JsonStr::from_validated(&b[self.pos + 1..key_end - 1]);
        let value_start = skip_ws(b, skip_ws(b, key_end) + 1);
        let value_end = skip_value(b, value_start);
        let value = Value::from_validated(&b[value_start..value_end]);
        let next = skip_ws(b, value_end);
        self.pos = if b[next] == b',' { skip_ws(b, next + 1) } else { b.len() };
        Some((key, value))
    }
}

/// Iterator over an array's elements; see [`Value::elements`].
#[derive(Clone)]
pub struct Elements<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.text;
        if self.pos >= b.len() || b[self.pos] == b']' {
            self.pos = b.len();
            return None;
        }
        let end = skip_value(b, self.pos);
        let value = Value::from_validated(&b[self.pos..end]);
        let next = skip_ws(b, end);
        self.pos = if b[next] == b',' { skip_ws(b, next + 1) } else { b.len() };
        Some(value)
    }
}

/// A JSON number as written (`12`, `-0.5`, `1e400`): any size is kept exactly.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JsonNumber<'a> {
    text: &'a [u8],
}

impl<'a> JsonNumber<'a> {
    /// The number's text.
    pub fn raw(&self) -> &'a str {
        utf8(self.text)
    }

    /// The value if the text is a plain integer (no fraction or exponent)
    /// that fits in a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        self.raw().parse().ok()
    }

    /// The value if the text is a plain integer that fits in an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.raw().parse().ok()
    }
}

impl fmt::Debug for JsonNumber<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// The contents of a JSON string as written, escapes and all (the quotes
/// excluded). Compare, iterate or unescape it without allocating.
#[derive(Clone, Copy)]
pub struct JsonStr<'a> {
    raw: &'a [u8],
}

impl<'a> JsonStr<'a> {
    /// `raw` must be the inside of a string validated by the scanner.
    pub(crate) fn from_validated(raw: &'a [u8]) -> Self {
        // Inside validated UTF-8 text, cut at ASCII quotes: cannot fail.
        JsonStr { raw }
    }

    /// The text between the quotes, escapes not decoded. Writing it back
    /// between quotes reproduces the original string exactly.
    pub fn raw(&self) -> &'a str {
        utf8(self.raw)
    }

    /// The text between the quotes as bytes, escapes not decoded.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// The string itself if it has no escapes (the common case).
    pub fn as_plain(&self) -> Option<&'a str> {
        (!crate::scan::has_backslash(self.raw)).then(|| self.raw())
    }

    /// The decoded characters (lone surrogates become U+FFFD).
    pub fn chars(&self) -> Chars<'a> {
        Chars { rest: self.raw }
    }

    /// Length in bytes once decoded to UTF-8.
    pub fn decoded_len(&self) -> usize {
        match self.as_plain() {
            Some(s) => s.len(),
            None => self.chars().map(char::len_utf8).sum(),
        }
    }

    /// Decodes into `buf`; `None` if it does not fit.
    pub fn decode_into<'b>(&self, buf: &'b mut [u8]) -> Option<&'b str> {
        let mut n = 0;
        for c in self.chars() {
            let len = c.len_utf8();
            c.encode_utf8(buf.get_mut(n..n + len)?);
            n += len;
        }
        core::str::from_utf8(&buf[..n]).ok()
    }
}

impl PartialEq<str> for JsonStr<'_> {
    fn eq(&self, other: &str) -> bool {
        // Every escape is longer than the UTF-8 of what it stands for, so
        // text with an escape is longer than its decoded form: the lengths
        // decide which comparison can hold, and the text is searched for a
        // backslash only when it is needed (keys are compared per frame).
        let (raw, other_bytes) = (self.raw, other.as_bytes());
        match raw.len().cmp(&other_bytes.len()) {
            core::cmp::Ordering::Less => false,
            core::cmp::Ordering::Equal => raw == other_bytes && !crate::scan::has_backslash(raw),
            core::cmp::Ordering::Greater => crate::scan::has_backslash(raw) && self.chars().eq(other.chars()),
        }
    }
}

impl PartialEq<&str> for JsonStr<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq for JsonStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw || self.chars().eq(other.chars())
    }
}

impl Eq for JsonStr<'_> {}

impl fmt::Debug for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.raw())
    }
}

impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_plain() {
            Some(s) => f.write_str(s),
            None => self.chars().try_for_each(|c| fmt::Write::write_char(f, c)),
        }
    }
}

/// Decoded characters of a [`JsonStr`].
#[derive(Clone)]
pub struct Chars<'a> {
    rest: &'a [u8],
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let b = self.rest;
        let first = *b.first()?;
        if first != b'\\' {
            // The slice is valid UTF-8: decode one scalar.
            let len = match first {
                0x00..=0x7F => 1,
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let c = core::str::from_utf8(&b[..len]).ok().and_then(|s| s.chars().next());
            self.rest = &b[len..];
            return c;
        }
        let (c, used) = match b[1] {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            _ => {
                let unit = hex4(&b[2..6]);
                if (0xD800..0xE000).contains(&unit) {
                    let (c, extra) = decode_surrogate(unit, &b[6..]);
                    (c, 6 + extra)
                } else {
                    (char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER), 6)
                }
            }
        };
        self.rest = &b[used..];
        Some(c)
    }
}

/// The escape of the byte `c` in a JSON string (in `hex` for the control
/// characters without a short form); `None` when it goes as it is.
fn escape_of(c: u8, hex: &mut [u8; 6]) -> Option<&[u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match c {
        b'"' => Some(b"\\\""),
        b'\\' => Some(b"\\\\"),
        b'\n' => Some(b"\\n"),
        b'\r' => Some(b"\\r"),
        b'\t' => Some(b"\\t"),
        0x00..=0x1F => {
            *hex = [b'\\', b'u', b'0', b'0', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]];
            Some(&hex[..])
        }
        _ => None,
    }
}

/// Writes `s` as a JSON string (with quotes) into `out` at `*at`.
pub(crate) fn write_escaped(out: &mut [u8], at: &mut usize, s: &str) -> Option<()> {
    put(out, at, b"\"")?;
    let bytes = s.as_bytes();
    let mut run = 0;
    let mut hex = [0; 6];
    for (i, &c) in bytes.iter().enumerate() {
        let Some(esc) = escape_of(c, &mut hex) else { continue };
        put(out, at, &bytes[run..i])?;
        put(out, at, esc)?;
        run = i + 1;
    }
    put(out, at, &bytes[run..])?;
    put(out, at, b"\"")
}

/// Writes `s` as a JSON string (with quotes) to `out`, in pieces.
pub fn emit_escaped(s: &str, out: &mut impl FnMut(&[u8])) {
    out(b"\"");
    emit_escaped_inside(s.as_bytes(), out);
    out(b"\"");
}

/// Writes `raw` (UTF-8) escaped for the inside of a JSON string, in
/// pieces. Escaping goes byte by byte, so `raw` may be any piece of a text.
pub(crate) fn emit_escaped_inside(raw: &[u8], out: &mut impl FnMut(&[u8])) {
    let mut run = 0;
    let mut hex = [0; 6];
    for (i, &c) in raw.iter().enumerate() {
        let Some(esc) = escape_of(c, &mut hex) else { continue };
        out(&raw[run..i]);
        out(esc);
        run = i + 1;
    }
    out(&raw[run..]);
}

/// Appends `bytes` to `out` at `*at`; `None` if it does not fit.
#[inline]
pub(crate) fn put(out: &mut [u8], at: &mut usize, bytes: &[u8]) -> Option<()> {
    let end = *at + bytes.len();
    out.get_mut(*at..end)?.copy_from_slice(bytes);
    *at = end;
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Option<JsonErrorKind> {
        validate(text.as_bytes()).err().map(|e| e.kind)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn accepts_every_kind_of_value() {
        for ok in [
            "0",
            "-0",
            "1.5e-3",
            "1E+400",
            "-12345678901234567890123",
            "true",
            "false",
            "null",
            "\"\"",
            "[]",
            "{}",
            " [1, {\"a\": [null]}] \r\n",
            "\"\\ud83d\\ude00\"",
            "\"\\uDEAD\"",
            "\"é😀\"",
            "{\"a\":1,\"a\":2}",
        ] {
            assert_eq!(kind(ok), None, "{ok}");
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn rejects_with_the_right_kind_and_offset() {
        let cases: &[(&[u8], JsonErrorKind, usize)] = &[
            (b"", JsonErrorKind::UnexpectedEnd, 0),
            (b"  ", JsonErrorKind::UnexpectedEnd, 2),
            (b"{\"a\":1,}", JsonErrorKind::UnexpectedByte, 7),
            (b"[1,]", JsonErrorKind::UnexpectedByte, 3),
            (b"[1 2]", JsonErrorKind::UnexpectedByte, 3),
            (b"{\"a\" 1}", JsonErrorKind::UnexpectedByte, 5),
            (b"{1:2}", JsonErrorKind::UnexpectedByte, 1),
            (b"[1}", JsonErrorKind::UnexpectedByte, 2),
            (b"\"a\nb\"", JsonErrorKind::ControlCharacter, 2),
            (b"\"\\x\"", JsonErrorKind::InvalidEscape, 1),
            (b"\"\\u12G4\"", JsonErrorKind::InvalidEscape, 1),
            (b"01", JsonErrorKind::InvalidNumber, 1),
            (b"1.", JsonErrorKind::InvalidNumber, 2),
            (b"1e", JsonErrorKind::InvalidNumber, 2),
            (b"-", JsonErrorKind::InvalidNumber, 1),
            (b"+1", JsonErrorKind::UnexpectedByte, 0),
            (b"1x", JsonErrorKind::InvalidNumber, 1),
            (b"tru", JsonErrorKind::UnexpectedEnd, 3),
            (b"trux", JsonErrorKind::UnexpectedByte, 0),
            (b"nul", JsonErrorKind::UnexpectedEnd, 3),
            (b"{} {}", JsonErrorKind::TrailingCharacters, 3),
            (b"\"\xff\"", JsonErrorKind::InvalidUtf8, 1),
            (b"[\"abc", JsonErrorKind::UnexpectedEnd, 5),
            (b"\"\\u12", JsonErrorKind::UnexpectedEnd, 5),
        ];
        for &(text, k, offset) in cases {
            assert_eq!(validate(text), Err(JsonError { kind: k, offset }), "{:?}", core::str::from_utf8(text));
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn depth_limit_is_exact() {
        let mut ok = [0u8; 2 * MAX_DEPTH];
        ok[..MAX_DEPTH].fill(b'[');
        ok[MAX_DEPTH..].fill(b']');
        assert_eq!(validate(&ok), Ok(()));
        let mut deep = [0u8; 2 * MAX_DEPTH + 2];
        deep[..=MAX_DEPTH].fill(b'[');
        deep[MAX_DEPTH + 1..].fill(b']');
        assert_eq!(validate(&deep).map_err(|e| e.kind), Err(JsonErrorKind::TooDeep));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn navigates_members_and_elements() {
        let v = Value::parse(br#" {"a": [1, "x", {"b": null}], "c": {"d": "\u00e9\"q"}, "a": 7} "#).unwrap();
        assert_eq!(v.kind(), Kind::Object);
        assert_eq!(v.get("a").unwrap().raw(), "7", "last duplicate wins");
        let first_a = v.members().next().unwrap().1;
        let items: [Kind; 3] = {
            let mut it = first_a.elements().map(|e| e.kind());
            [it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(items, [Kind::Number, Kind::String, Kind::Object]);
        let d = v.pointer(&["c", "d"]).unwrap().as_str().unwrap();
        assert_eq!(d, "é\"q");
        assert_eq!(d.raw(), "\\u00e9\\\"q");
        let mut buf = [0u8; 8];
        assert_eq!(d.decode_into(&mut buf), Some("é\"q"));
        assert_eq!(d.decoded_len(), 4);
        assert!(v.get("zz").is_none());
        assert!(Value::parse(b"[]").unwrap().elements().next().is_none());
        assert!(Value::parse(b"{}").unwrap().members().next().is_none());
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn compares_with_str_by_decoded_text() {
        let v = Value::parse(br#"["a\\n", "a\n", "\u00e9", "plain", "\ud800"]"#).unwrap();
        let s = |i: usize| v.elements().nth(i).unwrap().as_str().unwrap();
        assert_eq!(s(0), "a\\n", "an escaped backslash");
        assert_ne!(s(1), "a\\n", "same bytes as written, but the escape decodes to a newline");
        assert_eq!(s(1), "a\n");
        assert_eq!(s(2), "é");
        assert_ne!(s(2), "\\u00e9");
        assert_eq!(s(3), "plain");
        assert_ne!(s(3), "plai");
        assert_ne!(s(3), "plainer");
        assert_eq!(s(4), "\u{FFFD}", "a lone surrogate reads as U+FFFD");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn decodes_surrogates_and_escapes() {
        let v = Value::parse(br#""\ud83d\ude00 \uD800x \t\/\b\f\n\r\\""#).unwrap();
        let s = v.as_str().unwrap();
        assert_eq!(s, "😀 \u{FFFD}x \t/\u{8}\u{c}\n\r\\");
        assert_ne!(s, "😀");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn numbers_keep_their_text() {
        let n = Value::parse(b"1e400").unwrap().as_number().unwrap();
        assert_eq!(n.raw(), "1e400");
        assert_eq!(n.as_u64(), None);
        assert_eq!(Value::parse(b"42").unwrap().as_number().unwrap().as_u64(), Some(42));
        assert_eq!(Value::parse(b"-42").unwrap().as_number().unwrap().as_i64(), Some(-42));
        assert_eq!(Value::parse(b"18446744073709551616").unwrap().as_number().unwrap().as_u64(), None);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn escapes_strings_for_output() {
        let mut out = [0u8; 64];
        let mut at = 0;
        write_escaped(&mut out, &mut at, "a\"b\\c\n\u{1}é").unwrap();
        let text = &out[..at];
        assert_eq!(text, r#""a\"b\\c\n\u0001é""#.as_bytes());
        assert_eq!(Value::parse(text).unwrap().as_str().unwrap(), "a\"b\\c\n\u{1}é");
        let mut small = [0u8; 3];
        assert_eq!(write_escaped(&mut small, &mut 0, "abc"), None);
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Data<'a> {
        #[serde(rename = "requestId")]
        request_id: &'a str,
        text: &'a str,
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn deserialize_works_around_surrogate_pairs() {
        let text = br#"{"skipped":"\ud83d\ude00","requestId":"r-1","text":"hi \ud83d\ude00"}"#;
        // serde-json-core alone fails on this valid text.
        assert!(serde_json_core::from_slice_escaped::<Data>(text, &mut [0u8; 64]).is_err());
        let v = Value::parse(text).unwrap();
        let mut scratch = [0u8; 128];
        let data: Data = v.deserialize(&mut scratch, &mut [0u8; 64]).unwrap();
        assert_eq!(data, Data { request_id: "r-1", text: "hi 😀" });
        assert_eq!(v.deserialize::<Data>(&mut [0u8; 10], &mut [0u8; 64]), Err(DeserializeError::ScratchTooSmall));
    }
}
