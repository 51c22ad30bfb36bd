//! Defaults of what a client writes in a session's config, and the
//! WebSocket bridge's token subprotocol, once for every host: the Rust
//! host's typed configs write them, the JavaScript client fills in what
//! its users leave out from the same data (`policy.json`).

/// How an MCP server's `type` is told when the config gives none: the
/// first of these members the config has names the type (a `url` is a
/// remote server over streamable HTTP, a `command` a local one the CLI
/// starts), else [`MCP_DEFAULT_TYPE`].
pub static MCP_TYPE_BY_MEMBER: &[(&str, &str)] = &[("url", "http"), ("command", "local")];

/// The type of an MCP server whose config names none and has none of the
/// members of [`MCP_TYPE_BY_MEMBER`].
pub const MCP_DEFAULT_TYPE: &str = "local";

/// The types of a local MCP server (the CLI starts it and talks over
/// stdio): their `args` are `[]` when the config gives none, as the CLI's
/// schema requires them.
pub static MCP_LOCAL_TYPES: &[&str] = &["local", "stdio"];

/// The member of an MCP server's config named `cwd` on the wire, as the
/// client's config calls it.
pub const MCP_WORKING_DIRECTORY: (&str, &str) = ("workingDirectory", "cwd");

/// The type of an MCP server whose config has the members `has` says it
/// has and names no type ([`MCP_TYPE_BY_MEMBER`]).
pub fn mcp_server_type(has: impl Fn(&str) -> bool) -> &'static str {
    MCP_TYPE_BY_MEMBER.iter().find(|(member, _)| has(member)).map_or(MCP_DEFAULT_TYPE, |(_, ty)| ty)
}

/// The API of a BYOK provider whose config names none (the CLI's default).
pub const PROVIDER_DEFAULT_TYPE: &str = "openai";

/// The member set `true` in a BYOK provider's config when the client gives
/// bearer tokens through `providerToken.getToken`.
pub const PROVIDER_TOKEN_CALLBACK_FLAG: &str = "hasBearerTokenProvider";

/// The provider name of a session's own BYOK provider in
/// `providerToken.getToken`: a client with one token callback answers for
/// this name only.
pub const PROVIDER_TOKEN_NAME: &str = "default";

/// The mode of a system message config that names none.
pub const SYSTEM_MESSAGE_DEFAULT_MODE: &str = "append";

/// The action of a system message section rewritten by the client (its
/// transform is called through `systemMessage.transform`).
pub const SECTION_TRANSFORM_ACTION: &str = "transform";

/// The members of a `largeOutput` config whose wire name differs (the
/// config's name, the wire's), as the official SDKs rename them.
pub static LARGE_OUTPUT_RENAMES: &[(&str, &str)] = &[("outputDirectory", "outputDir")];

/// The prefix of the WebSocket subprotocol that carries the bridge's token
/// (`copilot.token.<TOKEN>`): browsers can offer a subprotocol, and the
/// token stays out of URLs and logs of them.
pub const BRIDGE_TOKEN_PROTOCOL_PREFIX: &str = "copilot.token.";

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_server_type_comes_from_the_first_member_it_has() {
        assert_eq!(mcp_server_type(|m| m == "url"), "http");
        assert_eq!(mcp_server_type(|m| m == "command"), "local");
        assert_eq!(mcp_server_type(|m| m == "url" || m == "command"), "http", "the url wins");
        assert_eq!(mcp_server_type(|_| false), MCP_DEFAULT_TYPE);
        assert!(MCP_LOCAL_TYPES.contains(&MCP_DEFAULT_TYPE));
    }
}
