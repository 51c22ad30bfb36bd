//! Numbers and messages as text without `core::fmt`: a binding that
//! passes messages on as text (through `write_message`) links none of it,
//! and in WebAssembly that is a quarter of the module. Used by the framing,
//! the JSON and envelope errors and the engine; it uses nothing of the
//! crate.

use core::fmt;

/// Writes `n` in decimal to a message sink (see [`fmt_parts`]).
pub(crate) fn write_decimal(n: u64, out: &mut dyn FnMut(&str)) {
    let mut digits = [0; 20];
    // ASCII digits: always UTF-8.
    out(core::str::from_utf8(itoa(n, &mut digits)).unwrap_or("0"));
}

/// Shows a message that `write` produces in parts. Error messages with
/// numbers are written this way, not with `write!`, so that a binding that
/// passes them on (as text, through `write_message`) links no `core::fmt`:
/// in WebAssembly that is a quarter of the module.
pub(crate) fn fmt_parts(f: &mut fmt::Formatter<'_>, write: impl FnOnce(&mut dyn FnMut(&str))) -> fmt::Result {
    let mut result = Ok(());
    write(&mut |part| {
        if result.is_ok() {
            result = f.write_str(part);
        }
    });
    result
}

/// Writes `n` in decimal at the end of `buf`; returns the digits. For
/// hosts and bindings too, which write numbers without `core::fmt`.
pub fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::itoa;

    #[test]
    fn digits() {
        let mut buf = [0; 20];
        assert_eq!(itoa(0, &mut buf), b"0");
        assert_eq!(itoa(1_234_567, &mut buf), b"1234567");
        assert_eq!(itoa(u64::MAX, &mut buf), b"18446744073709551615");
    }
}
