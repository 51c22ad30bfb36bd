//! The MCP servers of the scripted model server (streamable HTTP, `POST`
//! only, one JSON answer per request):
//!
//! - `/mcp` and `/mcp/readonly`: the built-in GitHub MCP server, with no
//!   tools: enough for the CLI to count it as connected.
//! - [`MCP_OAUTH_PATH`]: a server behind OAuth. A request without
//!   `Authorization: Bearer` [`MCP_OAUTH_TOKEN`] gets `401` with a challenge
//!   that names its protected-resource metadata (RFC 9728, served at
//!   `/.well-known/oauth-protected-resource` followed by the path); with
//!   the token it offers one tool, [`MCP_OAUTH_TOOL`]. A test gives a
//!   session this server (`{"type": "http", "url": <url> + MCP_OAUTH_PATH}`)
//!   and an MCP OAuth handler that answers with the token: the model is
//!   then offered the tool, which it could not be without the token.
//!
//! Each request is kept in [`other_requests`](super::ScriptedModel::other_requests)
//! as `METHOD target (json-rpc method)`, a request to the OAuth server
//! followed by `[token]` or `[no token]`.

use serde_json::{json, Value};

use super::{lock, Answer, Request, Shared};

/// The path of the MCP server behind OAuth.
pub const MCP_OAUTH_PATH: &str = "/mcp/oauth";
/// The access token it accepts.
pub const MCP_OAUTH_TOKEN: &str = "scripted-mcp-token";
/// The one tool it offers once authorized (the CLI names it
/// `<server name>-whoami`).
pub const MCP_OAUTH_TOOL: &str = "whoami";
/// Where a resource's protected-resource metadata lives (RFC 9728), before
/// the resource's path.
const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";

/// The answer of a request to one of the MCP servers, or `None` when the
/// request is for none of them.
pub(super) fn route(shared: &Shared, request: &Request) -> Option<Answer> {
    let path = request.path();
    if path == "/mcp/readonly" || path == "/mcp" {
        return Some(serve(shared, request, "", "scripted-github-mcp", &[]));
    }
    if path == MCP_OAUTH_PATH {
        let bearer = format!("Bearer {MCP_OAUTH_TOKEN}");
        if request.header("authorization") != Some(bearer.as_str()) {
            lock(&shared.book).other_requests.push(format!("{} [no token]", request.line()));
            let metadata = format!("{}{RESOURCE_METADATA}{MCP_OAUTH_PATH}", shared.url);
            return Some(Answer::Unauthorized(format!("Bearer resource_metadata=\"{metadata}\"")));
        }
        let tool = json!({
            "name": MCP_OAUTH_TOOL,
            "description": "Says who the server thinks is calling.",
            "inputSchema": { "type": "object", "properties": {} }
        });
        return Some(serve(shared, request, " [token]", "scripted-oauth-mcp", &[tool]));
    }
    if path == format!("{RESOURCE_METADATA}{MCP_OAUTH_PATH}") {
        lock(&shared.book).other_requests.push(request.line());
        return Some(Answer::Json(
            200,
            json!({
                "resource": format!("{}{MCP_OAUTH_PATH}", shared.url),
                "authorization_servers": [format!("{}/oauth", shared.url)],
                "bearer_methods_supported": ["header"]
            }),
        ));
    }
    None
}

/// An MCP server named `name` with `tools`; `note` follows the request in
/// the book.
fn serve(shared: &Shared, request: &Request, note: &str, name: &str, tools: &[Value]) -> Answer {
    let message: Option<Value> = serde_json::from_slice(&request.body).ok();
    let method = message.as_ref().and_then(|m| m.get("method")).and_then(Value::as_str);
    let line = match method {
        Some(m) => format!("{} ({m}){note}", request.line()),
        None => format!("{}{note}", request.line()),
    };
    lock(&shared.book).other_requests.push(line);
    if request.method != "POST" {
        // GET would open a server-to-client event stream; DELETE would end
        // an MCP session. Neither is needed.
        return Answer::Json(405, json!({ "message": "scripted model server: POST only" }));
    }
    let Some(message) = &message else {
        return Answer::Json(
            400,
            json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32700, "message": "Parse error" } }),
        );
    };
    // Notifications (no id) and responses (no method) get no answer.
    let (Some(id), Some(method)) = (message.get("id"), method) else { return Answer::Accepted };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": { "tools": {} },
            "serverInfo": { "name": name, "version": "0.1.0" }
        }),
        "tools/list" => json!({ "tools": tools }),
        "tools/call" if !tools.is_empty() => {
            json!({ "content": [{ "type": "text", "text": format!("authorized by {MCP_OAUTH_TOKEN}") }] })
        }
        "ping" => json!({}),
        // Including `server/discover`, which the CLI tries first.
        _ => {
            return Answer::Json(
                200,
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "Method not found" } }),
            )
        }
    };
    Answer::Json(200, json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}
