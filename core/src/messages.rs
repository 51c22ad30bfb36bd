//! The texts of the core's messages (its errors' `message` and
//! `write_message`), each under a number.
//!
//! The WebAssembly module is built with `--cfg copilot_message_ids`
//! (`scripts/build-wasm`): there each message is the token
//! `"\u{3}<number>\u{4}"` instead of its text, which keeps about 2.5 KB of
//! text out of the module, and the JS client puts the texts back from
//! `policy.json`'s `messages` ([`MESSAGES`], held equal by the binding's
//! tests). Every other build carries the texts.

macro_rules! messages {
    ($($number:literal $name:ident = $text:literal,)*) => {
        $(
            #[cfg(not(copilot_message_ids))]
            pub(crate) const $name: &str = $text;
            #[cfg(copilot_message_ids)]
            pub(crate) const $name: &str = concat!("\u{3}", $number, "\u{4}");
        )*

        /// Every message's text, by its number.
        pub static MESSAGES: &[&str] = &[$($text,)*];

        /// Each message's number, in the order of [`MESSAGES`] (its index).
        #[cfg(test)]
        static NUMBERS: &[usize] = &[$($number,)*];
    };
}

messages! {
    0 ANSWER_STALE = "the wait was already answered",
    1 ANSWER_INVALID_PAYLOAD = "the answer is not valid JSON; the refusal was sent instead",
    2 ANSWER_NOT_DECLINABLE = "a request to this client cannot be left to another client; the refusal was sent instead",
    3 ANSWER_FULL = "no room to send; take what is queued and retry",
    4 ANSWER_TOO_LARGE = "the answer is too large; the refusal was sent",
    5 OPEN_REJECTED = "the CLI refused to open the session",
    6 OPEN_UNREADABLE = "the CLI's answer to the open request is unreadable",
    7 ENCODE_BUFFER_TOO_SMALL = "output buffer too small for the message",
    8 ENCODE_SERIALIZE = "payload could not be serialized",
    9 RESERVE_FULL = "session table is full",
    10 RESERVE_DUPLICATE = "a session with this id is already open",
    11 RESERVE_INVALID_ID = "session id is empty or longer than 64 bytes",
    12 STALE_HANDLE = "session handle refers to a released session",
    13 RESERVE_NOT_AWAITING_ID = "session is not waiting for a server-assigned id",
    14 SHAPE_NOTHING = "the handler gave no answer",
    15 SHAPE_NOT_AN_OBJECT = "the handler's answer is not a JSON object",
    16 SHAPE_MISSING = "the handler's answer lacks a required member",
    17 SHAPE_WRONG_TYPE = "a member of the handler's answer is not of its type",
    18 CONTENT_NOT_AN_OBJECT = "the elicitation's content is not a JSON object",
    19 OPTIONS_NOT_AN_OBJECT = "the session options are not a JSON object nested at most 128 deep",
    20 SESSION_ID_TOO_LONG = "the session id is longer than 64 bytes",
    21 FRAME_GARBAGE = "bytes before a frame header that do not start one",
    22 FRAME_INVALID_HEADER = "malformed frame header line (expected `Name: value` and CRLF)",
    23 FRAME_MISSING_LENGTH = "frame header without Content-Length",
    24 FRAME_INVALID_LENGTH = "invalid or repeated Content-Length",
    25 FRAME_HEADER_TOO_LONG = "frame header longer than ",
    26 BYTES = " bytes",
    27 FRAME_TRUNCATED = "stream ended inside a frame",
    28 FRAME_OF = "frame of ",
    29 FRAME_EXCEEDS = " bytes exceeds the ",
    30 FRAME_SKIPPED = "-byte buffer; skipped",
    31 JSON_UNEXPECTED_END = "unexpected end of JSON text",
    32 JSON_UNEXPECTED_BYTE = "unexpected byte",
    33 JSON_INVALID_UTF8 = "JSON text is not valid UTF-8",
    34 JSON_CONTROL_CHARACTER = "control character inside a string",
    35 JSON_INVALID_ESCAPE = "invalid escape sequence",
    36 JSON_INVALID_NUMBER = "invalid number",
    37 JSON_TOO_DEEP = "JSON nested deeper than the supported depth",
    38 JSON_TRAILING = "characters after the JSON value",
    39 AT_BYTE = " at byte ",
    40 DECODE_PARSE_ERROR = "parse error: ",
    41 DECODE_NOT_AN_OBJECT = "invalid request: message is not a JSON object",
    42 DECODE_BAD_VERSION = "invalid request: \"jsonrpc\" must be \"2.0\"",
    43 DECODE_BAD_METHOD = "invalid request: \"method\" must be a string",
    44 DECODE_BAD_ID = "invalid request: bad or missing \"id\"",
    45 DECODE_BAD_PARAMS = "invalid request: \"params\" must be an object or array",
    46 DECODE_NOT_A_MESSAGE = "invalid request: need \"method\", or exactly one of \"result\" and \"error\"",
    47 DECODE_BAD_ERROR_OBJECT = "invalid response: \"error\" needs an integer \"code\" and a string \"message\"",
    48 DECODE_BAD_EVENT = "invalid session.event: needs \"sessionId\" and an \"event\" with a string \"type\"",
    49 DECODE_BAD_LIFECYCLE = "invalid session.lifecycle: needs \"type\" and \"sessionId\"",
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_number_is_its_index() {
        assert!(super::NUMBERS.iter().enumerate().all(|(i, n)| i == *n));
        assert_eq!(super::NUMBERS.len(), super::MESSAGES.len());
    }

    #[test]
    fn a_text_is_the_message_where_no_cfg_says_otherwise() {
        assert_eq!(super::ANSWER_STALE, super::MESSAGES[0]);
    }
}
