//! The binding's own messages (the failures of its calls that the core
//! does not word), numbered after the core's (`copilot_core::MESSAGES`).
//! As the core's, each is the token `"\u{3}<number>\u{4}"` in the module
//! (`--cfg copilot_message_ids`, `scripts/build-wasm`) and the JS client
//! puts the text back from `policy.json`'s `messages`, where these follow
//! the core's ([`BINDING_MESSAGES`], held equal by the policy's tests).

macro_rules! messages {
    ($($number:literal $name:ident = $text:literal,)*) => {
        $(
            #[cfg(not(copilot_message_ids))]
            pub(crate) const $name: &str = $text;
            #[cfg(copilot_message_ids)]
            pub(crate) const $name: &str = concat!("\u{3}", $number, "\u{4}");
        )*

        /// Every message's text, in the order of its number.
        #[cfg(test)]
        pub(crate) static BINDING_MESSAGES: &[&str] = &[$($text,)*];

        /// Each message's number, in the order of [`BINDING_MESSAGES`].
        #[cfg(test)]
        pub(crate) static NUMBERS: &[usize] = &[$($number,)*];
    };
}

messages! {
    50 UNKNOWN_SETTLE_MODE = "unknown settle mode",
    51 TOO_MANY_REQUESTS = "too many requests in flight",
    52 UNKNOWN_CAUSE = "unknown cause ",
    53 NO_SESSION_RESERVED = "no session reserved under tag ",
    54 NOT_AN_OBLIGATION_ID = "not an obligation id",
    55 PARAMS_NOT_JSON = "params are not JSON: ",
}
