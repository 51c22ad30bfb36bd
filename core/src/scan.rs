//! The validating scan of a JSON text (RFC 8259): one pass that checks the
//! whole text and tells a [`Visitor`] where keys and values are. The
//! zero-copy access to validated text is `json`'s.
//!
//! Most of a Copilot event is string content and short keys, so strings are
//! read a word (eight bytes) at a time: a few integer operations mark the
//! bytes that end a plain ASCII run (SWAR, no `unsafe`), and the scan jumps
//! to the first of them.

/// How deeply arrays and objects may nest. Deeper texts are rejected with
/// [`JsonErrorKind::TooDeep`]; the scanner keeps no recursion, so this bounds
/// only a 16-byte bit stack.
pub const MAX_DEPTH: usize = 128;

/// Why a text is not JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The text ends inside a value, or holds no value at all.
    UnexpectedEnd,
    /// A byte that cannot stand here.
    UnexpectedByte,
    /// The text is not UTF-8.
    InvalidUtf8,
    /// A raw control character (below U+0020) inside a string.
    ControlCharacter,
    /// A backslash escape that JSON does not define, or a bad `\u` sequence.
    InvalidEscape,
    /// A number that does not follow the JSON grammar.
    InvalidNumber,
    /// Containers nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Something other than white space after the value.
    TrailingCharacters,
}

/// A JSON syntax error and the byte offset where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonError {
    /// What is wrong.
    pub kind: JsonErrorKind,
    /// Byte offset into the text.
    pub offset: usize,
}

/// What the scanner reports while it validates; lets one pass both check a text
/// and remember where interesting members are.
pub(crate) trait Visitor {
    /// A member key of an object whose members sit at `depth` (the root value
    /// is depth 0, so the root object's members are depth 1). `key` is the
    /// validated text between the quotes; `escaped` tells whether it holds a
    /// backslash escape.
    fn key(&mut self, depth: usize, key: &[u8], escaped: bool);
    /// An array element starts at `depth`: it has no key.
    fn element(&mut self, depth: usize);
    /// The value at `depth` spans `text[start..end]`.
    fn value(&mut self, depth: usize, start: usize, end: usize);
}

/// One bit per open container: set for an object, clear for an array.
struct Containers {
    bits: [u64; MAX_DEPTH / 64],
    starts: [u32; 8],
    len: usize,
}

impl Containers {
    fn push(&mut self, object: bool, start: usize, offset: usize) -> Result<(), JsonError> {
        if self.len == MAX_DEPTH {
            return Err(JsonError { kind: JsonErrorKind::TooDeep, offset });
        }
        let (word, bit) = (self.len / 64, self.len % 64);
        if object {
            self.bits[word] |= 1 << bit;
        } else {
            self.bits[word] &= !(1 << bit);
        }
        // Visitors only care about shallow containers; deeper starts are
        // never reported, so they need no storage.
        if self.len < self.starts.len() {
            self.starts[self.len] = start as u32;
        }
        self.len += 1;
        Ok(())
    }

    fn top_is_object(&self) -> bool {
        let i = self.len - 1;
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }
}

#[inline]
fn err(kind: JsonErrorKind, offset: usize) -> JsonError {
    JsonError { kind, offset }
}

/// The index of the first byte at or after `i` that is not JSON white space.
/// Compact text (what the CLI sends) has none between tokens: a byte above
/// the space is answered by one test, without the loop (inlined everywhere
/// but in builds sized for space: wasm, bare metal).
#[cfg_attr(not(any(target_arch = "wasm32", target_os = "none")), inline(always))]
#[cfg_attr(any(target_arch = "wasm32", target_os = "none"), inline)]
pub(crate) fn skip_ws(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(&c) if c > b' ' => i,
        _ => skip_ws_loop(b, i),
    }
}

#[inline]
fn skip_ws_loop(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = ONES * 0x80;

/// Marks with bit 7 the bytes of `w` (little-endian) that end a plain ASCII
/// run inside a string: a quote, a backslash, a control character, or a byte
/// above 0x7F (the start of a character to check as UTF-8). Flipping bit 1
/// maps the quote (0x22) to 0x20 and the control characters onto themselves,
/// so one subtraction of 0x21 borrows exactly at both; a byte is a backslash
/// exactly where it XOR 0x5C is zero, where subtracting one borrows. No byte
/// above 0x7F starts a borrow. Bytes above the first borrow may be marked
/// falsely (a `#` after a quote, say), so only the lowest mark is exact, and
/// only it is used.
#[inline(always)]
fn string_stops(w: u64) -> u64 {
    let quote_or_control = (w ^ (ONES * 0x02)).wrapping_sub(ONES * 0x21);
    let backslash = (w ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
    (quote_or_control | backslash | w) & HIGH
}

/// Whether `b` holds a backslash: a word at a time, as escapes are looked
/// for each time a key or an id is compared. A byte of `w ^ 0x5C..` is zero
/// exactly where `w` holds a backslash, and a word has a zero byte exactly
/// when `(x - 0x01..) & !x` has a high bit set.
#[cfg(not(any(target_arch = "wasm32", target_os = "none")))]
pub(crate) fn has_backslash(b: &[u8]) -> bool {
    let has = |w: u64| {
        let x = w ^ (ONES * u64::from(b'\\'));
        x.wrapping_sub(ONES) & !x & HIGH != 0
    };
    let mut words = b.chunks_exact(8);
    // The last bytes padded with zeros, which are not backslashes.
    let mut last = [0; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    words.any(|w| has(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))) || has(u64::from_le_bytes(last))
}

/// Builds sized for space (wasm, bare metal) search with `contains`.
#[cfg(any(target_arch = "wasm32", target_os = "none"))]
pub(crate) fn has_backslash(b: &[u8]) -> bool {
    b.contains(&b'\\')
}

/// Marks with bit 7 the ASCII bytes of `w` (below 0x80): exact in every
/// byte, as nothing borrows.
#[inline(always)]
fn ascii_bytes(w: u64) -> u64 {
    !w & HIGH
}

/// The eight bytes at `i`; past the end of `b`, quotes, so that a string cut
/// off by the end of the text stops exactly at the end.
#[inline(always)]
fn word_at(b: &[u8], i: usize) -> u64 {
    match b.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        Some(word) => u64::from_le_bytes(*word),
        None => {
            let mut word = [b'"'; 8];
            let rest = &b[i.min(b.len())..];
            word[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(word)
        }
    }
}

/// The index of the first byte at or after `i` that `stops` marks; at or
/// past `b.len()` when there is none before the end. Sixteen bytes to a
/// test while sixteen are left, then a word at a time.
#[inline(always)]
fn next_stop(b: &[u8], mut i: usize, stops: impl Fn(u64) -> u64) -> usize {
    // Builds sized for space (wasm, bare metal) read a word at a time only.
    #[cfg(not(any(target_arch = "wasm32", target_os = "none")))]
    while let Some(pair) = b.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        let (lo, hi) = pair.split_at(8);
        let lo = stops(u64::from_le_bytes(lo.try_into().unwrap_or([0; 8])));
        let hi = stops(u64::from_le_bytes(hi.try_into().unwrap_or([0; 8])));
        if lo | hi != 0 {
            // Computed rather than branched on, as where a stop falls is
            // not for a processor to guess: `trailing_zeros` of 0 is 64, so
            // the second word's count adds on when the first has no mark.
            let at = lo.trailing_zeros() + (hi.trailing_zeros() & 0u32.wrapping_sub(u32::from(lo == 0)));
            return i + (at / 8) as usize;
        }
        i += 16;
    }
    loop {
        let found = stops(word_at(b, i));
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
}

/// Validates the string whose opening quote is at `i`; returns the index after
/// the closing quote, and whether the string holds an escape.
///
/// Most strings in a Copilot event are keys, ids and text without escapes:
/// those are read here, inlined, up to their closing quote. At an escape, a
/// byte above 0x7F or the last sixteen bytes of the text, the general scan
/// goes on where that left off.
#[inline(always)]
pub(crate) fn scan_string(b: &[u8], i: usize) -> Result<(usize, bool), JsonError> {
    // Builds sized for space (wasm, bare metal) do without the inlined copy.
    #[cfg(not(any(target_arch = "wasm32", target_os = "none")))]
    let i = match plain_string_end(b, i + 1) {
        Ok(end) => return Ok((end, false)),
        Err(first_stop) => first_stop,
    };
    #[cfg(any(target_arch = "wasm32", target_os = "none"))]
    let i = i + 1;
    scan_string_from(b, i)
}

/// The index after the closing quote when the string from `start` is plain
/// ASCII up to it; else `Err` with where to go on: the first byte that needs
/// attention, or where fewer than sixteen bytes are left. Sixteen bytes to a
/// branch, so that most strings (keys, ids, timestamps, plain text) are read
/// without a call.
#[cfg(not(any(target_arch = "wasm32", target_os = "none")))]
#[inline(always)]
fn plain_string_end(b: &[u8], mut start: usize) -> Result<usize, usize> {
    while let Some(pair) = b.get(start..).and_then(<[u8]>::first_chunk::<16>) {
        let (lo, hi) = pair.split_at(8);
        let mut stops = string_stops(u64::from_le_bytes(lo.try_into().unwrap_or([0; 8])));
        let mut at = 0;
        if stops == 0 {
            stops = string_stops(u64::from_le_bytes(hi.try_into().unwrap_or([0; 8])));
            at = 8;
        }
        if stops != 0 {
            let at = at + (stops.trailing_zeros() / 8) as usize;
            return if pair[at] == b'"' { Ok(start + at + 1) } else { Err(start + at) };
        }
        start += 16;
    }
    Err(start)
}

/// The general string scan, from `i`, which is inside a string with only
/// plain ASCII before it. It jumps from stop to stop ([`next_stop`]): at a
/// byte above 0x7F, the whole run of such bytes is checked as UTF-8 by
/// `core::str::from_utf8` in one call (a character at a time would cost a
/// call each in text of other scripts). A bad UTF-8 sequence
/// is reported only once the string is known to end well, so errors come in
/// text order.
#[inline(never)]
fn scan_string_from(b: &[u8], mut i: usize) -> Result<(usize, bool), JsonError> {
    let mut bad_utf8 = None;
    let mut escaped = false;
    loop {
        i = next_stop(b, i, string_stops);
        match b.get(i) {
            None => return Err(err(JsonErrorKind::UnexpectedEnd, b.len())),
            Some(b'"') => {
                if let Some(at) = bad_utf8 {
                    return Err(err(JsonErrorKind::InvalidUtf8, at));
                }
                return Ok((i + 1, escaped));
            }
            Some(b'\\') => {
                escaped = true;
                match b.get(i + 1) {
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
                }
            }
            Some(0x80..) => {
                // The run of bytes above 0x7F, checked in one call. An ASCII
                // byte ends every UTF-8 sequence, good or bad, so runs
                // checked one by one find the first bad sequence of the
                // string where one check of the whole string would.
                let end = next_stop(b, i, ascii_bytes).min(b.len());
                if let Err(e) = core::str::from_utf8(&b[i..end]) {
                    bad_utf8.get_or_insert(i + e.valid_up_to());
                }
                i = end;
            }
            Some(_) => return Err(err(JsonErrorKind::ControlCharacter, i)),
        }
    }
}

fn scan_digits(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// Validates the number starting at `i`; returns the index after it.
fn scan_number(b: &[u8], start: usize) -> Result<usize, JsonError> {
    let mut i = start;
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
    // A number must be followed by a delimiter, not glued to a letter.
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

/// Validates `text` in one pass, telling `visitor` about keys and value spans.
/// Returns the span of the root value (white space trimmed).
pub(crate) fn scan<V: Visitor>(text: &[u8], visitor: &mut V) -> Result<(usize, usize), JsonError> {
    // UTF-8 is checked string by string (bytes above 0x7F are invalid
    // anywhere else), and only for strings that hold such bytes.
    let b = text;
    let mut stack = Containers { bits: [0; MAX_DEPTH / 64], starts: [0; 8], len: 0 };
    let mut i = skip_ws(b, 0);
    let root_start = i;
    // `expect_value`: the next token starts a value (after `[`, `,` or `:`).
    'value: loop {
        // Parse one value starting at i (white space already skipped).
        let start = i;
        let depth = stack.len;
        // Strings are most values: tested first, they skip the jump table
        // (not in builds sized for space: wasm, bare metal).
        if cfg!(not(any(target_arch = "wasm32", target_os = "none"))) && b.get(i) == Some(&b'"') {
            i = scan_string(b, i)?.0;
            visitor.value(depth, start, i);
        } else {
            match b.get(i) {
                None => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
                Some(b'{') => {
                    stack.push(true, start, i)?;
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b'}') {
                        stack.len -= 1;
                        i += 1;
                        visitor.value(depth, start, i);
                    } else {
                        i = scan_key(b, i, stack.len, visitor)?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    stack.push(false, start, i)?;
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&b']') {
                        stack.len -= 1;
                        i += 1;
                        visitor.value(depth, start, i);
                    } else {
                        visitor.element(stack.len);
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    i = scan_string(b, i)?.0;
                    visitor.value(depth, start, i);
                }
                Some(b'-' | b'0'..=b'9') => {
                    i = scan_number(b, i)?;
                    visitor.value(depth, start, i);
                }
                Some(b't') => {
                    i = scan_literal(b, i, b"true")?;
                    visitor.value(depth, start, i);
                }
                Some(b'f') => {
                    i = scan_literal(b, i, b"false")?;
                    visitor.value(depth, start, i);
                }
                Some(b'n') => {
                    i = scan_literal(b, i, b"null")?;
                    visitor.value(depth, start, i);
                }
                Some(_) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
            }
        }
        // A value just ended: close containers or move to the next member.
        loop {
            i = skip_ws(b, i);
            if stack.len == 0 {
                return if i == b.len() {
                    Ok((root_start, skip_back_ws(b)))
                } else {
                    Err(err(JsonErrorKind::TrailingCharacters, i))
                };
            }
            let object = stack.top_is_object();
            match (b.get(i), object) {
                (Some(b','), true) => {
                    i = scan_key(b, skip_ws(b, i + 1), stack.len, visitor)?;
                    continue 'value;
                }
                (Some(b','), false) => {
                    i = skip_ws(b, i + 1);
                    visitor.element(stack.len);
                    continue 'value;
                }
                (Some(b'}'), true) | (Some(b']'), false) => {
                    stack.len -= 1;
                    i += 1;
                    if stack.len < stack.starts.len() {
                        visitor.value(stack.len, stack.starts[stack.len] as usize, i);
                    }
                }
                (None, _) => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
                (Some(_), _) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
            }
        }
    }
}

pub(crate) fn skip_back_ws(b: &[u8]) -> usize {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b' ' | b'\t' | b'\n' | b'\r') {
        end -= 1;
    }
    end
}

/// Reads `"key" :` at `i` and returns the index of the member's value.
#[cfg_attr(not(any(target_arch = "wasm32", target_os = "none")), inline(always))]
#[cfg_attr(any(target_arch = "wasm32", target_os = "none"), inline)]
fn scan_key<V: Visitor>(b: &[u8], i: usize, depth: usize, visitor: &mut V) -> Result<usize, JsonError> {
    match b.get(i) {
        Some(b'"') => {}
        None => return Err(err(JsonErrorKind::UnexpectedEnd, i)),
        Some(_) => return Err(err(JsonErrorKind::UnexpectedByte, i)),
    }
    let (end, escaped) = scan_string(b, i)?;
    visitor.key(depth, &b[i + 1..end - 1], escaped);
    // In compact text the colon follows the key's quote.
    let colon = if b.get(end) == Some(&b':') { end } else { skip_ws(b, end) };
    match b.get(colon) {
        Some(b':') => Ok(skip_ws(b, colon + 1)),
        None => Err(err(JsonErrorKind::UnexpectedEnd, colon)),
        Some(_) => Err(err(JsonErrorKind::UnexpectedByte, colon)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a byte ends a plain ASCII run in a string, byte by byte.
    fn is_stop(c: u8) -> bool {
        c == b'"' || c == b'\\' || !(0x20..=0x7f).contains(&c)
    }

    /// Against [`is_stop`]: every pair of byte values at every pair of
    /// positions in a word (the rest plain text), so that every byte is
    /// tried both where it is the first stop and behind another stop, whose
    /// borrow must not move the lowest mark.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn string_stops_marks_the_first_stop_of_every_word() {
        for first in 0..8 {
            for second in first + 1..8 {
                for a in 0..=255u8 {
                    for b in 0..=255u8 {
                        let mut word = [b'a'; 8];
                        word[first] = a;
                        word[second] = b;
                        let marks = string_stops(u64::from_le_bytes(word));
                        let expected = word.iter().position(|&c| is_stop(c));
                        let found = (marks != 0).then(|| (marks.trailing_zeros() / 8) as usize);
                        assert_eq!(found, expected, "{word:x?}");
                    }
                }
            }
        }
    }

    /// Against `contains`: every byte value at every position of texts up to
    /// three words long, among plain bytes or among bytes next to a
    /// backslash (`[`, `]`, 0xDC), which a wrong mask could take for one.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn has_backslash_finds_it_at_every_position() {
        for len in 0..=24 {
            for at in 0..len {
                for fill in [b'a', b'[', b']', 0xdc] {
                    for c in 0..=255u8 {
                        let mut text = [fill; 24];
                        text[at] = c;
                        let text = &text[..len];
                        assert_eq!(has_backslash(text), text.contains(&b'\\'), "{text:x?}");
                    }
                }
            }
        }
    }
}
